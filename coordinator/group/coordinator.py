"""GroupCoordinator: the group coordinator of one node, composed as Kafka 4's `GroupCoordinatorShard`.

The request handlers and the broker's wiring talk to this class only; it routes each call to the
part that owns it:
- `metadata.GroupMetadataManager`: groups and offsets, `__consumer_offsets` replay, the records
  written for them, and offset expiry (`offsets.retention.ms`);
- `classic.ClassicGroupEngine`: the classic protocol's JoinGroup/SyncGroup/Heartbeat/LeaveGroup
  and session timers;
- `offset_manager.OffsetMetadataManager`: OffsetCommit, TxnOffsetCommit, OffsetFetch;
- `admin.GroupAdmin`: DescribeGroups, ListGroups, DeleteGroups, OffsetDelete.
- `consumer.ConsumerGroupEngine`: the KIP-848 consumer protocol (ConsumerGroupHeartbeat, the
  server-side assignors, ConsumerGroupDescribe's data). Its groups live in the engine's own map,
  written to and replayed from `__consumer_offsets` by `consumer_records.ConsumerGroupRecords`;
  a group id is either a classic group or a consumer group, and offset commits/fetches, ListGroups
  and DeleteGroups dispatch on which one it is.
- `migration.GroupMigration`: classic members inside a consumer group (JoinGroup, SyncGroup,
  Heartbeat and LeaveGroup to a consumer group) and the conversions of non-empty groups between the
  protocols under `group.consumer.migration.policy`.

Simplification: single node (every group is ours).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from minikafka.coordinator.errors import GroupError, GroupSubscribedToTopic, PartitionOutcomes
from minikafka.coordinator.group.admin import GroupAdmin, GroupDescription, GroupListing
from minikafka.coordinator.group.classic import ClassicGroupEngine, JoinGroupRequest, SyncGroupRequest
from minikafka.coordinator.group.consumer import (
    ASSIGNORS,
    ConsumerGroup,
    ConsumerGroupConfig,
    ConsumerGroupEngine,
    HeartbeatRequest,
    HeartbeatResult,
)
from minikafka.coordinator.group.consumer_records import ConsumerGroupRecords
from minikafka.coordinator.group.log import OffsetsTopic
from minikafka.coordinator.group.metadata import GroupConfig, GroupMetadataManager, OffsetCommit
from minikafka.coordinator.group.migration import GroupMigration
from minikafka.coordinator.group.offset_manager import FetchedOffset, OffsetMetadataManager
from minikafka.coordinator.group.offsets import OffsetStore, TopicPartition
from minikafka.coordinator.group.state import Group, JoinResult, SyncResult
from minikafka.coordinator.ports import LogManager
from minikafka.coordinator.timers import Timers
from minikafka.protocol.errors import ErrorCode
from minikafka.storage.clock import Clock

_log = logging.getLogger("minikafka.coordinator.group")

# GroupConfig, OffsetCommit and FetchedOffset are importable from here as before the split.
__all__ = [
    "FetchedOffset",
    "GroupConfig",
    "GroupCoordinator",
    "OffsetCommit",
]


class GroupCoordinator:
    def __init__(self, logs: LogManager, clock: Clock, config: GroupConfig | None = None,
                 timers: Timers | None = None) -> None:
        """`timers` may be shared with the transaction coordinator's marker retries (the broker's wiring
        owns them then and starts them before this coordinator exists)."""
        self.config = config or GroupConfig()
        self.clock = clock
        self._logs = logs
        self._group_overrides: Callable[[str], Mapping[str, str]] | None = None
        self._build(timers if timers is not None else Timers(clock))
        # False until `__consumer_offsets` is replayed: requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS.
        self.loaded = False

    def _build(self, timers: Timers) -> None:
        """The parts, empty; `reset` builds them again around the same (running) timers."""
        logs = self._logs
        self._metadata = GroupMetadataManager(logs, self.clock, self.config, timers)
        self._classic = ClassicGroupEngine(self._metadata)
        self._offsets = OffsetMetadataManager(self._metadata, self._classic)
        self._admin = GroupAdmin(self._metadata)
        self._consumer = ConsumerGroupEngine(self._metadata, logs, ConsumerGroupConfig(
            session_timeout_ms=self.config.consumer_session_timeout_ms,
            heartbeat_interval_ms=self.config.consumer_heartbeat_interval_ms,
            assignors=tuple(name for name in self.config.consumer_assignors if name in ASSIGNORS) or ("uniform",),
        ))
        self._consumer_records = ConsumerGroupRecords(self._metadata, logs, self._consumer.groups)
        self._metadata.consumer_store = self._consumer_records
        self._migration = GroupMigration(self._metadata, logs, self._classic, self._consumer,
                                         self._consumer_records, self.config.consumer_migration_policy)
        self._consumer.upgrade = self._migration.upgrade
        self._consumer.downgrade = self._migration.downgrade
        if self._group_overrides is not None:
            self._consumer.group_overrides = self._group_overrides

    # -- state the broker reads (admin HTTP, metrics, wiring) ----------------------------------

    @property
    def topic(self) -> OffsetsTopic:
        return self._metadata.topic

    @property
    def groups(self) -> dict[str, Group]:
        return self._metadata.groups

    @property
    def offsets(self) -> OffsetStore:
        return self._metadata.offsets

    @property
    def timers(self) -> Timers:
        return self._metadata.timers

    def partition_for(self, group_id: str) -> int:
        return self._metadata.partition_for(group_id)

    # -- lifecycle -----------------------------------------------------------------------------

    def load(self) -> None:
        """Rebuild groups and offsets by replaying every `__consumer_offsets` partition."""
        for _batch in self.load_steps():
            pass

    def load_steps(self) -> Iterator[None]:
        """`load`, one step per replayed batch, so a broker can keep serving between steps (Kafka loads
        a coordinator partition in the background too); `loaded` turns True after the last one."""
        if self._metadata.topic.exists():
            yield from self._metadata.replay_steps()
            self._classic.resume_sessions(self.clock.now_ms())
            self._consumer.on_loaded()
            self._consumer_records.on_loaded()
            _log.info("loaded %d classic and %d consumer groups from __consumer_offsets", len(self.groups),
                      len(self._consumer.groups))
        self.loaded = True

    def start(self) -> None:
        self._metadata.timers.start()
        self._metadata.schedule_retention()

    async def close(self) -> None:
        self._unload_members()
        await self._metadata.timers.close()

    def _unload_members(self) -> None:
        """As Kafka's onGroupUnloaded: members parked in a rebalance are told NOT_COORDINATOR now (they
        look for the coordinator again) instead of waiting until the rebalance times out."""
        for group in self.groups.values():
            for member in group.members.values():
                member.complete_join(JoinResult(ErrorCode.not_coordinator, member.member_id))
                member.complete_sync(SyncResult(ErrorCode.not_coordinator))

    def reset(self) -> None:
        """A broker reset: every group (classic and consumer), offset and timer gone, as on a first start
        with `__consumer_offsets` not yet created. Members parked in a JoinGroup or SyncGroup are answered
        NOT_COORDINATOR, as when a coordinator unloads; their next call finds no group (UNKNOWN_MEMBER_ID)
        and they join a new one. The timers are shared with the transaction coordinator's marker retries,
        which that coordinator's own reset drops as well."""
        self._unload_members()
        timers = self._metadata.timers
        timers.clear()
        self._build(timers)
        self._metadata.schedule_retention()
        self.loaded = True

    # -- classic membership --------------------------------------------------------------------

    async def join_group(self, request: JoinGroupRequest) -> JoinResult:
        consumer_group = self._consumer.groups.get(request.group_id)
        if consumer_group is not None and consumer_group.members:
            return self._migration.join(consumer_group, request)
        if consumer_group is not None:
            self._drop_empty_consumer_group(request.group_id)
        return await self._classic.join_group(request)

    def _drop_empty_consumer_group(self, group_id: str) -> None:
        """Kafka's maybeDeleteEmptyConsumerGroup: an empty consumer group gives way to the classic group
        a JoinGroup creates, whatever the migration policy; its committed offsets stay."""
        store = self._metadata.consumer_store
        records = store.tombstones(group_id) if store is not None else []
        if records:
            self._metadata.append(group_id, records)
        del self._consumer.groups[group_id]
        _log.info("empty consumer group %s replaced by a classic group", group_id)

    async def sync_group(self, request: SyncGroupRequest) -> SyncResult:
        consumer_group = self._consumer.groups.get(request.group_id)
        if consumer_group is not None:
            return self._migration.sync(consumer_group, request)
        return await self._classic.sync_group(request)

    def heartbeat(self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> None:
        """Raises a GroupError when the member is to rejoin or is not in the group."""
        consumer_group = self._consumer.groups.get(group_id)
        if consumer_group is not None:
            return self._migration.heartbeat(consumer_group, generation_id, member_id, group_instance_id)
        return self._classic.heartbeat(group_id=group_id, generation_id=generation_id, member_id=member_id,
                                       group_instance_id=group_instance_id)

    def leave_group(self, group_id: str, members: Iterable[tuple[str, str | None]]) -> list[GroupError | None]:
        """Per member, given as (member id, group.instance.id): None when it left, else why it could not.
        A GroupError raised fails the whole request."""
        consumer_group = self._consumer.groups.get(group_id)
        if consumer_group is not None:
            return self._migration.leave(consumer_group, list(members))
        return self._classic.leave_group(group_id, members)

    # -- KIP-848 consumer groups ---------------------------------------------------------------

    def consumer_group_heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        return self._consumer.heartbeat(request)

    def use_group_configs(self, lookup: Callable[[str], Mapping[str, str]]) -> None:
        """Where the dynamic GROUP configs of a group come from (the broker's dynamic config store)."""
        self._group_overrides = lookup
        self._consumer.group_overrides = lookup

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        return self._consumer.groups.get(group_id)

    @property
    def consumer_groups(self) -> dict[str, ConsumerGroup]:
        return self._consumer.groups

    def consumer_assignor_name(self, group: ConsumerGroup) -> str:
        return self._consumer.assignor_name(group)

    def consumer_session_deadline(self, group_id: str, member_id: str) -> int | None:
        """When a consumer group member's session ends unless it heartbeats, on the broker's clock (tests
        under the manual clock read how far to move it); None when no session timer runs."""
        return self._metadata.timers.deadline(("consumer-session", group_id, member_id))

    def topic_id(self, name: str) -> Any:
        return self._consumer.topic_id(name)

    def topic_name(self, topic_id: Any) -> str | None:
        return self._consumer.topic_name(topic_id)

    # -- offsets -------------------------------------------------------------------------------

    def commit_offsets(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        commits: list[OffsetCommit],
        api_version: int = 9,
    ) -> PartitionOutcomes:
        """For a consumer group, `generation_id` is the member epoch (OffsetCommit v9's field). A
        GroupError raised refuses every partition of the commit."""
        consumer_group = self._consumer.groups.get(group_id)
        if consumer_group is not None:
            consumer_group.validate_offset_commit(member_id, generation_id, transactional=False,
                                                  api_version=api_version)
            return self._offsets.write_checked(group_id, commits)
        return self._offsets.commit_offsets(group_id=group_id, generation_id=generation_id, member_id=member_id,
                                            group_instance_id=group_instance_id, commits=commits,
                                            api_version=api_version)

    def commit_transactional_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        commits: list[OffsetCommit],
        *,
        generation_id: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
    ) -> PartitionOutcomes:
        consumer_group = self._consumer.groups.get(group_id)
        if consumer_group is not None:
            consumer_group.validate_offset_commit(member_id, generation_id, transactional=True, api_version=9)
            return self._offsets.write_checked(group_id, commits, producer_id=producer_id,
                                               producer_epoch=producer_epoch)
        return self._offsets.commit_transactional_offsets(group_id, producer_id, producer_epoch, commits,
                                                          generation_id=generation_id, member_id=member_id,
                                                          group_instance_id=group_instance_id)

    def complete_transaction(
        self, partition: int, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int = 0
    ) -> None:
        """Write a transaction marker to `__consumer_offsets-partition` and apply/drop staged offsets."""
        self._metadata.complete_transaction(partition, producer_id, producer_epoch, commit, coordinator_epoch)

    def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None, require_stable: bool = False
    ) -> dict[TopicPartition, FetchedOffset]:
        return self._offsets.fetch_offsets(group_id, partitions, require_stable)

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> None:
        """OffsetFetch v9's member check, raising a GroupError; only consumer groups check it (classic
        groups ignore it)."""
        consumer_group = self._consumer.groups.get(group_id)
        if consumer_group is not None:
            consumer_group.validate_offset_fetch(member_id, member_epoch)

    def expire_offsets(self, now_ms: int) -> int:
        return self._metadata.expire_offsets(now_ms)

    # -- admin ---------------------------------------------------------------------------------

    def describe_group(self, group_id: str) -> GroupDescription:
        return self._admin.describe_group(group_id)

    def list_groups(self, states: Iterable[str] = (), *, with_offsets_only: bool = False) -> list[GroupListing]:
        return self._admin.list_groups(states, with_offsets_only=with_offsets_only)

    def delete_group(self, group_id: str) -> None:
        """DeleteGroups of one group; raises a GroupError when it cannot be deleted."""
        if self._consumer.delete(group_id):
            self._metadata.delete_consumer_group(group_id)
        else:
            self._admin.delete_group(group_id)

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> PartitionOutcomes:
        """A GroupError raised fails the request; else, per partition, None or why it was kept."""
        consumer_group = self._consumer.groups.get(group_id)
        if consumer_group is None:
            return self._admin.delete_offsets(group_id, partitions)
        # Kafka's OffsetMetadataManager.deleteOffsets for a consumer group: any state; the partitions
        # of topics a member subscribes to (by name or regex) are GROUP_SUBSCRIBED_TO_TOPIC.
        results: PartitionOutcomes = {
            tp: GroupSubscribedToTopic(f"a member of group {group_id} consumes {tp[0]}")
            if any(m.subscribes_to(tp[0]) for m in consumer_group.members.values()) else None
            for tp in partitions
        }
        self._metadata.delete_offsets(group_id, [tp for tp, error in results.items() if error is None])
        return results

    def on_topic_deleted(self, topic: str) -> None:
        """Kafka's onPartitionsDeleted: every group's committed offsets of a deleted topic are tombstoned,
        so a group does not resume a topic re-created under the same name at the old topic's offsets."""
        offsets = self._metadata.offsets
        for group_id in offsets.groups():
            partitions = [tp for tp in offsets.partitions(group_id) if tp[0] == topic]
            if partitions:
                self._metadata.delete_offsets(group_id, partitions)
