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
from minikafka.protocol.primitives import Reader, Writer

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

_I64 = struct.Struct(">q")  # the metadata hash, a tagged field


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


def encode_offset_key(key: OffsetKey) -> bytes:
    out = Writer()
    out.int16(OFFSET_KEY_VERSION)
    out.string(key.group)
    out.string(key.topic)
    out.int32(key.partition)
    return out.value()


def encode_group_key(key: GroupKey) -> bytes:
    out = Writer()
    out.int16(GROUP_KEY_VERSION)
    out.string(key.group)
    return out.value()


def encode_consumer_group_key(key: ConsumerGroupKey) -> bytes:
    out = Writer()
    out.int16(key.record_type)
    out.string(key.group)
    if key.record_type in _MEMBER_KEYED:
        out.string(key.member_id or "")
    elif key.record_type == CONSUMER_GROUP_REGULAR_EXPRESSION:
        out.string(key.regex or "")
    return out.value()


def encode_key(key: OffsetKey | GroupKey | ConsumerGroupKey) -> bytes:
    if isinstance(key, ConsumerGroupKey):
        return encode_consumer_group_key(key)
    return encode_offset_key(key) if isinstance(key, OffsetKey) else encode_group_key(key)


def encode_offset_value(value: OffsetValue) -> bytes:
    """v3, or v1 when an expire timestamp is set (as Kafka does)."""
    out = Writer()
    if value.expire_timestamp >= 0:
        out.int16(1)
        out.int64(value.offset)
        out.string(value.metadata)
        out.int64(value.commit_timestamp)
        out.int64(value.expire_timestamp)
        return out.value()
    out.int16(OFFSET_VALUE_VERSION)
    out.int64(value.offset)
    out.int32(value.leader_epoch)
    out.string(value.metadata)
    out.int64(value.commit_timestamp)
    return out.value()


def encode_group_value(value: GroupValue) -> bytes:
    out = Writer()
    out.int16(GROUP_VALUE_VERSION)
    out.string(value.protocol_type)
    out.int32(value.generation)
    out.nullable_string(value.protocol)
    out.nullable_string(value.leader)
    out.int64(value.current_state_timestamp)
    out.array_length(len(value.members))
    for m in value.members:
        out.string(m.member_id)
        out.nullable_string(m.group_instance_id)
        out.string(m.client_id)
        out.string(m.client_host)
        out.int32(m.rebalance_timeout)
        out.int32(m.session_timeout)
        out.nullable_bytes(m.subscription)
        out.nullable_bytes(m.assignment)
    return out.value()


# Flexible (compact) encodings of the KIP-848 values.


def _topic_id_partitions(out: Writer, value: TopicIdPartitions) -> None:
    out.compact_array_length(len(value))
    for topic_id, partitions in value:
        out.uuid(topic_id)
        out.compact_array_length(len(partitions))
        for p in partitions:
            out.int32(p)
        out.tagged_fields({})


def _classic_member_metadata_bytes(value: ConsumerGroupMemberMetadataValue,
                                   protocols: tuple[tuple[str, bytes], ...]) -> bytes:
    """ClassicMemberMetadata, the value of tag 0 of a member that joined with the classic protocol."""
    classic = Writer()
    classic.int32(value.classic_session_timeout_ms)
    classic.compact_array_length(len(protocols))
    for name, metadata in protocols:
        classic.compact_string(name)
        classic.compact_bytes(metadata)
        classic.tagged_fields({})
    classic.tagged_fields({})
    return classic.value()


