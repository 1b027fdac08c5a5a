"""The classic (pre-KIP-848) group: states, members, protocol selection, generations.

Mirrors Kafka's `GroupMetadata` / `MemberMetadata` (core `kafka.coordinator.group`, and the
`ClassicGroup` of the new group coordinator). Pure bookkeeping: no I/O, no timers; the
coordinator drives it and owns the asyncio futures members wait on.

States and the transitions Kafka allows (target <- allowed previous states):
    PreparingRebalance   <- Stable, CompletingRebalance, Empty
    CompletingRebalance  <- PreparingRebalance
    Stable               <- CompletingRebalance
    Empty                <- PreparingRebalance
    Dead                 <- every state (group deleted, or emptied and expired)
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from minikafka.coordinator.errors import (
    CoordinatorBug,
    CoordinatorNotAvailable,
    FencedInstanceId,
    IllegalGeneration,
    InconsistentGroupProtocol,
    RebalanceInProgress,
    UnknownMemberId,
)
from minikafka.protocol.errors import ErrorCode


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalStateTransition(CoordinatorBug):
    """A transition Kafka's ClassicGroupState does not allow: a coordinator bug, not a client error."""


def can_transition(current: GroupState, target: GroupState) -> bool:
    return current in _VALID_PREVIOUS[target]


@dataclass(frozen=True, slots=True)
class JoinResult:
    """What a JoinGroup waiter is answered with."""

    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    members: tuple[tuple[str, str | None, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    is_new: bool = False
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None
    heartbeat_deadline_ms: int = 0

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise KeyError(protocol)

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return list(protocols) == list(self.protocols)

    def vote(self, candidates: set[str]) -> str:
        """This member's most preferred protocol among `candidates`."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise KeyError("member supports none of the candidate protocols")

    def complete_join(self, result: JoinResult) -> None:
        future, self.join_future = self.join_future, None
        if future is not None and not future.done():
            future.set_result(result)

    def complete_sync(self, result: SyncResult) -> None:
        future, self.sync_future = self.sync_future, None
        if future is not None and not future.done():
            future.set_result(result)


@dataclass(slots=True)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    pending_members: set[str] = field(default_factory=set)  # got MEMBER_ID_REQUIRED, not joined yet
    new_member_added: bool = False
    # Initial-delay bookkeeping for group.initial.rebalance.delay.ms (Kafka's InitialDelayedJoin).
    initial_delay_active: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    # -- state ---------------------------------------------------------------------------------

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if not can_transition(self.state, target):
            raise IllegalStateTransition(
                f"group {self.group_id} cannot move from {self.state.value} to {target.value}"
            )
        self.state = target
        self.state_timestamp_ms = now_ms

    # -- members -------------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.discard(member.member_id)
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if (
            member.group_instance_id is not None
            and self.static_members.get(member.group_instance_id) == member_id
        ):
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_static_member_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """True when `instance_id` is known here under another member id (Kafka's FENCED_INSTANCE_ID)."""
        if instance_id is None:
            return False
        known = self.static_members.get(instance_id)
        return known is not None and known != member_id

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> Member:
        """A static member rejoined with a fresh member id: move its metadata, fence the old id."""
        member = self.members.pop(old_member_id)
        member.complete_join(JoinResult(ErrorCode.fenced_instance_id, old_member_id))
        member.complete_sync(SyncResult(ErrorCode.fenced_instance_id))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        return member

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols -----------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        members = list(self.members.values())
        if not members:
            return set()
        common = set(members[0].protocol_names())
        for member in members[1:]:
            common &= set(member.protocol_names())
        return common

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        """Can a member with these protocols join? (Kafka: GroupMetadata.supportsProtocols)."""
        if not self.members:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and bool(self.candidate_protocols() & set(names))

    def select_protocol(self) -> str:
        """Each member votes for its most preferred candidate; most votes wins.

        Ties go to the protocol the most members list first, then to the order the leader prefers,
        so the choice is deterministic (Kafka leaves ties to map order).
        """
        candidates = self.candidate_protocols()
        if not candidates:
            raise InconsistentGroupProtocol(f"no protocol common to all members of group {self.group_id}")
        votes = Counter(member.vote(candidates) for member in self.members.values())
        leader = self.members.get(self.leader_id or "") or next(iter(self.members.values()))
        order = {name: index for index, name in enumerate(leader.protocol_names())}
        return max(votes, key=lambda name: (votes[name], -order.get(name, len(order))))

    def member_metadata(self) -> tuple[tuple[str, str | None, bytes], ...]:
        """(member id, instance id, metadata of the chosen protocol) of every member, for the leader."""
        assert self.protocol_name is not None
        return tuple(
            (m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()
        )

    def init_next_generation(self, now_ms: int) -> None:
        """End of the join phase: bump the generation, pick the protocol, move on."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.new_member_added = False

    def reset_assignments(self) -> None:
        for member in self.members.values():
            member.assignment = b""

    def validate_offset_commit(
        self, generation_id: int, member_id: str, group_instance_id: str | None, *, transactional: bool
    ) -> None:
        """Kafka 4's ClassicGroup.validateOffsetCommit, in its order: the member and its generation
        are checked before the group state, so a commit carrying an older generation while the group
        completes a rebalance is ILLEGAL_GENERATION (librdkafka's cooperative consumers expect that,
        not REBALANCE_IN_PROGRESS). Transactional commits skip the state check; a commit without
        member fields needs an Empty group unless it is transactional (TxnOffsetCommit v0-2)."""
        if self.is_(GroupState.DEAD):
            raise CoordinatorNotAvailable(f"group {self.group_id} is dead")
        if generation_id < 0 and self.is_(GroupState.EMPTY):
            return
        if generation_id >= 0 or member_id or group_instance_id is not None:
            if group_instance_id is not None:
                known = self.static_members.get(group_instance_id)
                if known is None:
                    raise UnknownMemberId(f"static member {group_instance_id} is not in group {self.group_id}")
                if known != member_id:
                    raise FencedInstanceId(f"static member {group_instance_id} is {known}, not {member_id}")
            if not self.has(member_id):
                raise UnknownMemberId(f"member {member_id} is not in group {self.group_id}")
            if generation_id != self.generation_id:
                raise IllegalGeneration(f"generation {generation_id} is not {self.generation_id}")
        elif not transactional and not self.is_(GroupState.EMPTY):
            raise UnknownMemberId(f"a commit without a member to non-empty group {self.group_id}")
        if not transactional and self.is_(GroupState.COMPLETING_REBALANCE):
            raise RebalanceInProgress(f"group {self.group_id} is completing a rebalance")
