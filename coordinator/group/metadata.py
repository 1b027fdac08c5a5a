"""GroupMetadataManager: the group coordinator's state and its `__consumer_offsets` records.

Holds what every engine of the coordinator shares, as Kafka 4's `GroupCoordinatorShard` gives its
`GroupMetadataManager` and `OffsetMetadataManager` one snapshot of the partition's state:
- the groups by id and the committed (and staged transactional) offsets;
- replay: groups and offsets rebuilt from every `__consumer_offsets` partition (GroupMetadataValue,
  OffsetCommitValue, tombstones, and transaction markers applying or dropping staged offsets);
- persistence: the group record (GroupMetadataValue v3), offset commits, group tombstones;
- expiry: `offsets.retention.ms` checks every `offsets.retention.check.interval.ms`; an Empty group
  left without offsets dies (tombstone), as Kafka's cleanupGroupMetadata.
The membership engines change groups and call back here to persist them; this module knows nothing
of joins or heartbeats. KIP-848 consumer groups live in their engine's map: their records are built,
replayed and expired by `consumer_store` (consumer_records.ConsumerGroupRecords, plugged in by the
coordinator), which this module reaches through the ConsumerGroupStore protocol.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from minikafka.coordinator.group.log import OffsetsTopic
from minikafka.coordinator.group.offsets import OffsetStore, TopicPartition
from minikafka.coordinator.group.records import (
    ConsumerGroupKey,
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from minikafka.coordinator.group.state import Group, GroupState, Member
from minikafka.coordinator.ports import LogManager
from minikafka.coordinator.timers import Timers
from minikafka.protocol.errors import KafkaError
from minikafka.protocol.records import parse_control_record
from minikafka.storage.clock import Clock, next_periodic_run

_log = logging.getLogger("minikafka.coordinator.group")


@dataclass(frozen=True, slots=True)
class GroupConfig:
    offsets_topic_num_partitions: int = 50
    initial_rebalance_delay_ms: int = 0
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    # Kafka's group.consumer.migration.policy: which online conversions of non-empty groups between the
    # classic and the consumer protocol are allowed (disabled, upgrade, downgrade, bidirectional).
    consumer_migration_policy: str = "bidirectional"


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    expire_timestamp: int = -1


Records = list[tuple[bytes, bytes | None]]


class ConsumerGroupStore(Protocol):
    """What this module needs of the KIP-848 groups' persistence (consumer_records.py)."""

    def replay(self, key: ConsumerGroupKey, value: bytes | None) -> None: ...

    def has_group(self, group_id: str) -> bool: ...

    def forget(self, group_id: str) -> None: ...

    def store(self, group: Any) -> None: ...

    def tombstones(self, group_id: str) -> Records: ...

    def expire_offsets(self, now_ms: int) -> int: ...


