"""The embedded consumer protocol (protocol type "consumer") of classic JoinGroup/SyncGroup payloads.

Kafka's ConsumerProtocolSubscription and ConsumerProtocolAssignment (clients' ConsumerProtocol), not
flexible, big-endian:
- Subscription: version int16; topics [string]; userData nullable bytes; v1+ ownedPartitions
  [{topic string, partitions [int32]}]; v2+ generationId int32; v3+ rackId nullable string.
- Assignment: version int16; assignedPartitions [{topic string, partitions [int32]}]; userData
  nullable bytes (the same fields in every version).
The group coordinator reads these to move a classic group into a KIP-848 consumer group (the classic
members' subscriptions and assignments become consumer-group members) and writes assignments for
classic members of a consumer group, whose partitions come from the server-side assignor.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

# The highest versions Kafka 4.1 knows; an assignment is written in the version of the member's
# subscription (as ConsumerProtocol.serializeAssignment(assignment, deserializeVersion(metadata))).
MAX_SUBSCRIPTION_VERSION = 3


class MalformedConsumerProtocol(ValueError):
    """The bytes are not a consumer protocol subscription or assignment (Kafka's SchemaException)."""


@dataclass(frozen=True, slots=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    owned: dict[str, frozenset[int]]
    rack_id: str | None = None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def _take(self, size: int) -> bytes:
        if size < 0 or self._pos + size > len(self._data):
            raise MalformedConsumerProtocol("truncated consumer protocol payload")
        chunk = self._data[self._pos:self._pos + size]
        self._pos += size
        return chunk

    def at_end(self) -> bool:
        return self._pos >= len(self._data)

    def int16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def int32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def nullable_string(self) -> str | None:
        size = self.int16()
        if size < 0:
            return None
        try:
            return self._take(size).decode()
        except UnicodeDecodeError as exc:
            raise MalformedConsumerProtocol(str(exc)) from exc

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise MalformedConsumerProtocol("null string")
        return value

    def nullable_bytes(self) -> bytes | None:
        size = self.int32()
        return None if size < 0 else self._take(size)

    def array_len(self) -> int:
        size = self.int32()
        if size > len(self._data):  # every element takes at least a byte
            raise MalformedConsumerProtocol(f"array of {size} elements in {len(self._data)} bytes")
        return max(size, 0)

    def topic_partitions(self) -> dict[str, frozenset[int]]:
        out: dict[str, frozenset[int]] = {}
        for _ in range(self.array_len()):
            topic = self.string()
            partitions = frozenset(self.int32() for _ in range(self.array_len()))
            out[topic] = out.get(topic, frozenset()) | partitions
        return {topic: partitions for topic, partitions in out.items() if partitions}


def decode_subscription(data: bytes) -> Subscription:
    """A ConsumerProtocolSubscription; fields of versions newer than 3 are ignored, as Kafka does."""
    reader = _Reader(data)
    version = reader.int16()
    if version < 0:
        raise MalformedConsumerProtocol(f"subscription version {version}")
    topics = tuple(reader.string() for _ in range(reader.array_len()))
    reader.nullable_bytes()
    owned: dict[str, frozenset[int]] = {}
    rack_id = None
    if version >= 1 and not reader.at_end():
        owned = reader.topic_partitions()
    if version >= 2 and not reader.at_end():
        reader.int32()  # generation id
    if version >= 3 and not reader.at_end():
        rack_id = reader.nullable_string()
    return Subscription(version, topics, owned, rack_id)


def subscription_version(data: bytes) -> int:
    """Kafka's ConsumerProtocol.deserializeVersion: the leading int16, capped at what we write."""
    if len(data) < 2:
        raise MalformedConsumerProtocol("no version")
    return max(0, min(int(_I16.unpack_from(data)[0]), MAX_SUBSCRIPTION_VERSION))


def decode_assignment(data: bytes) -> dict[str, frozenset[int]]:
    """The partitions of a ConsumerProtocolAssignment; an empty payload is no assignment."""
    if not data:
        return {}
    reader = _Reader(data)
    if reader.int16() < 0:
        raise MalformedConsumerProtocol("negative assignment version")
    return reader.topic_partitions()


def encode_assignment(partitions: dict[str, frozenset[int]], version: int = 0) -> bytes:
    """A ConsumerProtocolAssignment with no user data (null), topics and partitions sorted."""
    out = bytearray(_I16.pack(version))
    topics = sorted((topic, sorted(parts)) for topic, parts in partitions.items() if parts)
    out += _I32.pack(len(topics))
    for topic, parts in topics:
        name = topic.encode()
        out += _I16.pack(len(name)) + name + _I32.pack(len(parts))
        for partition in parts:
            out += _I32.pack(partition)
    out += _I32.pack(-1)
    return bytes(out)
