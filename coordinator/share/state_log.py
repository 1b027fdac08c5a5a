"""`__share_group_state`: the share-partition states in Kafka's record format (KIP-932's share
coordinator), so a restart and a kill -9 lose no acknowledgement.

key   = int16 record type (0 ShareSnapshot, 1 ShareUpdate) + GroupId string, TopicId uuid, Partition int32
        (ShareSnapshotKey / ShareUpdateKey, not flexible)
value = int16 version 0 + flexible body:
  ShareSnapshotValue: SnapshotEpoch int32, StateEpoch int32, LeaderEpoch int32, StartOffset int64,
      CreateTimestamp int64, WriteTimestamp int64, StateBatches [FirstOffset int64, LastOffset int64,
      DeliveryState int8, DeliveryCount int16], tag 0 DeliveryCompleteCount int32 (Kafka 4.2, KIP-1226)
  ShareUpdateValue: SnapshotEpoch int32, LeaderEpoch int32, StartOffset int64 (-1: unchanged),
      StateBatches [...], tag 0 DeliveryCompleteCount int32
A null value (tombstone) for both keys deletes the share-partition's state (DeleteShareGroupState).
Replay: a snapshot replaces what is known of its share-partition, each later update lays its batches
over it and moves the start offset, as Kafka's ShareCoordinatorShard does.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from minikafka.coordinator.hashing import partition_for
from minikafka.coordinator.internal_topics import SHARE_STATE_TOPIC
from minikafka.coordinator.ports import LogManager, PartitionLog
from minikafka.coordinator.replay import iter_partition_batches
from minikafka.coordinator.share.partition import RecordState, StateBatch
from minikafka.protocol.errors import CorruptRecord
from minikafka.protocol.primitives import Reader, Writer
from minikafka.protocol.records import Record, build_batch
from minikafka.storage.origin import AppendOrigin

SNAPSHOT = 0
UPDATE = 1
VALUE_VERSION = 0
_DELIVERY_COMPLETE_TAG = 0


class CorruptShareRecord(CorruptRecord, ValueError):
    """A `__share_group_state` key or value that is not Kafka's schema."""


@dataclass(frozen=True, slots=True)
class ShareKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True)
class ShareStateValue:
    """Either record's value; `state_epoch`, `create_ms` and `write_ms` are only in a snapshot."""

    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]
    state_epoch: int = 0
    create_ms: int = -1
    write_ms: int = -1
    delivery_complete_count: int = -1


def encode_key(record_type: int, key: ShareKey) -> bytes:
    out = Writer()
    out.int16(record_type)
    out.string(key.group_id)
    out.uuid(key.topic_id)
    out.int32(key.partition)
    return out.value()


def decode_key(data: bytes) -> tuple[int, ShareKey]:
    reader = Reader(data, what="ShareSnapshotKey/ShareUpdateKey")
    try:
        record_type = reader.int16()
        if record_type not in (SNAPSHOT, UPDATE):
            raise CorruptShareRecord(f"unknown __share_group_state record type {record_type}")
        key = ShareKey(reader.string(), reader.uuid(), reader.int32())
    except (ValueError, IndexError) as exc:
        raise CorruptShareRecord(f"bad __share_group_state key: {exc}") from exc
    return record_type, key


def _tags(value: ShareStateValue) -> dict[int, bytes]:
    if value.delivery_complete_count == -1:
        return {}
    tag = Writer()
    tag.int32(value.delivery_complete_count)
    return {_DELIVERY_COMPLETE_TAG: tag.value()}


def _write_batches(out: Writer, batches: Sequence[StateBatch]) -> None:
    out.compact_array_length(len(batches))
    for batch in batches:
        out.int64(batch.first_offset)
        out.int64(batch.last_offset)
        out.int8(int(batch.state))
        out.int16(batch.delivery_count)
        out.tagged_fields({})


def encode_value(record_type: int, value: ShareStateValue) -> bytes:
    out = Writer()
    out.int16(VALUE_VERSION)
    out.int32(value.snapshot_epoch)
    if record_type == SNAPSHOT:
        out.int32(value.state_epoch)
    out.int32(value.leader_epoch)
    out.int64(value.start_offset)
    if record_type == SNAPSHOT:
        out.int64(value.create_ms)
        out.int64(value.write_ms)
    _write_batches(out, value.batches)
    out.tagged_fields(_tags(value))
    return out.value()


def _read_batches(reader: Reader) -> tuple[StateBatch, ...]:
    count = reader.compact_array_length()
    batches = []
    for _ in range(max(count, 0)):
        first, last, state, delivered = reader.int64(), reader.int64(), reader.int8(), reader.int16()
        reader.tagged_fields()
        batches.append(StateBatch(first, last, RecordState(state), delivered))
    return tuple(batches)


