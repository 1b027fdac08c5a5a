"""Share groups' membership (KIP-932): ShareGroupHeartbeat, as Kafka 4.2's GroupMetadataManager
`shareGroupHeartbeat` runs it.

A member joins with epoch 0 and the topics it subscribes to, heartbeats with its epoch, leaves with
-1. Any change of membership, subscriptions or the subscribed topics' partition counts bumps the group
epoch and recomputes the target assignment with the simple assignor; there is no revocation phase in
a share group (a partition may be read by several members at once), so a member moves to the new
assignment and the group epoch in its next heartbeat. A member that does not heartbeat within
`share.session.timeout.ms` is removed.

The simple assignor (Kafka's SimpleAssignor, homogeneous case): every subscribed partition is assigned.
With at least as many partitions as members each partition goes to one member, spread evenly; with more
members than partitions each member gets one partition and partitions are shared, so every member
has work and every partition has readers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from minikafka.protocol.errors import ErrorCode

JOIN_EPOCH = 0
LEAVE_EPOCH = -1

Assignment = dict[str, frozenset[int]]


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed_topic_names: tuple[str, ...]
    assigned: Assignment = field(default_factory=dict)
    # What the member was last told; the answer carries the assignment only when it differs.
    sent: Assignment | None = None


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    # Partition counts of the subscribed topics when the assignment was computed.
    metadata: dict[str, int] = field(default_factory=dict)

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def subscribed_topics(self) -> set[str]:
        return {topic for member in self.members.values() for topic in member.subscribed_topic_names}


@dataclass(frozen=True, slots=True)
class ShareHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None
    subscribed_topic_names: tuple[str, ...] | None
    client_id: str
    client_host: str


@dataclass(frozen=True, slots=True)
class ShareHeartbeatResult:
    error: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = LEAVE_EPOCH
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


def simple_assign(members: Mapping[str, tuple[str, ...]], partitions: Mapping[str, int]) -> dict[str, Assignment]:
    """Every partition of the subscribed topics to at least one subscribed member (see the module doc)."""
    out: dict[str, Assignment] = {member: {} for member in members}
    for topic in sorted(partitions):
        readers = sorted(m for m, topics in members.items() if topic in topics)
        if not readers:
            continue
        count = partitions[topic]
        if count >= len(readers):
            pairs = [(readers[p % len(readers)], p) for p in range(count)]
        else:
            pairs = [(reader, index % count) for index, reader in enumerate(readers)]
        for reader, partition in pairs:
            out[reader][topic] = out[reader].get(topic, frozenset()) | {partition}
    return {member: assignment for member, assignment in out.items()}


class ShareGroupEngine:
    """The share groups of one coordinator, and their heartbeats."""

    def __init__(self, partition_count: Callable[[str], int | None], session_timeout_ms: Callable[[str], int],
                 heartbeat_interval_ms: Callable[[str], int], schedule_expiry: Callable[[str, str, int], None],
                 cancel_expiry: Callable[[str, str], None], on_member_left: Callable[[str, str], None],
                 on_assigned: Callable[[str, Assignment], None], max_size: int) -> None:
        self.groups: dict[str, ShareGroup] = {}
        self._partition_count = partition_count
        self._session_timeout_ms = session_timeout_ms
        self._heartbeat_interval_ms = heartbeat_interval_ms
        self._schedule_expiry = schedule_expiry
        self._cancel_expiry = cancel_expiry
        self._on_member_left = on_member_left
        self._on_assigned = on_assigned
        self._max_size = max_size

    def heartbeat(self, request: ShareHeartbeat) -> ShareHeartbeatResult:
        invalid = self._invalid(request)
        if invalid is not None:
            return ShareHeartbeatResult(ErrorCode.invalid_request, invalid)
        if request.member_epoch == LEAVE_EPOCH:
            return self._leave(request)
        group = self.groups.get(request.group_id)
        if group is None and request.member_epoch != JOIN_EPOCH:
            # Kafka's getOrMaybeCreateShareGroup creates a group only for a joining member
            return ShareHeartbeatResult(ErrorCode.group_id_not_found, f"Share group {request.group_id} not found.")
        member = group.members.get(request.member_id) if group is not None else None
        if request.member_epoch != JOIN_EPOCH:
            if member is None:
                return ShareHeartbeatResult(ErrorCode.unknown_member_id,
                                            f"member {request.member_id} is not in group {request.group_id}")
            if request.member_epoch != member.member_epoch:
                return ShareHeartbeatResult(ErrorCode.fenced_member_epoch,
                                            f"member epoch {request.member_epoch} is not {member.member_epoch}")
        if group is None:
            group = self.groups[request.group_id] = ShareGroup(request.group_id)
        if member is None:
            if len(group.members) >= self._max_size:
                return ShareHeartbeatResult(ErrorCode.group_max_size_reached,
                                            f"share group {request.group_id} has {self._max_size} members")
            member = group.members[request.member_id] = ShareMember(
                request.member_id, 0, request.client_id, request.client_host, request.rack_id,
                request.subscribed_topic_names or ())
            joined = True
        else:
            joined = False
            if request.member_epoch == JOIN_EPOCH:
                member.sent = None  # a member rejoining after losing its state is told everything again
        if self._update(member, request) or joined or self._metadata_changed(group):
            group.group_epoch += 1
        if group.assignment_epoch != group.group_epoch:
            self._assign(group)
        member.member_epoch = group.assignment_epoch
        self._schedule_expiry(group.group_id, member.member_id, self._session_timeout_ms(group.group_id))
        assignment = None
        if member.sent != member.assigned or request.member_epoch == JOIN_EPOCH:
            assignment = dict(member.assigned)
            member.sent = dict(member.assigned)
        return ShareHeartbeatResult(ErrorCode.none, None, member.member_id, member.member_epoch,
                                    self._heartbeat_interval_ms(group.group_id), assignment)

    @staticmethod
    def _invalid(request: ShareHeartbeat) -> str | None:
        """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid (blank is what Java's trim() empties)."""
        if not request.member_id.strip():
            return "MemberId can't be empty."
        if not request.group_id.strip():
            return "GroupId can't be empty."
        if request.rack_id is not None and not request.rack_id.strip():
            return "RackId can't be empty."
        if request.member_epoch == JOIN_EPOCH and not request.subscribed_topic_names:
            return "SubscribedTopicNames must be set in first request."
        if request.member_epoch < LEAVE_EPOCH:
            return "MemberEpoch is invalid."
        return None

    @staticmethod
    def _update(member: ShareMember, request: ShareHeartbeat) -> bool:
        changed = False
        if request.subscribed_topic_names is not None:
            names = tuple(sorted(set(request.subscribed_topic_names)))
            if names != tuple(sorted(set(member.subscribed_topic_names))):
                member.subscribed_topic_names = names
                changed = True
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        return changed

    def _metadata_changed(self, group: ShareGroup) -> bool:
        return self._current_metadata(group) != group.metadata

    def _current_metadata(self, group: ShareGroup) -> dict[str, int]:
        out = {}
        for topic in group.subscribed_topics():
            count = self._partition_count(topic)
            if count:
                out[topic] = count
        return out

    def _assign(self, group: ShareGroup) -> None:
        group.metadata = self._current_metadata(group)
        plan = simple_assign({m.member_id: m.subscribed_topic_names for m in group.members.values()}, group.metadata)
        for member_id, assignment in plan.items():
            group.members[member_id].assigned = assignment
        group.assignment_epoch = group.group_epoch
        everything: Assignment = {topic: frozenset(range(count)) for topic, count in group.metadata.items()}
        self._on_assigned(group.group_id, everything)

    def _leave(self, request: ShareHeartbeat) -> ShareHeartbeatResult:
        group = self.groups.get(request.group_id)
        if group is None:
            return ShareHeartbeatResult(ErrorCode.group_id_not_found, f"Group {request.group_id} not found.")
        if request.member_id not in group.members:
            return ShareHeartbeatResult(ErrorCode.unknown_member_id,
                                        f"member {request.member_id} is not in group {request.group_id}")
        self.remove_member(group.group_id, request.member_id)
        return ShareHeartbeatResult(ErrorCode.none, None, request.member_id, LEAVE_EPOCH, 0)

    def remove_member(self, group_id: str, member_id: str) -> None:
        """A member left or its session expired: the group epoch bumps and the rest are reassigned."""
        group = self.groups.get(group_id)
        if group is None or group.members.pop(member_id, None) is None:
            return
        self._cancel_expiry(group_id, member_id)
        group.group_epoch += 1
        self._assign(group)
        self._on_member_left(group_id, member_id)

    def delete(self, group_id: str) -> None:
        self.groups.pop(group_id, None)
