"""`__consumer_offsets` keys and values in Kafka's binary formats (pure struct, no kio).

What Kafka writes (and what `kafka-console-consumer --formatter OffsetsMessageFormatter` and
`GroupMetadataMessageFormatter` decode), from `group-coordinator/src/main/resources/common/message/`:

- Key: int16 version, then the fields of that version's schema.
  - 0/1 -> OffsetCommitKey    {group string, topic string, partition int32}    (we write v1)
  - 2   -> GroupMetadataKey   {group string}
  - 3..8, 16 -> KIP-848 consumer group records (below); other types (share and streams groups) are
    skipped on replay.
- OffsetCommitValue (we write v3): offset int64, leaderEpoch int32 (v3+), metadata string,
  commitTimestamp int64, expireTimestamp int64 (v1 only). v4 is flexible (compact strings, tagged
  fields) and decoded but not written.
- GroupMetadataValue (we write v3): protocolType string, generation int32, protocol nullable string,
  leader nullable string, currentStateTimestamp int64 (v2+), members [memberId string,
  groupInstanceId nullable string (v3+), clientId string, clientHost string, rebalanceTimeout int32 (v1+),
  sessionTimeout int32, subscription bytes, assignment bytes]. v4 (flexible) is decoded as well.
- A deletion is the key with a null value (a tombstone); compaction then drops both.
Strings are int16-length UTF-8 (-1 = null); bytes are int32-length.

KIP-848 consumer group records, as Kafka 4.1's GroupCoordinatorRecordHelpers writes them. The key's
int16 is the record type (the schema's `apiKey`); keys are not flexible. Every value is version 0 and
flexible (compact strings and arrays, uvarint lengths + 1, a tagged-field section after each struct):
- 3  ConsumerGroupMetadataKey {group} -> {epoch int32; tag 0: metadataHash int64}
- 4  ConsumerGroupPartitionMetadataKey {group}: deprecated in 4.1, only ever tombstoned (decoded, not
     used)
- 5  ConsumerGroupMemberMetadataKey {group, member} -> {instanceId?, rackId?, clientId, clientHost,
     subscribedTopicNames [string], subscribedTopicRegex?, rebalanceTimeoutMs int32, serverAssignor?;
     tag 0: classicMemberMetadata {sessionTimeoutMs int32, supportedProtocols [{name, metadata bytes}]}}
- 6  ConsumerGroupTargetAssignmentMetadataKey {group} -> {assignmentEpoch int32}
- 7  ConsumerGroupTargetAssignmentMemberKey {group, member} -> {topicPartitions [{topicId uuid,
     partitions [int32]}]}
- 8  ConsumerGroupCurrentMemberAssignmentKey {group, member} -> {memberEpoch int32,
     previousMemberEpoch int32, state int8 (0 stable, 1 unrevoked, 2 unreleased), assignedPartitions,
     partitionsPendingRevocation (both [{topicId, partitions}])}
- 16 ConsumerGroupRegularExpressionKey {group, regex} -> {topics [string], version int64,
     timestamp int64}
Tags this code does not know (fields of later Kafka versions) are skipped when reading.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from minikafka.protocol.errors import CorruptRecord

OFFSET_KEY_VERSION = 1
OFFSET_VALUE_VERSION = 3
GROUP_KEY_VERSION = 2
GROUP_VALUE_VERSION = 3
# The protocol type of groups whose members use Kafka's consumer protocol (ConsumerProtocol.PROTOCOL_TYPE).
CONSUMER_PROTOCOL_TYPE = "consumer"

# KIP-848 record types (the key's leading int16) and the value version Kafka 4.1 writes for them.
CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_GROUP_REGULAR_EXPRESSION = 16
CONSUMER_GROUP_VALUE_VERSION = 0
# The record types whose key carries a member id after the group id.
_MEMBER_KEYED = frozenset({CONSUMER_GROUP_MEMBER_METADATA, CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
                           CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT})
CONSUMER_GROUP_RECORD_TYPES = frozenset({
    CONSUMER_GROUP_METADATA, CONSUMER_GROUP_PARTITION_METADATA, CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    CONSUMER_GROUP_REGULAR_EXPRESSION, *_MEMBER_KEYED,
})

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # only v1 carries it


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberValue, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    """The key of a KIP-848 consumer group record; `member_id` for types 5, 7 and 8, `regex` for 16."""

    record_type: int
    group: str
    member_id: str | None = None
    regex: str | None = None


# (topic id, sorted partitions) pairs, sorted by topic id: Kafka's [TopicPartitions].
TopicIdPartitions = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue:
    epoch: int
    metadata_hash: int = 0  # tagged (tag 0); 0 is not written


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    # (name, metadata) of a member that joined with the classic protocol; None for a consumer member.
    classic_protocols: tuple[tuple[str, bytes], ...] | None = None
    classic_session_timeout_ms: int = 0  # ClassicMemberMetadata's SessionTimeoutMs


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: TopicIdPartitions


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # Kafka's MemberState value
    assigned_partitions: TopicIdPartitions
    partitions_pending_revocation: TopicIdPartitions


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionValue:
    topics: tuple[str, ...]
    version: int
    timestamp: int


ConsumerGroupValue = (
    ConsumerGroupMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
    | ConsumerGroupRegularExpressionValue
)


# -- writing -------------------------------------------------------------------------------------


def _string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += _I16.pack(-1)
        return
    encoded = value.encode()
    out += _I16.pack(len(encoded))
    out += encoded


def _bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out += _I32.pack(-1)
        return
    out += _I32.pack(len(value))
    out += value


def encode_offset_key(key: OffsetKey) -> bytes:
    out = bytearray(_I16.pack(OFFSET_KEY_VERSION))
    _string(out, key.group)
    _string(out, key.topic)
    out += _I32.pack(key.partition)
    return bytes(out)


def encode_group_key(key: GroupKey) -> bytes:
    out = bytearray(_I16.pack(GROUP_KEY_VERSION))
    _string(out, key.group)
    return bytes(out)


def encode_consumer_group_key(key: ConsumerGroupKey) -> bytes:
    out = bytearray(_I16.pack(key.record_type))
    _string(out, key.group)
    if key.record_type in _MEMBER_KEYED:
        _string(out, key.member_id or "")
    elif key.record_type == CONSUMER_GROUP_REGULAR_EXPRESSION:
        _string(out, key.regex or "")
    return bytes(out)


def encode_key(key: OffsetKey | GroupKey | ConsumerGroupKey) -> bytes:
    if isinstance(key, ConsumerGroupKey):
        return encode_consumer_group_key(key)
    return encode_offset_key(key) if isinstance(key, OffsetKey) else encode_group_key(key)


def encode_offset_value(value: OffsetValue) -> bytes:
    """v3, or v1 when an expire timestamp is set (as Kafka does)."""
    if value.expire_timestamp >= 0:
        out = bytearray(_I16.pack(1))
        out += _I64.pack(value.offset)
        _string(out, value.metadata)
        out += _I64.pack(value.commit_timestamp)
        out += _I64.pack(value.expire_timestamp)
        return bytes(out)
    out = bytearray(_I16.pack(OFFSET_VALUE_VERSION))
    out += _I64.pack(value.offset)
    out += _I32.pack(value.leader_epoch)
    _string(out, value.metadata)
    out += _I64.pack(value.commit_timestamp)
    return bytes(out)


def encode_group_value(value: GroupValue) -> bytes:
    out = bytearray(_I16.pack(GROUP_VALUE_VERSION))
    _string(out, value.protocol_type)
    out += _I32.pack(value.generation)
    _string(out, value.protocol)
    _string(out, value.leader)
    out += _I64.pack(value.current_state_timestamp)
    out += _I32.pack(len(value.members))
    for m in value.members:
        _string(out, m.member_id)
        _string(out, m.group_instance_id)
        _string(out, m.client_id)
        _string(out, m.client_host)
        out += _I32.pack(m.rebalance_timeout)
        out += _I32.pack(m.session_timeout)
        _bytes(out, m.subscription)
        _bytes(out, m.assignment)
    return bytes(out)


# Flexible (compact) encodings of the KIP-848 values.


def _uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _compact_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out.append(0)
        return
    encoded = value.encode()
    _uvarint(out, len(encoded) + 1)
    out += encoded


def _compact_bytes(out: bytearray, value: bytes) -> None:
    _uvarint(out, len(value) + 1)
    out += value


def _tags(out: bytearray, tags: dict[int, bytes]) -> None:
    _uvarint(out, len(tags))
    for tag in sorted(tags):
        _uvarint(out, tag)
        _uvarint(out, len(tags[tag]))
        out += tags[tag]


def _topic_id_partitions(out: bytearray, value: TopicIdPartitions) -> None:
    _uvarint(out, len(value) + 1)
    for topic_id, partitions in value:
        out += topic_id.bytes
        _uvarint(out, len(partitions) + 1)
        for p in partitions:
            out += _I32.pack(p)
        _tags(out, {})


def encode_consumer_group_value(value: ConsumerGroupValue) -> bytes:
    """Version 0 of the value's schema, flexible, as Kafka 4.1 writes it."""
    out = bytearray(_I16.pack(CONSUMER_GROUP_VALUE_VERSION))
    tags: dict[int, bytes] = {}
    if isinstance(value, ConsumerGroupMetadataValue):
        out += _I32.pack(value.epoch)
        if value.metadata_hash != 0:
            tags[0] = _I64.pack(value.metadata_hash)
    elif isinstance(value, ConsumerGroupMemberMetadataValue):
        _compact_string(out, value.instance_id)
        _compact_string(out, value.rack_id)
        _compact_string(out, value.client_id)
        _compact_string(out, value.client_host)
        _uvarint(out, len(value.subscribed_topic_names) + 1)
        for name in value.subscribed_topic_names:
            _compact_string(out, name)
        _compact_string(out, value.subscribed_topic_regex)
        out += _I32.pack(value.rebalance_timeout_ms)
        _compact_string(out, value.server_assignor)
        if value.classic_protocols is not None:
            classic = bytearray(_I32.pack(value.classic_session_timeout_ms))
            _uvarint(classic, len(value.classic_protocols) + 1)
            for name, metadata in value.classic_protocols:
                _compact_string(classic, name)
                _compact_bytes(classic, metadata)
                _tags(classic, {})
            _tags(classic, {})
            tags[0] = bytes(classic)
    elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        out += _I32.pack(value.assignment_epoch)
    elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        _topic_id_partitions(out, value.topic_partitions)
    elif isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
        out += _I32.pack(value.member_epoch)
        out += _I32.pack(value.previous_member_epoch)
        out += _I8.pack(value.state)
        _topic_id_partitions(out, value.assigned_partitions)
        _topic_id_partitions(out, value.partitions_pending_revocation)
    else:
        _uvarint(out, len(value.topics) + 1)
        for topic in value.topics:
            _compact_string(out, topic)
        out += _I64.pack(value.version)
        out += _I64.pack(value.timestamp)
    _tags(out, tags)
    return bytes(out)


