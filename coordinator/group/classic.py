"""ClassicGroupEngine: the classic (pre-KIP-848) membership protocol, JoinGroup/SyncGroup/Heartbeat/LeaveGroup.

Follows the classic-group half of Kafka 4's `GroupMetadataManager` (and `ClassicGroup`):
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
Simplification: no pending-sync timeout (a silent leader is removed by its session timeout instead).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from minikafka.coordinator.errors import (
    CoordinatorNotAvailable,
    FencedInstanceId,
    GroupError,
    IllegalGeneration,
    RebalanceInProgress,
    UnknownMemberId,
)
from minikafka.coordinator.group.metadata import GroupMetadataManager
from minikafka.coordinator.group.state import Group, GroupState, JoinResult, Member, SyncResult
from minikafka.protocol.errors import ErrorCode, KafkaError

_log = logging.getLogger("minikafka.coordinator.group")

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    """A JoinGroup as the coordinator needs it, whatever the request version."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str
    client_host: str
    require_known_member_id: bool  # v4+ (KIP-394): a new member first gets MEMBER_ID_REQUIRED
    supports_skip_assignment: bool = False  # v9+ (KIP-814)

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: dict[str, bytes]


class ClassicGroupEngine:
    def __init__(self, manager: GroupMetadataManager) -> None:
        self._manager = manager
        self._groups = manager.groups
        self._timers = manager.timers
        self._config = manager.config

    # -- sessions ------------------------------------------------------------------------------

    def resume_sessions(self, now: int) -> None:
        """Start the session clock of every member of the replayed groups (Kafka's onLoaded)."""
        for group in self._groups.values():
            for member in group.members.values():
                self._schedule_heartbeat(group, member, member.session_timeout_ms, now)

    def reschedule_heartbeat(self, group: Group, member: Member) -> None:
        """Kafka's rescheduleClassicGroupMemberHeartbeat: the member's session starts again."""
        self._schedule_heartbeat(group, member, member.session_timeout_ms)

    def _schedule_heartbeat(self, group: Group, member: Member, timeout_ms: int, now: int | None = None) -> None:
        member.heartbeat_deadline_ms = (self._manager.now() if now is None else now) + timeout_ms
        group_id, member_id = group.group_id, member.member_id
        self._timers.schedule(
            ("heartbeat", group_id, member_id),
            member.heartbeat_deadline_ms,
            lambda: self._on_heartbeat_expired(group_id, member_id),
        )

    def _on_heartbeat_expired(self, group_id: str, member_id: str) -> None:
        group = self._groups.get(group_id)
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
        self._timers.cancel(("heartbeat", group.group_id, member.member_id))
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"member {member.member_id} removed")
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # -- join phase ----------------------------------------------------------------------------

    def prepare_rebalance(self, group: Group, reason: str) -> None:
        """A rebalance the coordinator asks for (a group just converted back from a consumer group)."""
        self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str = "") -> None:
        _log.info("preparing to rebalance group %s in state %s (%s)", group.group_id, group.state.value, reason)
        now = self._manager.now()
        if group.is_(GroupState.COMPLETING_REBALANCE):
            group.reset_assignments()
            for member in group.members.values():
                member.complete_sync(SyncResult(ErrorCode.rebalance_in_progress))
        was_empty = group.is_(GroupState.EMPTY)
        group.transition_to(GroupState.PREPARING_REBALANCE, now)
        delay = self._config.initial_rebalance_delay_ms
        rebalance_timeout = group.rebalance_timeout_ms()
        if was_empty and delay > 0:
            group.initial_delay_active = True
            group.new_member_added = False
            first = min(delay, rebalance_timeout) if rebalance_timeout > 0 else delay
            self._schedule_initial_delay(group, first, max(rebalance_timeout - delay, 0), now)
        else:
            group_id = group.group_id
            self._timers.schedule(("join", group_id), now + rebalance_timeout, lambda: self._on_join_deadline(group_id))
        self._try_complete_join(group)

    def _schedule_initial_delay(self, group: Group, delay: int, remaining: int, now: int) -> None:
        group_id = group.group_id

        def fire() -> None:
            current = self._groups.get(group_id)
            if current is not group or not group.is_(GroupState.PREPARING_REBALANCE):
                return
            if group.new_member_added and remaining > 0:
                group.new_member_added = False
                step = min(self._config.initial_rebalance_delay_ms, remaining)
                self._schedule_initial_delay(group, step, max(remaining - step, 0), self._manager.now())
                return
            group.initial_delay_active = False
            self._complete_join(group)

        self._timers.schedule(("join", group_id), now + delay, fire)

    def _on_join_deadline(self, group_id: str) -> None:
        group = self._groups.get(group_id)
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
        self._timers.cancel(("join", group.group_id))
        group.initial_delay_active = False
        for member in group.not_yet_rejoined():
            _log.info("member %s of group %s did not rejoin in time", member.member_id, group.group_id)
            member.complete_sync(SyncResult(ErrorCode.unknown_member_id))
            self._timers.cancel(("heartbeat", group.group_id, member.member_id))
            group.remove(member.member_id)
        if group.is_(GroupState.DEAD):
            return
        now = self._manager.now()
        group.init_next_generation(now)
        if group.is_(GroupState.EMPTY):
            try:
                self._manager.store_group(group)
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

    def _current_join_result(self, group: Group, member: Member, *, skip_assignment: bool = False) -> JoinResult:
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
        self, group: Group, request: JoinGroupRequest, member_id: str, instance_id: str | None
    ) -> asyncio.Future[Any]:
        member = Member(
            member_id,
            instance_id,
            request.client_id,
            request.client_host,
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            request.protocol_type,
            list(request.protocols),
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
        self, group: Group, member: Member, request: JoinGroupRequest
    ) -> asyncio.Future[Any]:
        member.protocols = list(request.protocols)
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        member.complete_join(JoinResult(ErrorCode.rebalance_in_progress, member.member_id))
        future = self._new_future()
        member.join_future = future
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group, f"member {member.member_id} rejoined")
        else:
            self._try_complete_join(group)
        return future

    async def join_group(self, request: JoinGroupRequest) -> JoinResult:
        outcome = self._join(request)
        result = outcome if isinstance(outcome, JoinResult) else await asyncio.shield(outcome)
        _log.debug("join %s member=%r -> %s gen=%d leader=%s", request.group_id, request.member_id, result.error.name,
                   result.generation_id, result.leader_id == result.member_id)
        return result

    def _join(self, request: JoinGroupRequest) -> JoinResult | asyncio.Future[Any]:
        def fail(code: ErrorCode) -> JoinResult:
            return JoinResult(code, request.member_id)

        if not request.group_id:
            return fail(ErrorCode.invalid_group_id)
        if not (self._config.min_session_timeout_ms <= request.session_timeout_ms
                <= self._config.max_session_timeout_ms):
            return fail(ErrorCode.invalid_session_timeout)
        if not request.member_id:
            return self._join_new_member(request)
        group = self._groups.get(request.group_id)
        if group is None:
            return fail(ErrorCode.unknown_member_id)
        if group.is_(GroupState.DEAD):
            return fail(ErrorCode.coordinator_not_available)
        return self._join_known_member(group, request)

    def _join_new_member(self, request: JoinGroupRequest) -> JoinResult | asyncio.Future[Any]:
        """A join with an empty member id: the member is given one."""
        group = self._manager.get_or_create_group(request.group_id)
        if group.is_(GroupState.DEAD):
            return JoinResult(ErrorCode.coordinator_not_available, request.member_id)
        if not group.supports_protocols(request.protocol_type, request.protocol_names()):
            return JoinResult(ErrorCode.inconsistent_group_protocol, request.member_id)
        instance_id = request.group_instance_id
        new_id = f"{instance_id if instance_id is not None else request.client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            return self._static_join(group, request, new_id, instance_id)
        if request.require_known_member_id:
            group_id = group.group_id
            group.pending_members.add(new_id)
            self._timers.schedule(
                ("heartbeat", group_id, new_id),
                self._manager.now() + request.session_timeout_ms,
                lambda: self._on_heartbeat_expired(group_id, new_id),
            )
            return JoinResult(ErrorCode.member_id_required, new_id)
        return self._add_member_and_rebalance(group, request, new_id, None)

    def _join_known_member(self, group: Group, request: JoinGroupRequest) -> JoinResult | asyncio.Future[Any]:
        member_id = request.member_id
        if group.is_static_member_fenced(member_id, request.group_instance_id):
            return JoinResult(ErrorCode.fenced_instance_id, member_id)
        supported = group.supports_protocols(request.protocol_type, request.protocol_names())
        if member_id in group.pending_members:
            if not supported:
                return JoinResult(ErrorCode.inconsistent_group_protocol, member_id)
            self._timers.cancel(("heartbeat", group.group_id, member_id))
            return self._add_member_and_rebalance(group, request, member_id, request.group_instance_id)
        member = group.members.get(member_id)
        if member is None:
            return JoinResult(ErrorCode.unknown_member_id, member_id)
        if not supported:
            return JoinResult(ErrorCode.inconsistent_group_protocol, member_id)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            return self._update_member_and_rebalance(group, member, request)
        if state is GroupState.COMPLETING_REBALANCE:
            if member.matches(request.protocols):
                return self._current_join_result(group, member)
            return self._update_member_and_rebalance(group, member, request)
        if state is GroupState.STABLE:
            if member.member_id == group.leader_id or not member.matches(request.protocols):
                return self._update_member_and_rebalance(group, member, request)
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            return self._current_join_result(group, member)
        return JoinResult(ErrorCode.unknown_member_id, member_id)

    def _static_join(
        self, group: Group, request: JoinGroupRequest, new_id: str, instance_id: str
    ) -> JoinResult | asyncio.Future[Any]:
        old_id = group.static_members.get(instance_id)
        if old_id is None or old_id not in group.members:
            return self._add_member_and_rebalance(group, request, new_id, instance_id)
        self._timers.cancel(("heartbeat", group.group_id, old_id))
        member = group.replace_static_member(instance_id, old_id, new_id)
        _log.info("static member %s of group %s replaced %s by %s", instance_id, group.group_id, old_id, new_id)
        if group.is_(GroupState.STABLE):
            return self._static_rejoin_stable(group, member, request, instance_id, old_id)
        if group.state in (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE):
            return self._update_member_and_rebalance(group, member, request)
        return JoinResult(ErrorCode.unknown_member_id, new_id)

    def _static_rejoin_stable(
        self, group: Group, member: Member, request: JoinGroupRequest, instance_id: str, old_id: str
    ) -> JoinResult | asyncio.Future[Any]:
        """Kafka's updateStaticMemberAndRebalance for a Stable group: no rebalance unless the
        member's protocols change the group's choice."""
        new_id = member.member_id
        old_protocols = member.protocols
        member.protocols = list(request.protocols)
        selected = group.select_protocol() if group.candidate_protocols() else None
        if selected != group.protocol_name:
            member.protocols = old_protocols
            return self._update_member_and_rebalance(group, member, request)
        old_settings = (member.rebalance_timeout_ms, member.session_timeout_ms, member.client_id, member.client_host)
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        member.client_id, member.client_host = request.client_id, request.client_host
        try:
            self._manager.store_group(group)
        except KafkaError as exc:
            # Kafka's updateStaticMemberAndRebalance: the new member id was not persisted, so the
            # replacement is undone and the old id stays the valid one.
            _log.warning("failed to persist metadata for group %s: %s", group.group_id, exc)
            member.protocols = old_protocols
            (member.rebalance_timeout_ms, member.session_timeout_ms, member.client_id,
             member.client_host) = old_settings
            group.replace_static_member(instance_id, new_id, old_id)
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            return JoinResult(exc.error_code, "", group.generation_id, group.protocol_type,
                              group.protocol_name, group.leader_id or "")
        self._schedule_heartbeat(group, member, request.session_timeout_ms)
        if group.leader_id == new_id and not request.supports_skip_assignment:
            # Before KIP-814 (JoinGroup v9) Kafka answers a rejoining static leader as a follower,
            # naming its old member id as leader, so the client does not reassign.
            return JoinResult(ErrorCode.none, new_id, group.generation_id, group.protocol_type,
                              group.protocol_name, old_id)
        return self._current_join_result(group, member, skip_assignment=request.supports_skip_assignment)

    # -- sync / heartbeat / leave --------------------------------------------------------------

    def _check_member(
        self, group: Group | None, member_id: str, instance_id: str | None, generation_id: int | None
    ) -> Member:
        if group is None:
            raise UnknownMemberId(f"member {member_id}: no such group")
        if group.is_(GroupState.DEAD):
            raise CoordinatorNotAvailable(f"group {group.group_id} is dead")
        if group.is_static_member_fenced(member_id, instance_id):
            raise FencedInstanceId(f"static member {instance_id} of group {group.group_id} is not {member_id}")
        member = group.members.get(member_id)
        if member is None:
            raise UnknownMemberId(f"member {member_id} is not in group {group.group_id}")
        if generation_id is not None and generation_id != group.generation_id:
            raise IllegalGeneration(f"generation {generation_id} is not {group.generation_id}")
        return member

    async def sync_group(self, request: SyncGroupRequest) -> SyncResult:
        result = await self._sync(request)
        _log.debug("sync %s member=%r gen=%d -> %s", request.group_id, request.member_id, request.generation_id,
                   result.error.name)
        return result

    async def _sync(self, request: SyncGroupRequest) -> SyncResult:
        group = self._groups.get(request.group_id)
        member_id = request.member_id
        try:
            member = self._check_member(group, member_id, request.group_instance_id, request.generation_id)
        except GroupError as exc:
            return SyncResult(exc.error_code)
        assert group is not None
        if (request.protocol_type is not None and request.protocol_type != group.protocol_type) or (
            request.protocol_name is not None and request.protocol_name != group.protocol_name
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
            self._complete_sync(group, request)
        return await asyncio.shield(future)

    def _complete_sync(self, group: Group, request: SyncGroupRequest) -> None:
        """The leader's assignment: persisted, then handed to every waiting member."""
        for mid, other in group.members.items():
            other.assignment = request.assignments.get(mid, b"")
        try:
            self._manager.store_group(group)
        except KafkaError as exc:
            self._reset_and_propagate_assignment_error(group, exc.error_code)
            self._prepare_rebalance(group, f"error when storing group assignment during SyncGroup "
                                           f"(member: {request.member_id}): {exc}")
            return
        now = self._manager.now()
        group.transition_to(GroupState.STABLE, now)
        for other in group.members.values():
            if other.awaiting_sync:
                other.complete_sync(
                    SyncResult(ErrorCode.none, other.assignment, group.protocol_type, group.protocol_name)
                )
                self._schedule_heartbeat(group, other, other.session_timeout_ms, now)

    def _reset_and_propagate_assignment_error(self, group: Group, error: ErrorCode) -> None:
        """Kafka's resetAndPropagateAssignmentError: every member waiting in SyncGroup, the leader
        included, gets `error` and no assignment; their session clocks restart, as a member whose
        session expired while it waited was kept (Kafka's propagateAssignment)."""
        group.reset_assignments()
        now = self._manager.now()
        for member in group.members.values():
            if member.awaiting_sync:
                member.complete_sync(SyncResult(error))
                self._schedule_heartbeat(group, member, member.session_timeout_ms, now)

    def heartbeat(self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> None:
        group = self._groups.get(group_id)
        member = self._check_member(group, member_id, group_instance_id, None)
        assert group is not None
        if generation_id != group.generation_id:
            raise IllegalGeneration(f"generation {generation_id} is not {group.generation_id}")
        if group.is_(GroupState.EMPTY):
            raise UnknownMemberId(f"group {group_id} is empty")
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        if group.is_(GroupState.PREPARING_REBALANCE):
            raise RebalanceInProgress(f"group {group_id} is rebalancing")

    def leave_group(self, group_id: str, members: Iterable[tuple[str, str | None]]) -> list[GroupError | None]:
        """Per member, given as (member id, group.instance.id): None when it left, else why it could not.
        A Dead group fails them all: CoordinatorNotAvailable is raised."""
        members = list(members)
        group = self._groups.get(group_id)
        if group is None:
            return [UnknownMemberId(f"member {member_id}: no group {group_id}") for member_id, _ in members]
        if group.is_(GroupState.DEAD):
            raise CoordinatorNotAvailable(f"group {group_id} is dead")
        outcomes: list[GroupError | None] = []
        for member_id, instance_id in members:
            try:
                self._leave(group, member_id, instance_id)
            except GroupError as exc:
                outcomes.append(exc)
            else:
                outcomes.append(None)
        return outcomes

    def _leave(self, group: Group, member_id: str, instance_id: str | None) -> None:
        if not member_id and instance_id is not None:
            member_id = group.static_members.get(instance_id, "")
            if not member_id:
                raise UnknownMemberId(f"static member {instance_id} is not in group {group.group_id}")
        elif group.is_static_member_fenced(member_id, instance_id):
            raise FencedInstanceId(f"static member {instance_id} of group {group.group_id} is not {member_id}")
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._timers.cancel(("heartbeat", group.group_id, member_id))
            self._try_complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None:
            raise UnknownMemberId(f"member {member_id} is not in group {group.group_id}")
        _log.info("member %s left group %s", member_id, group.group_id)
        self._remove_member_and_update_group(group, member)