class GroupMetadataManager:
    def __init__(self, logs: LogManager, clock: Clock, config: GroupConfig, timers: Timers | None = None) -> None:
        self.config = config
        self.clock = clock
        self.topic = OffsetsTopic(logs, config.offsets_topic_num_partitions)
        self.groups: dict[str, Group] = {}
        self.offsets = OffsetStore()
        self.timers = timers if timers is not None else Timers(clock)
        self.consumer_store: ConsumerGroupStore | None = None

    def now(self) -> int:
        return int(self.clock.now_ms())

    def partition_for(self, group_id: str) -> int:
        return self.topic.partition_for(group_id)

    def get_or_create_group(self, group_id: str) -> Group:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id, state_timestamp_ms=self.now())
        return group

    # -- replay --------------------------------------------------------------------------------

    def replay_steps(self) -> Iterator[None]:
        """Replay every `__consumer_offsets` partition, one step per batch."""
        if not self.topic.exists():
            return
        for partition in range(self.topic.num_partitions):
            for batch in self.topic.batches(partition):
                self._replay_batch(batch)
                yield

    def _replay_batch(self, batch: Any) -> None:
        header = batch.header
        if header.is_control:
            for record in batch.records:
                control_type, _epoch = parse_control_record(record)
                self.offsets.replay_end_txn_marker(header.producer_id, commit=control_type == 1)
            return
        for record in batch.records:
            if record.key is None:
                continue
            key = decode_key(record.key)
            if isinstance(key, OffsetKey):
                self._replay_offset(key, record.value, record.offset, header)
            elif isinstance(key, GroupKey):
                # As Kafka's replay: the group only; its offsets have tombstones of their own (written
                # before the group's), and a classic group converted to a consumer group keeps them.
                if record.value is None:
                    self.groups.pop(key.group, None)
                else:
                    if self.consumer_store is not None:
                        self.consumer_store.forget(key.group)
                    self.groups[key.group] = _classic_group_from_record(key.group, decode_group_value(record.value))
            elif isinstance(key, ConsumerGroupKey) and self.consumer_store is not None:
                self.consumer_store.replay(key, record.value)

    def _replay_offset(self, key: OffsetKey, value: bytes | None, record_offset: int, header: Any) -> None:
        tp = (key.topic, key.partition)
        if value is None:
            self.offsets.delete(key.group, tp)
        elif header.is_transactional:
            self.offsets.stage_txn(header.producer_id, key.group, tp, decode_offset_value(value), record_offset)
        else:
            self.offsets.commit(key.group, tp, decode_offset_value(value), record_offset)
        consumer_group = self.consumer_store is not None and self.consumer_store.has_group(key.group)
        if key.group not in self.groups and not consumer_group:
            self.groups[key.group] = Group(key.group, state_timestamp_ms=self.clock.now_ms())

    # -- persistence ---------------------------------------------------------------------------

    def append(self, group_id: str, records: Records, now_ms: int | None = None, **txn: Any) -> int:
        """Append records to the group's `__consumer_offsets` partition, stamped `now_ms` (default: the clock
        now); the first record's offset."""
        return self.topic.append(self.partition_for(group_id), records, self.now() if now_ms is None else now_ms,
                                 **txn)

    def store_group(self, group: Group) -> None:
        """Persist the group's GroupMetadataValue (raises KafkaError when the append fails)."""
        self.append(group.group_id, [group_record(group)])

    def write_offsets(
        self, group_id: str, commits: list[OffsetCommit], *, producer_id: int = -1, producer_epoch: int = -1
    ) -> None:
        """Append the commits as one batch and apply them (or stage them, for a transaction)."""
        if not commits:
            return
        now = self.now()
        records: Records = []
        values = []
        for c in commits:
            value = OffsetValue(c.offset, c.leader_epoch, c.metadata or "", now, c.expire_timestamp)
            values.append(value)
            records.append((encode_offset_key(OffsetKey(group_id, c.topic, c.partition)), encode_offset_value(value)))
        transactional = producer_id >= 0
        # The batch's timestamp is the commit's own: one clock reading, so the record's CreateTime and its
        # commitTimestamp agree (two readings differed by 1 ms now and then).
        base = self.append(
            group_id,
            records,
            now,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            transactional=transactional,
        )
        for index, (c, value) in enumerate(zip(commits, values, strict=True)):
            tp = (c.topic, c.partition)
            if transactional:
                self.offsets.stage_txn(producer_id, group_id, tp, value, base + index)
            else:
                self.offsets.commit(group_id, tp, value, base + index)

    def complete_transaction(
        self, partition: int, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int
    ) -> None:
        """Write a transaction marker to `__consumer_offsets-partition` and apply/drop staged offsets."""
        self.topic.append_marker(partition, producer_id, producer_epoch, commit, coordinator_epoch, self.now())
        self.offsets.replay_end_txn_marker(producer_id, commit)

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> None:
        """Tombstone the committed offsets among `partitions` (the others are left alone)."""
        tombstones: Records = [
            (encode_offset_key(OffsetKey(group_id, topic, partition)), None)
            for topic, partition in partitions
            if self.offsets.delete(group_id, (topic, partition))
        ]
        if tombstones:
            self.append(group_id, tombstones)

    def store_consumer_group(self, group: Any) -> None:
        """Persist what changed in a KIP-848 consumer group (a failed append is logged, not raised)."""
        if self.consumer_store is not None:
            self.consumer_store.store(group)

    def delete_consumer_group(self, group_id: str) -> None:
        """Tombstone a consumer group's offsets and records in one batch, as Kafka's deleteGroups."""
        records: Records = [
            (encode_offset_key(OffsetKey(group_id, topic, partition)), None)
            for topic, partition in self.offsets.delete_group(group_id)
        ]
        if self.consumer_store is not None:
            records += self.consumer_store.tombstones(group_id)
        self.append(group_id, records)

    def delete_group(self, group: Group) -> None:
        """Tombstone the group and all its offsets; the group is Dead and forgotten."""
        partitions = self.offsets.delete_group(group.group_id)
        records: Records = [
            (encode_offset_key(OffsetKey(group.group_id, topic, partition)), None) for topic, partition in partitions
        ]
        records.append((encode_group_key(GroupKey(group.group_id)), None))
        self.append(group.group_id, records)
        group.transition_to(GroupState.DEAD, self.now())
        self.groups.pop(group.group_id, None)

    # -- expiry --------------------------------------------------------------------------------

    def schedule_retention(self) -> None:
        self.timers.schedule(
            ("retention",),
            next_periodic_run(self.clock, self.config.offsets_retention_check_interval_ms),
            self._on_retention,
        )

    def _on_retention(self) -> None:
        try:
            self.expire_offsets(self.now())
        finally:
            self.schedule_retention()

    def expire_offsets(self, now_ms: int) -> int:
        """Tombstone expired offsets; an Empty group left with none dies. Returns offsets removed."""
        removed = 0 if self.consumer_store is None else self.consumer_store.expire_offsets(now_ms)
        for group in list(self.groups.values()):
            if group.is_(GroupState.EMPTY):
                empty_since = group.state_timestamp_ms if group.protocol_type else None
            elif group.protocol_type is None:
                empty_since = None
            else:
                continue
            expired = self.offsets.expired(group.group_id, now_ms, self.config.offsets_retention_ms, empty_since)
            try:
                removed += self._expire_group_offsets(group, expired, now_ms)
            except KafkaError as exc:
                # Kafka's cleanupGroupMetadata logs it too; nothing was removed, so the next check retries
                _log.warning("failed to write tombstones for group %s: %s", group.group_id, exc)
        return removed

    def _expire_group_offsets(self, group: Group, expired: list[TopicPartition], now_ms: int) -> int:
        if expired:
            # Tombstones first: if they cannot be written, the offsets stay for the next check.
            self.append(
                group.group_id,
                [(encode_offset_key(OffsetKey(group.group_id, t, p)), None) for t, p in expired],
            )
            for tp in expired:
                self.offsets.delete(group.group_id, tp)
        if (
            group.is_(GroupState.EMPTY)
            and not group.pending_members
            and not self.offsets.has_offsets(group.group_id)
            and not self.offsets.has_pending(group.group_id)
        ):
            self.append(group.group_id, [(encode_group_key(GroupKey(group.group_id)), None)])
            group.transition_to(GroupState.DEAD, now_ms)
            self.groups.pop(group.group_id, None)
        return len(expired)