# -- reading -------------------------------------------------------------------------------------


class _Reader:
    __slots__ = ("buf", "flexible", "pos")

    def __init__(self, buf: bytes, pos: int = 0, flexible: bool = False) -> None:
        self.buf = buf
        self.pos = pos
        self.flexible = flexible

    def _take(self, st: struct.Struct) -> int:
        if self.pos + st.size > len(self.buf):
            raise CorruptRecord("__consumer_offsets record is truncated")
        (value,) = st.unpack_from(self.buf, self.pos)
        self.pos += st.size
        return int(value)

    def int8(self) -> int:
        return self._take(_I8)

    def int16(self) -> int:
        return self._take(_I16)

    def int32(self) -> int:
        return self._take(_I32)

    def int64(self) -> int:
        return self._take(_I64)

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            if self.pos >= len(self.buf):
                raise CorruptRecord("__consumer_offsets record is truncated")
            byte = self.buf[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7

    def _raw(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.buf):
            raise CorruptRecord("__consumer_offsets record is truncated")
        data = self.buf[self.pos : self.pos + size]
        self.pos += size
        return data

    def nullable_string(self) -> str | None:
        size = self.uvarint() - 1 if self.flexible else self.int16()
        if size < 0:
            return None
        return self._raw(size).decode()

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise CorruptRecord("null string in a non-nullable field")
        return value

    def bytes_(self) -> bytes:
        size = self.uvarint() - 1 if self.flexible else self.int32()
        if size < 0:
            return b""
        return self._raw(size)

    def array_len(self) -> int:
        return self.uvarint() - 1 if self.flexible else self.int32()

    def skip_tags(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()
            self._raw(self.uvarint())

    def tags(self) -> dict[int, bytes]:
        """A flexible struct's tagged fields, by tag."""
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self._raw(self.uvarint())
        return out

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self._raw(16))

    def compact_array_len(self) -> int:
        size = self.uvarint() - 1
        if size < 0:
            raise CorruptRecord("null array in a non-nullable field")
        if size > len(self.buf) - self.pos:  # every element takes at least one byte
            raise CorruptRecord(f"array of {size} elements does not fit")
        return size

    def topic_id_partitions(self) -> TopicIdPartitions:
        out = []
        for _ in range(self.compact_array_len()):
            topic_id = self.uuid()
            partitions = tuple(self.int32() for _ in range(self.compact_array_len()))
            self.tags()  # AssignmentEpochs (KIP-1251, after 4.1) is not used
            out.append((topic_id, partitions))
        return tuple(out)


def decode_key(data: bytes) -> OffsetKey | GroupKey | ConsumerGroupKey | None:
    """The key of a `__consumer_offsets` record; None for record types we do not use (share and
    streams groups)."""
    reader = _Reader(data)
    version = reader.int16()
    if version in (0, 1):
        return OffsetKey(reader.string(), reader.string(), reader.int32())
    if version == 2:
        return GroupKey(reader.string())
    if version in _MEMBER_KEYED:
        return ConsumerGroupKey(version, reader.string(), member_id=reader.string())
    if version == CONSUMER_GROUP_REGULAR_EXPRESSION:
        return ConsumerGroupKey(version, reader.string(), regex=reader.string())
    if version in CONSUMER_GROUP_RECORD_TYPES:
        return ConsumerGroupKey(version, reader.string())
    return None


def decode_consumer_group_value(record_type: int, data: bytes) -> ConsumerGroupValue:
    """The value of a KIP-848 record of `record_type` (not type 4, which is never read)."""
    reader = _Reader(data, flexible=True)
    version = reader.int16()
    if version != CONSUMER_GROUP_VALUE_VERSION:
        raise CorruptRecord(f"unknown version {version} of the value of record type {record_type}")
    value: ConsumerGroupValue
    if record_type == CONSUMER_GROUP_METADATA:
        epoch = reader.int32()
        tags = reader.tags()
        metadata_hash = _I64.unpack(tags[0])[0] if len(tags.get(0, b"")) == _I64.size else 0
        return ConsumerGroupMetadataValue(epoch, metadata_hash)
    if record_type == CONSUMER_GROUP_MEMBER_METADATA:
        instance_id = reader.nullable_string()
        rack_id = reader.nullable_string()
        client_id = reader.string()
        client_host = reader.string()
        names = tuple(reader.string() for _ in range(reader.compact_array_len()))
        regex = reader.nullable_string()
        rebalance_timeout = reader.int32()
        assignor = reader.nullable_string()
        tags = reader.tags()
        session_timeout, classic = _classic_member_metadata(tags[0]) if 0 in tags else (0, None)
        return ConsumerGroupMemberMetadataValue(instance_id, rack_id, client_id, client_host, names, regex,
                                                rebalance_timeout, assignor, classic, session_timeout)
    if record_type == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
        value = ConsumerGroupTargetAssignmentMetadataValue(reader.int32())
    elif record_type == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
        value = ConsumerGroupTargetAssignmentMemberValue(reader.topic_id_partitions())
    elif record_type == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
        value = ConsumerGroupCurrentMemberAssignmentValue(reader.int32(), reader.int32(), reader.int8(),
                                                          reader.topic_id_partitions(),
                                                          reader.topic_id_partitions())
    elif record_type == CONSUMER_GROUP_REGULAR_EXPRESSION:
        topics = tuple(reader.string() for _ in range(reader.compact_array_len()))
        value = ConsumerGroupRegularExpressionValue(topics, reader.int64(), reader.int64())
    else:
        raise CorruptRecord(f"record type {record_type} has no value this coordinator reads")
    reader.tags()
    return value


def _classic_member_metadata(data: bytes) -> tuple[int, tuple[tuple[str, bytes], ...]]:
    """ClassicMemberMetadata: (session timeout, supported protocols)."""
    reader = _Reader(data, flexible=True)
    session_timeout = reader.int32()
    protocols = []
    for _ in range(reader.compact_array_len()):
        name = reader.string()
        metadata = reader.bytes_()
        reader.tags()
        protocols.append((name, metadata))
    reader.tags()
    return session_timeout, tuple(protocols)


def decode_offset_value(data: bytes) -> OffsetValue:
    reader = _Reader(data)
    version = reader.int16()
    if version < 0 or version > 4:
        raise CorruptRecord(f"unknown OffsetCommitValue version {version}")
    reader.flexible = version >= 4
    offset = reader.int64()
    leader_epoch = reader.int32() if version >= 3 else -1
    metadata = reader.string()
    commit_timestamp = reader.int64()
    expire_timestamp = reader.int64() if version == 1 else -1
    reader.skip_tags()
    return OffsetValue(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


def decode_group_value(data: bytes) -> GroupValue:
    reader = _Reader(data)
    version = reader.int16()
    if version < 0 or version > 4:
        raise CorruptRecord(f"unknown GroupMetadataValue version {version}")
    reader.flexible = version >= 4
    protocol_type = reader.string()
    generation = reader.int32()
    protocol = reader.nullable_string()
    leader = reader.nullable_string()
    timestamp = reader.int64() if version >= 2 else -1
    members = []
    for _ in range(max(reader.array_len(), 0)):
        member_id = reader.string()
        instance_id = reader.nullable_string() if version >= 3 else None
        client_id = reader.string()
        client_host = reader.string()
        session_timeout = rebalance_timeout = 0
        if version >= 1:
            rebalance_timeout = reader.int32()
        session_timeout = reader.int32()
        if version == 0:
            rebalance_timeout = session_timeout
        subscription = reader.bytes_()
        assignment = reader.bytes_()
        reader.skip_tags()
        members.append(
            MemberValue(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            )
        )
    reader.skip_tags()
    return GroupValue(protocol_type, generation, protocol, leader, timestamp, tuple(members))


def consumer_subscription_topics(metadata: bytes) -> list[str]:
    """Topics of a ConsumerProtocolSubscription (version int16, topics [string], ...); [] if unparseable."""
    try:
        reader = _Reader(metadata)
        version = reader.int16()
        if version < 0:
            return []
        return [reader.string() for _ in range(max(reader.int32(), 0))]
    except (CorruptRecord, UnicodeDecodeError):
        return []