def encode_consumer_group_value(value: ConsumerGroupValue) -> bytes:
    """Version 0 of the value's schema, flexible, as Kafka 4.1 writes it."""
    out = Writer()
    out.int16(CONSUMER_GROUP_VALUE_VERSION)
    tags: dict[int, bytes] = {}
    if isinstance(value, ConsumerGroupMetadataValue):
        out.int32(value.epoch)
        if value.metadata_hash != 0:
            tags[0] = _I64.pack(value.metadata_hash)
    elif isinstance(value, ConsumerGroupMemberMetadataValue):
        out.compact_nullable_string(value.instance_id)
        out.compact_nullable_string(value.rack_id)
        out.compact_string(value.client_id)
        out.compact_string(value.client_host)
        out.compact_array_length(len(value.subscribed_topic_names))
        for name in value.subscribed_topic_names:
            out.compact_string(name)
        out.compact_nullable_string(value.subscribed_topic_regex)
        out.int32(value.rebalance_timeout_ms)
        out.compact_nullable_string(value.server_assignor)
        if value.classic_protocols is not None:
            tags[0] = _classic_member_metadata_bytes(value, value.classic_protocols)
    elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        out.int32(value.assignment_epoch)
    elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        _topic_id_partitions(out, value.topic_partitions)
    elif isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
        out.int32(value.member_epoch)
        out.int32(value.previous_member_epoch)
        out.int8(value.state)
        _topic_id_partitions(out, value.assigned_partitions)
        _topic_id_partitions(out, value.partitions_pending_revocation)
    else:
        out.compact_array_length(len(value.topics))
        for topic in value.topics:
            out.compact_string(topic)
        out.int64(value.version)
        out.int64(value.timestamp)
    out.tagged_fields(tags)
    return out.value()


# -- reading -------------------------------------------------------------------------------------


def _reader(data: bytes) -> Reader:
    return Reader(data, what="__consumer_offsets record")


class _Fields:
    """The string, bytes and array forms of one schema version: int16/int32 lengths, or compact ones
    (uvarint + 1) and tagged-field sections in the flexible versions."""

    def __init__(self, reader: Reader, flexible: bool) -> None:
        self.reader = reader
        self.flexible = flexible

    def nullable_string(self) -> str | None:
        reader = self.reader
        return reader.compact_nullable_string() if self.flexible else reader.nullable_string()

    def string(self) -> str:
        return self.reader.compact_string() if self.flexible else self.reader.string()

    def bytes_or_empty(self) -> bytes:
        reader = self.reader
        value = reader.compact_nullable_bytes() if self.flexible else reader.nullable_bytes()
        return b"" if value is None else value

    def array_length(self) -> int:
        """The element count; 0 for a null array."""
        return max(self.reader.compact_array_length() if self.flexible else self.reader.array_length(), 0)

    def skip_tags(self) -> None:
        if self.flexible:
            self.reader.tagged_fields()


def _compact_array_length(reader: Reader) -> int:
    size = reader.compact_array_length()
    if size < 0:
        raise reader.malformed("has a null array in a non-nullable field")
    if size > reader.remaining:  # every element takes at least one byte
        raise reader.malformed(f"has an array of {size} elements that does not fit")
    return size


def _topic_id_partitions_of(reader: Reader) -> TopicIdPartitions:
    out = []
    for _ in range(_compact_array_length(reader)):
        topic_id = reader.uuid()
        partitions = tuple(reader.int32() for _ in range(_compact_array_length(reader)))
        reader.tagged_fields()  # AssignmentEpochs (KIP-1251, after 4.1) is not used
        out.append((topic_id, partitions))
    return tuple(out)


