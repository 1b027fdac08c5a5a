"""GroupCoordinator: the classic consumer-group protocol over `__consumer_offsets`.

Follows Kafka's (pre-KIP-848) `GroupCoordinator.scala` / `ClassicGroup` handling:
- JoinGroup: an unknown member gets a fresh id (`<client.id>-<uuid>`, static: `<instance.id>-<uuid>`);
  v4+ clients first get MEMBER_ID_REQUIRED and must rejoin with it. A join moves the group to
  PreparingRebalance; the join phase completes when every member has rejoined or the rebalance
  timeout (max over members) passes, removing the members that did not rejoin. The first join of
  an Empty group waits `group.initial.rebalance.delay.ms`, extended while members keep arriving.
- SyncGroup: the leader's assignment is persisted as GroupMetadataValue v3, then handed out; the
  group becomes Stable. If it cannot be stored, the leader and every member waiting in SyncGroup get
  the error (KAFKA_STORAGE_ERROR shown as NOT_COORDINATOR, as Kafka's storeGroup maps it) and the
  group goes back to PreparingRebalance (Kafka's resetAndPropagateAssignmentError).
- Heartbeat/LeaveGroup/session expiry: a member that neither heartbeats nor waits in a join/sync
  within its session timeout is removed and the group rebalances.
- Static membership (KIP-345): a known group.instance.id rejoining with an empty member id replaces
  the old member id without a rebalance when the group is Stable and its protocol is unchanged;
  the old id is then fenced (FENCED_INSTANCE_ID).
- OffsetCommit: generation -1 with an empty member id in an Empty (or unknown) group is a "simple"
  commit; otherwise member and generation must match, checked before the group state as Kafka 4's
  ClassicGroup.validateOffsetCommit does (an older generation during CompletingRebalance is
  ILLEGAL_GENERATION; the current one, REBALANCE_IN_PROGRESS). Commits are OffsetCommitKey v1/Value v3
  records; `_write_offsets` is shared with transactional commits (staged per producer id and
  applied when the COMMIT marker is replayed, see `complete_transaction`).
- Retention: offsets of an Empty group expire `offsets.retention.ms` after it became Empty; an Empty
  group left without offsets dies (tombstone).
Simplifications: single node (every group is ours); no KIP-848 consumer groups; no
pending-sync timeout (a silent leader is removed by its session timeout instead).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.records import parse_control_record
from minikafka.storage.clock import next_periodic_run

from .log import OffsetsTopic
from .offsets import OffsetStore, TopicPartition
from .records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    consumer_subscription_topics,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from .state import Group, GroupState, JoinResult, Member, SyncResult

_log = logging.getLogger("minikafka.coordinator.group")

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs
CONSUMER_PROTOCOL_TYPE = "consumer"


@dataclass(frozen=True, slots=True)
class GroupConfig:
    offsets_topic_num_partitions: int = 50
    initial_rebalance_delay_ms: int = 0
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    expire_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.none


def _error(code: ErrorCode, message: str = "") -> KafkaError:
    return KafkaError(message or code.name, code=code)


# Kafka's GroupMetadataManager.storeGroup: the code members see when the group record cannot be appended.
_STORE_ERRORS = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.request_timed_out: ErrorCode.rebalance_in_progress,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
    ErrorCode.invalid_fetch_size: ErrorCode.unknown_server_error,
}


def _store_error(code: ErrorCode) -> ErrorCode:
    return _STORE_ERRORS.get(code, code)


class GroupCoordinator:
    def __init__(self, logs: Any, clock: Any, config: GroupConfig | None = None) -> None:
        from .timers import Timers

        self.config = config or GroupConfig()
        self.clock = clock
        self.topic = OffsetsTopic(logs, self.config.offsets_topic_num_partitions)
        self.groups: dict[str, Group] = {}
        self.offsets = OffsetStore()
        self.timers = Timers(clock)
        # False until `__consumer_offsets` is replayed: requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS.
        self.loaded = False

    # -- lifecycle -----------------------------------------------------------------------------

    def load(self) -> None:
        """Rebuild groups and offsets by replaying every `__consumer_offsets` partition."""
        for _batch in self.load_steps():
            pass

    def load_steps(self) -> Iterator[None]:
        """`load`, one step per replayed batch, so a broker can keep serving between steps (Kafka loads
        a coordinator partition in the background too); `loaded` turns True after the last one."""
        if self.topic.exists():
            for partition in range(self.topic.num_partitions):
                for batch in self.topic.batches(partition):
                    self._replay_batch(batch)
                    yield
            now = self.clock.now_ms()
            for group in self.groups.values():
                for member in group.members.values():
                    self._schedule_heartbeat(group, member, member.session_timeout_ms, now)
            _log.info("loaded %d groups from __consumer_offsets", len(self.groups))
        self.loaded = True

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
                tp = (key.topic, key.partition)
                if record.value is None:
                    self.offsets.delete(key.group, tp)
                elif header.is_transactional:
                    self.offsets.stage_txn(
                        header.producer_id, key.group, tp, decode_offset_value(record.value), record.offset
                    )
                else:
                    self.offsets.commit(key.group, tp, decode_offset_value(record.value), record.offset)
                if key.group not in self.groups:
                    self.groups[key.group] = Group(key.group, state_timestamp_ms=self.clock.now_ms())
            elif isinstance(key, GroupKey):
                if record.value is None:
                    self.groups.pop(key.group, None)
                    self.offsets.delete_group(key.group)
                else:
                    self.groups[key.group] = self._group_from_value(
                        key.group, decode_group_value(record.value)
                    )

    def _group_from_value(self, group_id: str, value: GroupValue) -> Group:
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

    def start(self) -> None:
        self.timers.start()
        self._schedule_retention()

    async def close(self) -> None:
        await self.timers.close()

    # -- helpers -------------------------------------------------------------------------------

    def _now(self) -> int:
        return int(self.clock.now_ms())

    def partition_for(self, group_id: str) -> int:
        return self.topic.partition_for(group_id)

    def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]], **txn: Any) -> int:
        return self.topic.append(self.partition_for(group_id), records, self._now(), **txn)

    def _store_group(self, group: Group) -> None:
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
        self._append(
            group.group_id, [(encode_group_key(GroupKey(group.group_id)), encode_group_value(value))]
        )

    def _schedule_heartbeat(
        self, group: Group, member: Member, timeout_ms: int, now: int | None = None
    ) -> None:
        member.heartbeat_deadline_ms = (self._now() if now is None else now) + timeout_ms
        group_id, member_id = group.group_id, member.member_id
        self.timers.schedule(
            ("heartbeat", group_id, member_id),
            member.heartbeat_deadline_ms,
            lambda: self._on_heartbeat_expired(group_id, member_id),
        )

    def _on_heartbeat_expired(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None:
            return
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._try_complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None:
            return
        if (member.awaiting_join and not member.is_new) or member.awaiting_sync:
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            return
        _log.info("member %s of group %s expired after session timeout", member_id, group_id)
        self._remove_member_and_update_group(group, member)

    def _remove_member_and_update_group(self, group: Group, member: Member) -> None:
        member.complete_join(JoinResult(ErrorCode.unknown_member_id, member.member_id))
        member.complete_sync(SyncResult(ErrorCode.unknown_member_id))
        self.timers.cancel(("heartbeat", group.group_id, member.member_id))
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"member {member.member_id} removed")
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # -- join phase ----------------------------------------------------------------------------

    def _prepare_rebalance(self, group: Group, reason: str = "") -> None:
        _log.info("preparing to rebalance group %s in state %s (%s)", group.group_id, group.state.value, reason)
        now = self._now()
        if group.is_(GroupState.COMPLETING_REBALANCE):
            group.reset_assignments()
            for member in group.members.values():
                member.complete_sync(SyncResult(ErrorCode.rebalance_in_progress))
        was_empty = group.is_(GroupState.EMPTY)
        group.transition_to(GroupState.PREPARING_REBALANCE, now)
        delay = self.config.initial_rebalance_delay_ms
        rebalance_timeout = group.rebalance_timeout_ms()
        if was_empty and delay > 0:
            group.initial_delay_active = True
            group.new_member_added = False
            first = min(delay, rebalance_timeout) if rebalance_timeout > 0 else delay
            self._schedule_initial_delay(group, first, max(rebalance_timeout - delay, 0), now)
        else:
            group_id = group.group_id
            self.timers.schedule(
                ("join", group_id), now + rebalance_timeout, lambda: self._on_join_deadline(group_id)
            )
        self._try_complete_join(group)

    def _schedule_initial_delay(self, group: Group, delay: int, remaining: int, now: int) -> None:
        group_id = group.group_id

        def fire() -> None:
            current = self.groups.get(group_id)
            if current is not group or not group.is_(GroupState.PREPARING_REBALANCE):
                return
            if group.new_member_added and remaining > 0:
                group.new_member_added = False
                step = min(self.config.initial_rebalance_delay_ms, remaining)
                self._schedule_initial_delay(group, step, max(remaining - step, 0), self._now())
                return
            group.initial_delay_active = False
            self._complete_join(group)

        self.timers.schedule(("join", group_id), now + delay, fire)

    def _on_join_deadline(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None and group.is_(GroupState.PREPARING_REBALANCE):
            self._complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if (
            group.is_(GroupState.PREPARING_REBALANCE)
            and not group.initial_delay_active
            and group.all_members_joined()
        ):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        self.timers.cancel(("join", group.group_id))
        group.initial_delay_active = False
        for member in group.not_yet_rejoined():
            _log.info("member %s of group %s did not rejoin in time", member.member_id, group.group_id)
            member.complete_sync(SyncResult(ErrorCode.unknown_member_id))
            self.timers.cancel(("heartbeat", group.group_id, member.member_id))
            group.remove(member.member_id)
        if group.is_(GroupState.DEAD):
            return
        now = self._now()
        group.init_next_generation(now)
        if group.is_(GroupState.EMPTY):
            try:
                self._store_group(group)
            except KafkaError as exc:
                # As Kafka's onCompleteJoin: nobody waits for this write; the group record is
                # written again by its next rebalance.
                _log.warning("failed to write empty metadata for group %s: %s", group.group_id, exc)
            return
        all_members = group.member_metadata()
        for member in list(group.members.values()):
            is_leader = member.member_id == group.leader_id
            member.is_new = False
            member.complete_join(
                JoinResult(
                    ErrorCode.none,
                    member.member_id,
                    group.generation_id,
                    group.protocol_type,
                    group.protocol_name,
                    group.leader_id or "",
                    members=all_members if is_leader else (),
                )
            )
            self._schedule_heartbeat(group, member, member.session_timeout_ms, now)

    def _current_join_result(
        self, group: Group, member: Member, *, skip_assignment: bool = False
    ) -> JoinResult:
        is_leader = member.member_id == group.leader_id
        return JoinResult(
            ErrorCode.none,
            member.member_id,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            skip_assignment=skip_assignment and is_leader,
            members=group.member_metadata() if is_leader else (),
        )

    def _new_future(self) -> asyncio.Future[Any]:
        return asyncio.get_running_loop().create_future()

    def _add_member_and_rebalance(
        self,
        group: Group,
        member_id: str,
        instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> asyncio.Future[Any]:
        member = Member(
            member_id,
            instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            protocol_type,
            list(protocols),
            is_new=True,
        )
        future = self._new_future()
        member.join_future = future
        group.add(member)
        if group.is_(GroupState.PREPARING_REBALANCE) and group.initial_delay_active:
            group.new_member_added = True
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        if group.state in (GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"new member {member_id} joined")
        else:
            self._try_complete_join(group)
        return future

    def _update_member_and_rebalance(
        self,
        group: Group,
        member: Member,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
    ) -> asyncio.Future[Any]:
        member.protocols = list(protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.complete_join(JoinResult(ErrorCode.rebalance_in_progress, member.member_id))
        future = self._new_future()
        member.join_future = future
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group, f"member {member.member_id} rejoined")
        else:
            self._try_complete_join(group)
        return future

    async def join_group(
        self,
        *,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        client_id: str,
        client_host: str,
        require_known_member_id: bool,
        supports_skip_assignment: bool = False,
    ) -> JoinResult:
        outcome = self._join(
            group_id,
            member_id,
            group_instance_id,
            protocol_type,
            protocols,
            session_timeout_ms,
            rebalance_timeout_ms,
            client_id,
            client_host,
            require_known_member_id,
            supports_skip_assignment,
        )
        if isinstance(outcome, JoinResult):
            result = outcome
        else:
            result = await asyncio.shield(outcome)
        _log.debug("join %s member=%r -> %s gen=%d leader=%s", group_id, member_id, result.error.name,
                   result.generation_id, result.leader_id == result.member_id)
        return result

    def _join(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        client_id: str,
        client_host: str,
        require_known_member_id: bool,
        supports_skip_assignment: bool,
    ) -> JoinResult | asyncio.Future[Any]:
        def fail(code: ErrorCode) -> JoinResult:
            return JoinResult(code, member_id)

        if not group_id:
            return fail(ErrorCode.invalid_group_id)
        if not (
            self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms
        ):
            return fail(ErrorCode.invalid_session_timeout)
        names = [name for name, _ in protocols]
        group = self.groups.get(group_id)
        if not member_id:
            if group is None:
                group = self.groups[group_id] = Group(group_id, state_timestamp_ms=self._now())
            if group.is_(GroupState.DEAD):
                return fail(ErrorCode.coordinator_not_available)
            if not group.supports_protocols(protocol_type, names):
                return fail(ErrorCode.inconsistent_group_protocol)
            new_id = f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"
            if instance_id is not None:
                return self._static_join(
                    group,
                    new_id,
                    instance_id,
                    client_id,
                    client_host,
                    rebalance_timeout_ms,
                    session_timeout_ms,
                    protocol_type,
                    protocols,
                    supports_skip_assignment,
                )
            if require_known_member_id:
                group.pending_members.add(new_id)
                self.timers.schedule(
                    ("heartbeat", group_id, new_id),
                    self._now() + session_timeout_ms,
                    lambda: self._on_heartbeat_expired(group_id, new_id),
                )
                return JoinResult(ErrorCode.member_id_required, new_id)
            return self._add_member_and_rebalance(
                group,
                new_id,
                None,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocols,
            )
        # A member that already has an id.
        if group is None:
            return fail(ErrorCode.unknown_member_id)
        if group.is_(GroupState.DEAD):
            return fail(ErrorCode.coordinator_not_available)
        if group.is_static_member_fenced(member_id, instance_id):
            return fail(ErrorCode.fenced_instance_id)
        if member_id in group.pending_members:
            if not group.supports_protocols(protocol_type, names):
                return fail(ErrorCode.inconsistent_group_protocol)
            self.timers.cancel(("heartbeat", group_id, member_id))
            return self._add_member_and_rebalance(
                group,
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocols,
            )
        member = group.members.get(member_id)
        if member is None:
            return fail(ErrorCode.unknown_member_id)
        if not group.supports_protocols(protocol_type, names):
            return fail(ErrorCode.inconsistent_group_protocol)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            return self._update_member_and_rebalance(
                group, member, protocols, rebalance_timeout_ms, session_timeout_ms
            )
        if state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                return self._current_join_result(group, member)
            return self._update_member_and_rebalance(
                group, member, protocols, rebalance_timeout_ms, session_timeout_ms
            )
        if state is GroupState.STABLE:
            if member.member_id == group.leader_id or not member.matches(protocols):
                return self._update_member_and_rebalance(
                    group, member, protocols, rebalance_timeout_ms, session_timeout_ms
                )
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            return self._current_join_result(group, member)
        return fail(ErrorCode.unknown_member_id)

    def _static_join(
        self,
        group: Group,
        new_id: str,
        instance_id: str,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        supports_skip_assignment: bool,
    ) -> JoinResult | asyncio.Future[Any]:
        old_id = group.static_members.get(instance_id)
        if old_id is None or old_id not in group.members:
            return self._add_member_and_rebalance(
                group,
                new_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocols,
            )
        self.timers.cancel(("heartbeat", group.group_id, old_id))
        member = group.replace_static_member(instance_id, old_id, new_id)
        _log.info(
            "static member %s of group %s replaced %s by %s", instance_id, group.group_id, old_id, new_id
        )
        if group.is_(GroupState.STABLE):
            old_protocols = member.protocols
            member.protocols = list(protocols)
            selected = group.select_protocol() if group.candidate_protocols() else None
            if selected != group.protocol_name:
                member.protocols = old_protocols
                return self._update_member_and_rebalance(
                    group, member, protocols, rebalance_timeout_ms, session_timeout_ms
                )
            old_settings = (member.rebalance_timeout_ms, member.session_timeout_ms, member.client_id,
                            member.client_host)
            member.rebalance_timeout_ms = rebalance_timeout_ms
            member.session_timeout_ms = session_timeout_ms
            member.client_id, member.client_host = client_id, client_host
            try:
                self._store_group(group)
            except KafkaError as exc:
                # Kafka's updateStaticMemberAndRebalance: the new member id was not persisted, so the
                # replacement is undone and the old id stays the valid one.
                _log.warning("failed to persist metadata for group %s: %s", group.group_id, exc)
                member.protocols = old_protocols
                (member.rebalance_timeout_ms, member.session_timeout_ms, member.client_id,
                 member.client_host) = old_settings
                group.replace_static_member(instance_id, new_id, old_id)
                self._schedule_heartbeat(group, member, member.session_timeout_ms)
                return JoinResult(_store_error(exc.error_code), "", group.generation_id, group.protocol_type,
                                  group.protocol_name, group.leader_id or "")
            self._schedule_heartbeat(group, member, session_timeout_ms)
            if group.leader_id == new_id and not supports_skip_assignment:
                # Before KIP-814 (JoinGroup v9) Kafka answers a rejoining static leader as a follower,
                # naming its old member id as leader, so the client does not reassign.
                return JoinResult(ErrorCode.none, new_id, group.generation_id, group.protocol_type,
                                  group.protocol_name, old_id)
            return self._current_join_result(group, member, skip_assignment=supports_skip_assignment)
        if group.state in (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE):
            return self._update_member_and_rebalance(
                group, member, protocols, rebalance_timeout_ms, session_timeout_ms
            )
        return JoinResult(ErrorCode.unknown_member_id, new_id)

    # -- sync / heartbeat / leave --------------------------------------------------------------

    def _check_member(
        self, group: Group | None, member_id: str, instance_id: str | None, generation_id: int | None
    ) -> Member:
        if group is None:
            raise _error(ErrorCode.unknown_member_id)
        if group.is_(GroupState.DEAD):
            raise _error(ErrorCode.coordinator_not_available)
        if group.is_static_member_fenced(member_id, instance_id):
            raise _error(ErrorCode.fenced_instance_id)
        member = group.members.get(member_id)
        if member is None:
            raise _error(ErrorCode.unknown_member_id)
        if generation_id is not None and generation_id != group.generation_id:
            raise _error(ErrorCode.illegal_generation)
        return member

    async def sync_group(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult:
        result = await self._sync(group_id, generation_id, member_id, group_instance_id, protocol_type,
                                  protocol_name, assignments)
        _log.debug("sync %s member=%r gen=%d -> %s", group_id, member_id, generation_id, result.error.name)
        return result

    async def _sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult:
        group = self.groups.get(group_id)
        try:
            member = self._check_member(group, member_id, group_instance_id, generation_id)
        except KafkaError as exc:
            return SyncResult(exc.error_code)
        assert group is not None
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        if group.is_(GroupState.EMPTY):
            return SyncResult(ErrorCode.unknown_member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return SyncResult(ErrorCode.rebalance_in_progress)
        if group.is_(GroupState.STABLE):
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            return SyncResult(ErrorCode.none, member.assignment, group.protocol_type, group.protocol_name)
        # CompletingRebalance: wait for the leader's assignment.
        future: asyncio.Future[SyncResult] = self._new_future()
        member.complete_sync(SyncResult(ErrorCode.rebalance_in_progress))
        member.sync_future = future
        if member_id != group.leader_id:
            _log.info("member %s of group %s awaits the leader's assignment for generation %d", member_id,
                      group.group_id, group.generation_id)
        else:
            for mid, other in group.members.items():
                other.assignment = assignments.get(mid, b"")
            try:
                self._store_group(group)
            except KafkaError as exc:
                self._reset_and_propagate_assignment_error(group, _store_error(exc.error_code))
                self._prepare_rebalance(group, f"error when storing group assignment during SyncGroup "
                                               f"(member: {member_id}): {exc}")
                return await asyncio.shield(future)
            now = self._now()
            group.transition_to(GroupState.STABLE, now)
            for other in group.members.values():
                if other.awaiting_sync:
                    other.complete_sync(
                        SyncResult(ErrorCode.none, other.assignment, group.protocol_type, group.protocol_name)
                    )
                    self._schedule_heartbeat(group, other, other.session_timeout_ms, now)
        return await asyncio.shield(future)

    def _reset_and_propagate_assignment_error(self, group: Group, error: ErrorCode) -> None:
        """Kafka's resetAndPropagateAssignmentError: every member waiting in SyncGroup, the leader
        included, gets `error` and no assignment; their session clocks restart, as a member whose
        session expired while it waited was kept (Kafka's propagateAssignment)."""
        group.reset_assignments()
        now = self._now()
        for member in group.members.values():
            if member.awaiting_sync:
                member.complete_sync(SyncResult(error))
                self._schedule_heartbeat(group, member, member.session_timeout_ms, now)

    def heartbeat(
        self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        group = self.groups.get(group_id)
        try:
            member = self._check_member(group, member_id, group_instance_id, None)
        except KafkaError as exc:
            return exc.error_code
        assert group is not None
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if group.is_(GroupState.EMPTY):
            return ErrorCode.unknown_member_id
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave_group(
        self, group_id: str, members: Iterable[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """(top-level error, per-member errors) for members given as (member id, group.instance.id)."""
        members = list(members)
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.none, [ErrorCode.unknown_member_id] * len(members)
        if group.is_(GroupState.DEAD):
            return ErrorCode.coordinator_not_available, [ErrorCode.coordinator_not_available] * len(members)
        errors = []
        for member_id, instance_id in members:
            if not member_id and instance_id is not None:
                member_id = group.static_members.get(instance_id, "")
                if not member_id:
                    errors.append(ErrorCode.unknown_member_id)
                    continue
            elif group.is_static_member_fenced(member_id, instance_id):
                errors.append(ErrorCode.fenced_instance_id)
                continue
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self.timers.cancel(("heartbeat", group_id, member_id))
                self._try_complete_join(group)
                errors.append(ErrorCode.none)
                continue
            member = group.members.get(member_id)
            if member is None:
                errors.append(ErrorCode.unknown_member_id)
                continue
            _log.info("member %s left group %s", member_id, group_id)
            self._remove_member_and_update_group(group, member)
            errors.append(ErrorCode.none)
        return ErrorCode.none, errors

    # -- offsets -------------------------------------------------------------------------------

    def _write_offsets(
        self, group_id: str, commits: list[OffsetCommit], *, producer_id: int = -1, producer_epoch: int = -1
    ) -> None:
        """Append the commits as one batch and apply them (or stage them, for a transaction)."""
        if not commits:
            return
        now = self._now()
        records: list[tuple[bytes, bytes | None]] = []
        values = []
        for c in commits:
            value = OffsetValue(c.offset, c.leader_epoch, c.metadata or "", now, c.expire_timestamp)
            values.append(value)
            records.append(
                (encode_offset_key(OffsetKey(group_id, c.topic, c.partition)), encode_offset_value(value))
            )
        transactional = producer_id >= 0
        base = self._append(
            group_id,
            records,
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

    def _group_for_commit(
        self, group_id: str, generation_id: int, unknown_group_error: ErrorCode = ErrorCode.illegal_generation
    ) -> tuple[Group | None, ErrorCode]:
        """The group an offset commit goes to: a commit without a generation creates it (simple
        consumers and transactional producers use groups nobody joined)."""
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return None, unknown_group_error
            group = self.groups[group_id] = Group(group_id, state_timestamp_ms=self._now())
            return group, ErrorCode.none
        return group, ErrorCode.none

    @staticmethod
    def _offset_commit_error(group: Group, generation_id: int, member_id: str, group_instance_id: str | None,
                             *, transactional: bool) -> ErrorCode:
        """Kafka 4's ClassicGroup.validateOffsetCommit, in its order: the member and its generation
        are checked before the group state, so a commit carrying an older generation while the group
        completes a rebalance is ILLEGAL_GENERATION (librdkafka's cooperative consumers expect that,
        not REBALANCE_IN_PROGRESS). Transactional commits skip the state check; a commit without
        member fields needs an Empty group unless it is transactional (TxnOffsetCommit v0-2)."""
        if group.is_(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        if generation_id < 0 and group.is_(GroupState.EMPTY):
            return ErrorCode.none
        if generation_id >= 0 or member_id or group_instance_id is not None:
            if group_instance_id is not None:
                known = group.static_members.get(group_instance_id)
                if known is None:
                    return ErrorCode.unknown_member_id
                if known != member_id:
                    return ErrorCode.fenced_instance_id
            if not group.has(member_id):
                return ErrorCode.unknown_member_id
            if generation_id != group.generation_id:
                return ErrorCode.illegal_generation
        elif not transactional and not group.is_(GroupState.EMPTY):
            return ErrorCode.unknown_member_id
        if not transactional and group.is_(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def commit_offsets(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        commits: list[OffsetCommit],
        unknown_group_error: ErrorCode = ErrorCode.illegal_generation,
    ) -> dict[TopicPartition, ErrorCode]:
        """A plain OffsetCommit. `unknown_group_error` is what a commit with a generation gets when
        the group does not exist: Kafka answers GROUP_ID_NOT_FOUND from OffsetCommit v9 on."""
        group, error = self._group_for_commit(group_id, generation_id, unknown_group_error)
        if group is not None and error is ErrorCode.none:
            error = self._offset_commit_error(group, generation_id, member_id, group_instance_id,
                                              transactional=False)
            # Kafka's commitOffset: a commit keeps the member's session alive only while the group is
            # Stable or PreparingRebalance.
            member = group.members.get(member_id)
            if error is ErrorCode.none and member is not None and group.state in (
                GroupState.STABLE, GroupState.PREPARING_REBALANCE
            ):
                self._schedule_heartbeat(group, member, member.session_timeout_ms)
        return self._write_checked(group_id, commits, error)

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
    ) -> dict[TopicPartition, ErrorCode]:
        """Stage offsets of a transaction; they apply when its COMMIT marker is written.

        v3 requests carry the consumer's generation and member (KIP-447), checked as Kafka's
        ClassicGroup.validateOffsetCommit does for transactional commits: unlike plain commits, a
        rebalance in progress is no error, and a request without member fields (v0-2) is accepted.
        """
        group, error = self._group_for_commit(group_id, generation_id)
        if group is not None and error is ErrorCode.none:
            error = self._offset_commit_error(group, generation_id, member_id, group_instance_id,
                                              transactional=True)
        return self._write_checked(group_id, commits, error, producer_id=producer_id, producer_epoch=producer_epoch)

    def _write_checked(self, group_id: str, commits: list[OffsetCommit], group_error: ErrorCode, *,
                       producer_id: int = -1, producer_epoch: int = -1) -> dict[TopicPartition, ErrorCode]:
        """Per-partition results: the group's error for all, or each commit's own metadata check."""
        if group_error is not ErrorCode.none:
            return {(c.topic, c.partition): group_error for c in commits}
        results: dict[TopicPartition, ErrorCode] = {}
        accepted = []
        for c in commits:
            if c.metadata is not None and len(c.metadata.encode()) > self.config.offset_metadata_max_bytes:
                results[(c.topic, c.partition)] = ErrorCode.offset_metadata_too_large
            else:
                results[(c.topic, c.partition)] = ErrorCode.none
                accepted.append(c)
        self._write_offsets(group_id, accepted, producer_id=producer_id, producer_epoch=producer_epoch)
        return results

    def complete_transaction(
        self, partition: int, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int = 0
    ) -> None:
        """Write a transaction marker to `__consumer_offsets-partition` and apply/drop staged offsets."""
        self.topic.append_marker(
            partition, producer_id, producer_epoch, commit, coordinator_epoch, self._now()
        )
        self.offsets.replay_end_txn_marker(producer_id, commit)

    def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None, require_stable: bool = False
    ) -> dict[TopicPartition, FetchedOffset]:
        """Committed offsets; `partitions=None` means every partition the group committed."""
        if partitions is None:
            partitions = sorted(self.offsets.partitions(group_id))
        out = {}
        for tp in partitions:
            if require_stable and self.offsets.has_pending(group_id, tp):
                out[tp] = FetchedOffset(error=ErrorCode.unstable_offset_commit)
                continue
            committed = self.offsets.fetch(group_id, tp)
            if committed is None:
                out[tp] = FetchedOffset()
            else:
                v = committed.value
                out[tp] = FetchedOffset(v.offset, v.leader_epoch, v.metadata)
        return out

    # -- admin ---------------------------------------------------------------------------------

    def describe_group(self, group_id: str) -> dict[str, Any]:
        group = self.groups.get(group_id)
        if group is None:
            return {
                "group_id": group_id,
                "error_code": ErrorCode.none,
                "group_state": "Dead",
                "protocol_type": "",
                "protocol_data": "",
                "members": [],
                "exists": False,
            }
        stable = group.is_(GroupState.STABLE)
        members = [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": m.metadata(group.protocol_name) if stable and group.protocol_name else b"",
                "member_assignment": m.assignment if stable else b"",
            }
            for m in group.members.values()
        ]
        return {
            "group_id": group_id,
            "error_code": ErrorCode.none,
            "group_state": group.state.value,
            "protocol_type": group.protocol_type or "",
            "protocol_data": (group.protocol_name or "") if stable else "",
            "members": members,
            "exists": True,
        }

    def list_groups(self, states: Iterable[str] = ()) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of live groups, optionally only in `states`."""
        wanted = {s.lower().strip() for s in states}
        return [
            (g.group_id, g.protocol_type or "", g.state.value)
            for g in self.groups.values()
            if not g.is_(GroupState.DEAD) and (not wanted or g.state.value.lower() in wanted)
        ]

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        out: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if not group_id:
                out[group_id] = ErrorCode.invalid_group_id
            elif group is None or group.is_(GroupState.DEAD):
                out[group_id] = ErrorCode.group_id_not_found
            elif not group.is_(GroupState.EMPTY):
                out[group_id] = ErrorCode.non_empty_group
            else:
                self._delete_group(group)
                out[group_id] = ErrorCode.none
        return out

    def _delete_group(self, group: Group) -> None:
        partitions = self.offsets.delete_group(group.group_id)
        records: list[tuple[bytes, bytes | None]] = [
            (encode_offset_key(OffsetKey(group.group_id, topic, partition)), None)
            for topic, partition in partitions
        ]
        records.append((encode_group_key(GroupKey(group.group_id)), None))
        self._append(group.group_id, records)
        group.transition_to(GroupState.DEAD, self._now())
        self.groups.pop(group.group_id, None)

    def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """Kafka 4's OffsetMetadataManager.deleteOffsets: a group error (unknown group, or a non-empty
        group that is not a consumer group) fails the request; otherwise the top-level error is NONE
        and only partitions of topics the group subscribes to get GROUP_SUBSCRIBED_TO_TOPIC."""
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.group_id_not_found, {}
        if not group.is_(GroupState.EMPTY) and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return ErrorCode.non_empty_group, {}
        # None: the subscriptions are not known yet (no generation chose a protocol), which Kafka's
        # isSubscribedToTopic counts as subscribed to every topic.
        subscribed: set[str] | None = set()
        if not group.is_(GroupState.EMPTY):
            if group.protocol_name is None:
                subscribed = None
            else:
                topics: set[str] = set()
                for member in group.members.values():
                    # A member that joined since the protocol was chosen may not list it yet.
                    for name, metadata in member.protocols:
                        if name == group.protocol_name:
                            topics.update(consumer_subscription_topics(metadata))
                subscribed = topics
        results = {}
        tombstones: list[tuple[bytes, bytes | None]] = []
        for tp in partitions:
            if subscribed is None or tp[0] in subscribed:
                results[tp] = ErrorCode.group_subscribed_to_topic
                continue
            results[tp] = ErrorCode.none
            if self.offsets.delete(group_id, tp):
                tombstones.append((encode_offset_key(OffsetKey(group_id, tp[0], tp[1])), None))
        if tombstones:
            self._append(group_id, tombstones)
        return ErrorCode.none, results

    # -- retention -----------------------------------------------------------------------------

    def _schedule_retention(self) -> None:
        self.timers.schedule(
            ("retention",), next_periodic_run(self.clock, self.config.offsets_retention_check_interval_ms),
            self._on_retention,
        )

    def _on_retention(self) -> None:
        try:
            self.expire_offsets(self._now())
        finally:
            self._schedule_retention()

    def expire_offsets(self, now_ms: int) -> int:
        """Tombstone expired offsets; an Empty group left with none dies. Returns offsets removed."""
        removed = 0
        for group in list(self.groups.values()):
            if group.is_(GroupState.EMPTY):
                empty_since = group.state_timestamp_ms if group.protocol_type else None
            elif group.protocol_type is None:
                empty_since = None
            else:
                continue
            expired = self.offsets.expired(
                group.group_id, now_ms, self.config.offsets_retention_ms, empty_since
            )
            try:
                removed += self._expire_group_offsets(group, expired, now_ms)
            except KafkaError as exc:
                # Kafka's cleanupGroupMetadata logs it too; nothing was removed, so the next check retries
                _log.warning("failed to write tombstones for group %s: %s", group.group_id, exc)
        return removed

    def _expire_group_offsets(self, group: Group, expired: list[TopicPartition], now_ms: int) -> int:
        if expired:
            # Tombstones first: if they cannot be written, the offsets stay for the next check.
            self._append(
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
            self._append(group.group_id, [(encode_group_key(GroupKey(group.group_id)), None)])
            group.transition_to(GroupState.DEAD, now_ms)
            self.groups.pop(group.group_id, None)
        return len(expired)
