"""`__consumer_offsets` keys and values in Kafka's binary formats (pure struct, no kio).

What Kafka writes (and what `kafka-console-consumer --formatter OffsetsMessageFormatter` and
`GroupMetadataMessageFormatter` decode), from `group-coordinator/src/main/resources/common/message/`:

- Key: int16 version, then the fields of that version's schema.
  - 0/1 -> OffsetCommitKey    {group string, topic string, partition int32}    (we write v1)
  - 2   -> GroupMetadataKey   {group string}
  - 3+  -> KIP-848 records; skipped on replay.
- OffsetCommitValue (we write v3): offset int64, leaderEpoch int32 (v3+), metadata string,
  commitTimestamp int64, expireTimestamp int64 (v1 only). v4 is flexible (compact strings, tagged
  fields) and decoded but not written.
- GroupMetadataValue (we write v3): protocolType string, generation int32, protocol nullable string,
  leader nullable string, currentStateTimestamp int64 (v2+), members [memberId string,
  groupInstanceId nullable string (v3+), clientId string, clientHost string, rebalanceTimeout int32 (v1+),
  sessionTimeout int32, subscription bytes, assignment bytes]. v4 (flexible) is decoded as well.
- A deletion is the key with a null value (a tombstone); compaction then drops both.
Strings are int16-length UTF-8 (-1 = null); bytes are int32-length.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from minikafka.protocol.errors import CorruptRecord

OFFSET_KEY_VERSION = 1
OFFSET_VALUE_VERSION = 3
GROUP_KEY_VERSION = 2
GROUP_VALUE_VERSION = 3
# The protocol type of groups whose members use Kafka's consumer protocol (ConsumerProtocol.PROTOCOL_TYPE).
CONSUMER_PROTOCOL_TYPE = "consumer"

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


def encode_key(key: OffsetKey | GroupKey) -> bytes:
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


def decode_key(data: bytes) -> OffsetKey | GroupKey | None:
    """The key of a `__consumer_offsets` record; None for record types we do not use (v3+)."""
    reader = _Reader(data)
    version = reader.int16()
    if version in (0, 1):
        return OffsetKey(reader.string(), reader.string(), reader.int32())
    if version == 2:
        return GroupKey(reader.string())
    return None


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