def decode_key(data: bytes) -> OffsetKey | GroupKey | ConsumerGroupKey | None:
    """The key of a `__consumer_offsets` record; None for record types we do not use (share and
    streams groups)."""
    reader = _reader(data)
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
    reader = _reader(data)
    version = reader.int16()
    if version != CONSUMER_GROUP_VALUE_VERSION:
        raise CorruptRecord(f"unknown version {version} of the value of record type {record_type}")
    value: ConsumerGroupValue
    if record_type == CONSUMER_GROUP_METADATA:
        epoch = reader.int32()
        tags = reader.tagged_fields()
        metadata_hash = _I64.unpack(tags[0])[0] if len(tags.get(0, b"")) == _I64.size else 0
        return ConsumerGroupMetadataValue(epoch, metadata_hash)
    if record_type == CONSUMER_GROUP_MEMBER_METADATA:
        instance_id = reader.compact_nullable_string()
        rack_id = reader.compact_nullable_string()
        client_id = reader.compact_string()
        client_host = reader.compact_string()
        names = tuple(reader.compact_string() for _ in range(_compact_array_length(reader)))
        regex = reader.compact_nullable_string()
        rebalance_timeout = reader.int32()
        assignor = reader.compact_nullable_string()
        tags = reader.tagged_fields()
        session_timeout, classic = _classic_member_metadata(tags[0]) if 0 in tags else (0, None)
        return ConsumerGroupMemberMetadataValue(instance_id, rack_id, client_id, client_host, names, regex,
                                                rebalance_timeout, assignor, classic, session_timeout)
    if record_type == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
        value = ConsumerGroupTargetAssignmentMetadataValue(reader.int32())
    elif record_type == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
        value = ConsumerGroupTargetAssignmentMemberValue(_topic_id_partitions_of(reader))
    elif record_type == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
        value = ConsumerGroupCurrentMemberAssignmentValue(reader.int32(), reader.int32(), reader.int8(),
                                                          _topic_id_partitions_of(reader),
                                                          _topic_id_partitions_of(reader))
    elif record_type == CONSUMER_GROUP_REGULAR_EXPRESSION:
        topics = tuple(reader.compact_string() for _ in range(_compact_array_length(reader)))
        value = ConsumerGroupRegularExpressionValue(topics, reader.int64(), reader.int64())
    else:
        raise CorruptRecord(f"record type {record_type} has no value this coordinator reads")
    reader.tagged_fields()
    return value


def _classic_member_metadata(data: bytes) -> tuple[int, tuple[tuple[str, bytes], ...]]:
    """ClassicMemberMetadata: (session timeout, supported protocols)."""
    reader = _reader(data)
    session_timeout = reader.int32()
    protocols = []
    for _ in range(_compact_array_length(reader)):
        name = reader.compact_string()
        metadata = reader.compact_nullable_bytes() or b""
        reader.tagged_fields()
        protocols.append((name, metadata))
    reader.tagged_fields()
    return session_timeout, tuple(protocols)


def decode_offset_value(data: bytes) -> OffsetValue:
    reader = _reader(data)
    version = reader.int16()
    if version < 0 or version > 4:
        raise CorruptRecord(f"unknown OffsetCommitValue version {version}")
    fields = _Fields(reader, flexible=version >= 4)
    offset = reader.int64()
    leader_epoch = reader.int32() if version >= 3 else -1
    metadata = fields.string()
    commit_timestamp = reader.int64()
    expire_timestamp = reader.int64() if version == 1 else -1
    fields.skip_tags()
    return OffsetValue(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


def decode_group_value(data: bytes) -> GroupValue:
    reader = _reader(data)
    version = reader.int16()
    if version < 0 or version > 4:
        raise CorruptRecord(f"unknown GroupMetadataValue version {version}")
    fields = _Fields(reader, flexible=version >= 4)
    protocol_type = fields.string()
    generation = reader.int32()
    protocol = fields.nullable_string()
    leader = fields.nullable_string()
    timestamp = reader.int64() if version >= 2 else -1
    members = []
    for _ in range(fields.array_length()):
        member_id = fields.string()
        instance_id = fields.nullable_string() if version >= 3 else None
        client_id = fields.string()
        client_host = fields.string()
        session_timeout = rebalance_timeout = 0
        if version >= 1:
            rebalance_timeout = reader.int32()
        session_timeout = reader.int32()
        if version == 0:
            rebalance_timeout = session_timeout
        subscription = fields.bytes_or_empty()
        assignment = fields.bytes_or_empty()
        fields.skip_tags()
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
    fields.skip_tags()
    return GroupValue(protocol_type, generation, protocol, leader, timestamp, tuple(members))


def consumer_subscription_topics(metadata: bytes) -> list[str]:
    """Topics of a ConsumerProtocolSubscription (version int16, topics [string], ...); [] if unparseable."""
    try:
        reader = _reader(metadata)
        version = reader.int16()
        if version < 0:
            return []
        return [reader.string() for _ in range(max(reader.array_length(), 0))]
    except CorruptRecord:
        return []