def decode_value(record_type: int, data: bytes) -> ShareStateValue:
    reader = Reader(data, what="ShareSnapshotValue/ShareUpdateValue")
    try:
        version = reader.int16()
        if version != VALUE_VERSION:
            raise CorruptShareRecord(f"unknown __share_group_state value version {version}")
        snapshot_epoch = reader.int32()
        state_epoch = reader.int32() if record_type == SNAPSHOT else 0
        leader_epoch = reader.int32()
        start_offset = reader.int64()
        create_ms, write_ms = (reader.int64(), reader.int64()) if record_type == SNAPSHOT else (-1, -1)
        batches = _read_batches(reader)
        tags = reader.tagged_fields()
    except (ValueError, IndexError) as exc:
        raise CorruptShareRecord(f"bad __share_group_state value: {exc}") from exc
    complete = tags.get(_DELIVERY_COMPLETE_TAG)
    delivery_complete = Reader(complete).int32() if complete is not None else -1
    return ShareStateValue(snapshot_epoch, leader_epoch, start_offset, batches, state_epoch, create_ms, write_ms,
                           delivery_complete)


@dataclass(slots=True)
class PersistedState:
    """What replay knows of one share-partition."""

    start_offset: int
    batches: list[StateBatch] = field(default_factory=list)
    state_epoch: int = 0
    snapshot_epoch: int = 0
    updates_since_snapshot: int = 0


class ShareStateTopic:
    def __init__(self, logs: LogManager, num_partitions: int) -> None:
        self._logs = logs
        self._configured_partitions = num_partitions

    def exists(self) -> bool:
        return self._logs.topic(SHARE_STATE_TOPIC) is not None

    @property
    def num_partitions(self) -> int:
        meta = self._logs.topic(SHARE_STATE_TOPIC)
        return meta.partitions if meta is not None else self._configured_partitions

    def partition_for(self, key: ShareKey) -> int:
        """Kafka's SharePartitionKey placement: "group:topicId:partition" hashed onto the topic."""
        return partition_for(f"{key.group_id}:{key.topic_id}:{key.partition}", self.num_partitions)

    def _log(self, partition: int) -> PartitionLog:
        if not self.exists():
            self._logs.create_topic(SHARE_STATE_TOPIC, self._configured_partitions,
                                    {"cleanup.policy": "delete", "retention.ms": "-1"}, internal=True)
        log = self._logs.partition(SHARE_STATE_TOPIC, partition)
        if log is None:
            raise LookupError(f"{SHARE_STATE_TOPIC}-{partition} does not exist")
        return log

    def write(self, key: ShareKey, record_type: int, value: ShareStateValue | None, now_ms: int) -> None:
        batch = build_batch([Record(key=encode_key(record_type, key),
                                    value=None if value is None else encode_value(record_type, value),
                                    timestamp=now_ms)])
        self._log(self.partition_for(key)).append(batch, now_ms, origin=AppendOrigin.COORDINATOR)

    def delete(self, key: ShareKey, now_ms: int) -> None:
        """Tombstones for both record types, as Kafka's deleteState writes them."""
        records = [Record(key=encode_key(kind, key), value=None, timestamp=now_ms) for kind in (SNAPSHOT, UPDATE)]
        self._log(self.partition_for(key)).append(build_batch(records), now_ms, origin=AppendOrigin.COORDINATOR)

    def records(self) -> Iterator[tuple[bytes | None, bytes | None]]:
        """Every (key, value) of every partition, in log order per partition."""
        meta = self._logs.topic(SHARE_STATE_TOPIC)
        if meta is None:
            return
        for partition in range(meta.partitions):
            log = self._logs.partition(SHARE_STATE_TOPIC, partition)
            if log is None:
                continue
            for batch in iter_partition_batches(log, skip_control=True):
                for record in batch.records:
                    yield record.key, record.value

    def replay(self) -> dict[ShareKey, PersistedState]:
        states: dict[ShareKey, PersistedState] = {}
        for raw_key, raw_value in self.records():
            if raw_key is None:
                continue
            record_type, key = decode_key(raw_key)
            if raw_value is None:
                states.pop(key, None)
                continue
            value = decode_value(record_type, raw_value)
            if record_type == SNAPSHOT:
                states[key] = PersistedState(value.start_offset, list(value.batches), value.state_epoch,
                                             value.snapshot_epoch)
                continue
            found = states.get(key)
            if found is None:
                continue  # an update without its snapshot: Kafka ignores it too
            _merge(found, value)
        return states


def _merge(state: PersistedState, update: ShareStateValue) -> None:
    if update.start_offset >= 0:
        state.start_offset = max(state.start_offset, update.start_offset)
    state.batches.extend(update.batches)
    state.updates_since_snapshot += 1
