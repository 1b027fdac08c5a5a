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

from dataclasses import dataclass

from minikafka.protocol.primitives import Reader, Writer

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


def _reader(data: bytes) -> Reader:
    return Reader(data, what="consumer protocol payload", error=MalformedConsumerProtocol)


def _array_length(reader: Reader) -> int:
    """An array's element count; 0 for a null array."""
    size = reader.array_length()
    if size > len(reader.data):  # every element takes at least a byte
        raise reader.malformed(f"has an array of {size} elements in {len(reader.data)} bytes")
    return max(size, 0)


def _topic_partitions(reader: Reader) -> dict[str, frozenset[int]]:
    out: dict[str, frozenset[int]] = {}
    for _ in range(_array_length(reader)):
        topic = reader.string()
        partitions = frozenset(reader.int32() for _ in range(_array_length(reader)))
        out[topic] = out.get(topic, frozenset()) | partitions
    return {topic: partitions for topic, partitions in out.items() if partitions}


def decode_subscription(data: bytes) -> Subscription:
    """A ConsumerProtocolSubscription; fields of versions newer than 3 are ignored, as Kafka does."""
    reader = _reader(data)
    version = reader.int16()
    if version < 0:
        raise MalformedConsumerProtocol(f"subscription version {version}")
    topics = tuple(reader.string() for _ in range(_array_length(reader)))
    reader.nullable_bytes()
    owned: dict[str, frozenset[int]] = {}
    rack_id = None
    if version >= 1 and reader.remaining > 0:
        owned = _topic_partitions(reader)
    if version >= 2 and reader.remaining > 0:
        reader.int32()  # generation id
    if version >= 3 and reader.remaining > 0:
        rack_id = reader.nullable_string()
    return Subscription(version, topics, owned, rack_id)


def subscription_version(data: bytes) -> int:
    """Kafka's ConsumerProtocol.deserializeVersion: the leading int16, capped at what we write."""
    if len(data) < 2:
        raise MalformedConsumerProtocol("no version")
    return max(0, min(_reader(data).int16(), MAX_SUBSCRIPTION_VERSION))


def decode_assignment(data: bytes) -> dict[str, frozenset[int]]:
    """The partitions of a ConsumerProtocolAssignment; an empty payload is no assignment."""
    if not data:
        return {}
    reader = _reader(data)
    if reader.int16() < 0:
        raise MalformedConsumerProtocol("negative assignment version")
    return _topic_partitions(reader)


def encode_assignment(partitions: dict[str, frozenset[int]], version: int = 0) -> bytes:
    """A ConsumerProtocolAssignment with no user data (null), topics and partitions sorted."""
    out = Writer()
    out.int16(version)
    topics = sorted((topic, sorted(parts)) for topic, parts in partitions.items() if parts)
    out.array_length(len(topics))
    for topic, parts in topics:
        out.string(topic)
        out.array_length(len(parts))
        for partition in parts:
            out.int32(partition)
    out.nullable_bytes(None)
    return out.value()