def _classic_group_from_record(group_id: str, value: GroupValue) -> Group:
    """Kafka's ClassicGroup.fromRecord: a replayed group is Stable with members, else Empty."""
    group = Group(group_id, state_timestamp_ms=value.current_state_timestamp)
    group.protocol_type = value.protocol_type or None
    group.protocol_name = value.protocol
    group.generation_id = value.generation
    for m in value.members:
        member = Member(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout,
            m.session_timeout,
            value.protocol_type,
            [(value.protocol or "", m.subscription)],
            assignment=m.assignment,
        )
        group.add(member)
    group.protocol_type = value.protocol_type or None
    group.leader_id = value.leader if value.leader in group.members else group.leader_id
    group.state = GroupState.STABLE if group.members else GroupState.EMPTY
    return group


def group_record(group: Group) -> tuple[bytes, bytes]:
    """The classic group's GroupMetadata record (key, GroupMetadataValue v3)."""
    protocol = group.protocol_name
    members = tuple(
        MemberValue(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms,
            m.session_timeout_ms,
            m.metadata(protocol) if protocol else b"",
            m.assignment,
        )
        for m in group.members.values()
    )
    value = GroupValue(
        group.protocol_type or "",
        group.generation_id,
        protocol,
        group.leader_id,
        group.state_timestamp_ms,
        members,
    )
    return encode_group_key(GroupKey(group.group_id)), encode_group_value(value)
