"""ConsumerGroupEngine: the KIP-848 consumer group protocol (ConsumerGroupHeartbeat), Kafka 4.1's shape.

Follows `GroupMetadataManager.consumerGroupHeartbeat`, `modern/consumer/ConsumerGroup(Member)` and
`CurrentAssignmentBuilder`:
- Members are identified by a member id the client generates (v1, KIP-1082) and carry a member
  epoch: 0 joins, -1 leaves, -2 is a static member (instance id) leaving temporarily: it keeps its
  partitions and epoch until its session times out, and a member rejoining with the same instance id
  (under a new member id) takes them over without a rebalance; while the instance is active, another
  member joining with its instance id is UNRELEASED_INSTANCE_ID.
- The group epoch is bumped whenever membership, a subscription, or the partition count of a
  subscribed topic changes; the target assignment (computed by the server-side assignor, uniform by
  default, or range) then catches up and carries that epoch (the assignment epoch).
- Each member reconciles towards its target: partitions it must give up are revoked first and the
  member keeps its epoch until its heartbeat no longer lists them as owned; a partition is handed to
  its new owner only once no other member holds it (assigned or pending revocation).
- Epoch checks as `throwIfMemberEpochIsInvalid`: a newer epoch than ours, or an older one that is not
  the member's previous epoch with owned partitions inside its assignment, is FENCED_MEMBER_EPOCH.
- Session timeout (`group.consumer.session.timeout.ms`, or the group's dynamic
  `consumer.session.timeout.ms`; likewise the heartbeat interval) and the revocation timeout (the
  member's rebalance timeout) run on the coordinator's timers, so the one clock (manual in tests) drives them.

Persistence: after each change the engine calls GroupMetadataManager.store_consumer_group, which
appends Kafka's ConsumerGroup* records for what changed (consumer_records.py); the groups are replayed
from them at load, so members go on with their ids and epochs after a restart.

Classic members (KIP-848's migration path, Kafka 4.1): a member that speaks the classic protocol
(JoinGroup/SyncGroup/Heartbeat) inside a consumer group is a ConsumerMember carrying
ClassicMemberMetadata (its session timeout and JoinGroup protocols); migration.py drives it and the
conversions of non-empty groups between the two protocols, through the `upgrade`/`downgrade` hooks
this engine calls: a first consumer-protocol member of a classic group upgrades it, the last one
leaving (or fenced) downgrades the group back to classic when the others are all classic members.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from minikafka.coordinator.errors import (
    IllegalGeneration,
    NonEmptyGroup,
    StaleMemberEpoch,
    UnknownMemberId,
    UnsupportedVersion,
)
from minikafka.coordinator.group.metadata import GroupMetadataManager
from minikafka.coordinator.ports import LogManager
from minikafka.protocol.errors import ErrorCode

_log = logging.getLogger("minikafka.coordinator.group")

Assignment = dict[str, frozenset[int]]  # topic name -> partitions
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
UNIFORM = "uniform"
RANGE = "range"


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """What a member that joined with the classic protocol keeps (Kafka's ClassicMemberMetadata)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata) as in its last JoinGroup

    def protocol_name(self) -> str:
        """The protocol the member is answered with: the first it listed, as Kafka does."""
        return self.protocols[0][0] if self.protocols else ""


class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300000
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    left_static: bool = False  # a static member that sent epoch -2 and may come back
    classic: ClassicMemberMetadata | None = None  # set for a member using the classic protocol
    # The member's regex is new to the group and not resolved yet (Kafka resolves it in a task of its
    # own after the heartbeat): until then it brings the member no topic.
    regex_pending: bool = False

    def subscribes_to(self, topic: str) -> bool:
        if topic in self.subscribed_topic_names:
            return True
        return (self.subscribed_topic_regex is not None and not self.regex_pending
                and _regex_matches(self.subscribed_topic_regex, topic))


def _regex_matches(pattern: str, topic: str) -> bool:
    try:
        return re.fullmatch(pattern, topic) is not None
    except re.error:
        return False


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Assignment] = field(default_factory=dict)  # member id -> target assignment
    # The partition counts of the subscribed topics the target was computed from (Kafka's
    # subscription metadata): a change bumps the group epoch.
    subscribed_metadata: dict[str, int] = field(default_factory=dict)

    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values() if not m.left_static):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def classic_members(self) -> list[ConsumerMember]:
        return [m for m in self.members.values() if m.classic is not None]

    def all_classic_except(self, member_ids: Iterable[str]) -> bool:
        """Kafka's allMembersUseClassicProtocolExcept: the others all use the classic protocol and
        the excluded ones do not."""
        excluded = set(member_ids)
        return all((m.classic is None) == (m.member_id in excluded) for m in self.members.values())

    def supports_classic_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        """Kafka's ConsumerGroup.supportsClassicProtocols: protocol type "consumer" and, once there
        are classic members, one of the names is supported by every one of them."""
        names = set(names)
        if protocol_type != "consumer" or not names:
            return False
        for member in self.classic_members():
            assert member.classic is not None
            names &= {name for name, _ in member.classic.protocols}
        return bool(names)

    def waiting_on_unreleased_partition(self, member: ConsumerMember) -> bool:
        """Kafka's waitingOnUnreleasedPartition: a target partition the member lacks is still held."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        for topic, parts in self.target.get(member.member_id, {}).items():
            for p in parts - member.assigned.get(topic, frozenset()):
                if self.owner_epoch(topic, p, member.member_id) != -1:
                    return True
        return False

    def owner_epoch(self, topic: str, partition: int, excluding: str) -> int:
        """The epoch of the member (other than `excluding`) that holds the partition, -1 if none:
        a partition pending revocation is still held by its previous owner."""
        for member in self.members.values():
            if member.member_id == excluding:
                continue
            if partition in member.assigned.get(topic, ()) or partition in member.pending_revocation.get(topic, ()):
                return member.member_epoch
        return -1

    def validate_offset_commit(self, member_id: str, member_epoch: int, *, transactional: bool,
                               api_version: int) -> None:
        """Kafka's ConsumerGroup.validateOffsetCommit: -1 with no members is a simple commit."""
        if member_epoch < 0 and not self.members:
            return
        member = self.members.get(member_id)
        if member is None:
            raise UnknownMemberId(f"member {member_id} is not in consumer group {self.group_id}")
        if not transactional and member.classic is None and api_version < 9:
            raise UnsupportedVersion(f"consumer member {member_id} commits with OffsetCommit v{api_version}")
        _epoch_check(member, member_epoch)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        """Kafka's ConsumerGroup.validateOffsetFetch: without a member (admin, v<9) anything goes."""
        if member_epoch < 0 and not member_id:
            return
        member = self.members.get(member_id or "")
        if member is None:
            raise UnknownMemberId(f"member {member_id} is not in consumer group {self.group_id}")
        _epoch_check(member, member_epoch)


def _epoch_check(member: ConsumerMember, member_epoch: int) -> None:
    """Kafka's ConsumerGroup.validateMemberEpoch: a classic member's generation is its epoch, and a
    mismatch is ILLEGAL_GENERATION for it (what a classic client understands)."""
    if member_epoch == member.member_epoch:
        return
    message = f"epoch {member_epoch} of member {member.member_id} is not {member.member_epoch}"
    raise IllegalGeneration(message) if member.classic is not None else StaleMemberEpoch(message)


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None  # None: unchanged since the last heartbeat
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None  # None: no assignment in the answer


# -- assignors -----------------------------------------------------------------------------------


def uniform_assign(members: dict[str, ConsumerMember], partitions: dict[str, int],
                   previous: dict[str, Assignment]) -> dict[str, Assignment]:
    """Kafka's UniformAssignor: when every member subscribes to the same topics, its homogeneous
    builder (below); otherwise balanced (counts differ by at most one among the members a partition
    could go to) and sticky (a partition stays with its previous target owner when that keeps the
    balance)."""
    subscribed = {m: frozenset(t for t in partitions if member.subscribes_to(t)) for m, member in members.items()}
    if members and len(set(subscribed.values())) == 1:
        return _uniform_homogeneous(list(members), sorted(next(iter(subscribed.values()))), partitions, previous)
    return _uniform_heterogeneous(members, partitions, previous)


def _uniform_homogeneous(ids: list[str], topics: list[str], partitions: dict[str, int],
                         previous: dict[str, Assignment]) -> dict[str, Assignment]:
    """Kafka's UniformHomogeneousAssignmentBuilder: each member keeps its previous partitions up to
    its quota (the lowest-numbered first), the first members in turn get the one extra partition the
    division leaves, and the partitions nobody keeps go, in order, to the members below quota."""
    total = sum(partitions[t] for t in topics)
    quota, extra = divmod(total, len(ids))
    kept: dict[str, dict[str, set[int]]] = {}
    taken: set[tuple[str, int]] = set()
    released: list[tuple[str, int]] = []
    room: list[tuple[str, int]] = []
    for member_id in ids:
        member_quota = quota + (1 if extra > 0 else 0)
        extra -= 1 if extra > 0 else 0
        mine: dict[str, set[int]] = {}
        for topic in sorted(previous.get(member_id, {})):
            if topic not in topics:
                continue
            for p in sorted(p for p in previous[member_id][topic] if p < partitions[topic]):
                if (topic, p) in taken:
                    continue
                taken.add((topic, p))
                if member_quota > 0:
                    mine.setdefault(topic, set()).add(p)
                    member_quota -= 1
                else:
                    released.append((topic, p))
        kept[member_id] = mine
        if member_quota > 0:
            room.append((member_id, member_quota))
    free = [(t, p) for t in topics for p in range(partitions[t]) if (t, p) not in taken] + released
    for member_id, member_room in room:
        for topic, p in free[:member_room]:
            kept[member_id].setdefault(topic, set()).add(p)
        free = free[member_room:]
    return {m: {t: frozenset(ps) for t, ps in assigned.items()} for m, assigned in kept.items()}


def _uniform_heterogeneous(members: dict[str, ConsumerMember], partitions: dict[str, int],
                           previous: dict[str, Assignment]) -> dict[str, Assignment]:
    ids = sorted(members)
    eligible = {topic: [m for m in ids if members[m].subscribes_to(topic)] for topic in partitions}
    all_partitions = [(t, p) for t in sorted(partitions) for p in range(partitions[t]) if eligible[t]]
    owner: dict[tuple[str, int], str] = {}
    load = dict.fromkeys(ids, 0)
    for member_id in ids:
        for topic, parts in previous.get(member_id, {}).items():
            if member_id not in eligible.get(topic, ()):
                continue
            for p in sorted(parts):
                if p < partitions[topic] and (topic, p) not in owner:
                    owner[(topic, p)] = member_id
                    load[member_id] += 1
    for tp in all_partitions:
        if tp not in owner:
            chosen = min(eligible[tp[0]], key=lambda m: (load[m], m))
            owner[tp] = chosen
            load[chosen] += 1
    # Move partitions off overloaded members until balanced; each pass either moves one or stops.
    for _ in range(len(all_partitions) + 1):
        moved = False
        for tp in all_partitions:
            current = owner[tp]
            lightest = min(eligible[tp[0]], key=lambda m: (load[m], m))
            if load[current] > load[lightest] + 1:
                owner[tp] = lightest
                load[current] -= 1
                load[lightest] += 1
                moved = True
        if not moved:
            break
    return _by_member(ids, owner)


def range_assign(members: dict[str, ConsumerMember], partitions: dict[str, int],
                 previous: dict[str, Assignment]) -> dict[str, Assignment]:
    """Kafka's RangeAssignor: per topic, contiguous ranges over the subscribed members in id order."""
    del previous
    ids = sorted(members)
    owner: dict[tuple[str, int], str] = {}
    for topic in sorted(partitions):
        subscribers = [m for m in ids if members[m].subscribes_to(topic)]
        if not subscribers:
            continue
        quota, extra = divmod(partitions[topic], len(subscribers))
        start = 0
        for index, member_id in enumerate(subscribers):
            count = quota + (1 if index < extra else 0)
            for p in range(start, start + count):
                owner[(topic, p)] = member_id
            start += count
    return _by_member(ids, owner)


def _by_member(ids: list[str], owner: dict[tuple[str, int], str]) -> dict[str, Assignment]:
    out: dict[str, dict[str, set[int]]] = {m: {} for m in ids}
    for (topic, p), member_id in owner.items():
        out[member_id].setdefault(topic, set()).add(p)
    return {m: {t: frozenset(ps) for t, ps in topics.items()} for m, topics in out.items()}


ASSIGNORS: dict[str, Callable[[dict[str, ConsumerMember], dict[str, int], dict[str, Assignment]],
                              dict[str, Assignment]]] = {UNIFORM: uniform_assign, RANGE: range_assign}


def _minus(a: Assignment, b: Assignment) -> Assignment:
    out = {t: ps - b.get(t, frozenset()) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


def _intersect(a: Assignment, b: Assignment) -> Assignment:
    out = {t: ps & b.get(t, frozenset()) for t, ps in a.items()}
    return {t: ps for t, ps in out.items() if ps}


def _union(a: Assignment, b: Assignment) -> Assignment:
    out = dict(a)
    for t, ps in b.items():
        out[t] = out.get(t, frozenset()) | ps
    return {t: ps for t, ps in out.items() if ps}


def _is_subset(a: Assignment, b: Assignment) -> bool:
    return all(ps <= b.get(t, frozenset()) for t, ps in a.items())


# -- the engine ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    assignors: tuple[str, ...] = (UNIFORM, RANGE)  # the first is the default


class ConsumerGroupEngine:
    def __init__(self, manager: GroupMetadataManager, logs: LogManager,
                 config: ConsumerGroupConfig | None = None) -> None:
        self._manager = manager
        self._logs = logs
        self.config = config or ConsumerGroupConfig()
        self.groups: dict[str, ConsumerGroup] = {}
        # The group's dynamic GROUP configs (IncrementalAlterConfigs, validated against the broker's
        # group.consumer.min/max.* bounds when set); Kafka's GroupConfigManager, read on every use.
        self.group_overrides: Callable[[str], Mapping[str, str]] = lambda _group_id: {}
        # migration.py's conversions: `upgrade` turns a non-empty classic group into a consumer group
        # (or says why not, Kafka's GROUP_ID_NOT_FOUND message); `downgrade` converts the group to a
        # classic one instead of removing the given members, and says whether it did.
        self.upgrade: Callable[[str], ConsumerGroup | str] | None = None
        self.downgrade: Callable[[ConsumerGroup, list[str]], bool] | None = None

    def session_timeout_ms(self, group_id: str) -> int:
        return self._override(group_id, "consumer.session.timeout.ms", self.config.session_timeout_ms)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._override(group_id, "consumer.heartbeat.interval.ms", self.config.heartbeat_interval_ms)

    def _override(self, group_id: str, key: str, default: int) -> int:
        raw = self.group_overrides(group_id).get(key)
        try:
            return default if raw is None else int(raw)
        except ValueError:  # the store validates on write; a hand-edited file must not break heartbeats
            return default

    # -- topic metadata ------------------------------------------------------------------------

    def topic_id(self, name: str) -> uuid.UUID | None:
        meta = self._logs.topic(name)
        return None if meta is None else meta.topic_id

    def topic_name(self, topic_id: uuid.UUID | None) -> str | None:
        meta = self._logs.topic_by_id(topic_id)
        return None if meta is None else meta.name

    def _subscribed_metadata(self, group: ConsumerGroup) -> dict[str, int]:
        out = {}
        for meta in self._logs.topics():
            if getattr(meta, "internal", False) and not any(
                meta.name in m.subscribed_topic_names for m in group.members.values()
            ):
                continue
            if any(m.subscribes_to(meta.name) for m in group.members.values()):
                out[meta.name] = meta.partitions
        return out

    # -- heartbeat -----------------------------------------------------------------------------

    def heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        error = self._validate(request)
        if error is not None:
            return HeartbeatResult(ErrorCode.invalid_request, error)
        if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(request)
        group = self.groups.get(request.group_id)
        if group is None:
            if request.member_epoch != 0:
                # Kafka 4.x: UnknownMemberIdException, so that a client rejoins (e.g. after a restart).
                return HeartbeatResult(ErrorCode.unknown_member_id, f"Group {request.group_id} not found.")
            classic = self._manager.groups.get(request.group_id)
            if classic is not None and classic.members:
                converted = self.upgrade(request.group_id) if self.upgrade is not None \
                    else f"Group {request.group_id} is not a consumer group"
                if isinstance(converted, str):
                    return HeartbeatResult(ErrorCode.group_id_not_found, converted)
                group = converted
            else:
                # An empty classic group (e.g. one that only holds offsets) becomes this consumer group;
                # its committed offsets stay.
                self._manager.groups.pop(request.group_id, None)
                group = self.groups[request.group_id] = ConsumerGroup(request.group_id)
        member = group.members.get(request.member_id)
        bump_group_epoch = request.member_epoch == 0
        static = self._static_member(group, request)
        if isinstance(static, HeartbeatResult):
            return static
        if static is not None:
            member, bump_group_epoch = static, False
        elif request.member_epoch == 0:
            if member is not None:
                # Rejoining with epoch 0: the member starts over (its partitions go back to the group).
                self._remove_member(group, member.member_id)
            member = ConsumerMember(request.member_id)
            group.members[member.member_id] = member
        elif member is None:
            return HeartbeatResult(ErrorCode.unknown_member_id,
                                   f"Member {request.member_id} is not a member of group {request.group_id}.")
        elif member.classic is not None:
            return HeartbeatResult(ErrorCode.unknown_member_id,
                                   f"Member {member.member_id} uses the classic protocol.")
        else:
            fenced = "The static member left the group temporarily." if member.left_static \
                else self._epoch_error(member, request)
            if fenced is not None:
                return HeartbeatResult(ErrorCode.fenced_member_epoch, fenced)
        before = (member.member_epoch, dict(member.assigned), dict(member.pending_revocation))
        old_regex = member.subscribed_topic_regex
        bump_group_epoch |= self.update_member(member, request)
        bump_group_epoch |= self._update_regex(group, member, old_regex)
        if member.instance_id is not None:
            group.static_members[member.instance_id] = member.member_id
        self.update_and_reconcile(group, member, bump_group_epoch, request.owned)
        self.schedule_session(group, member)
        self._manager.store_consumer_group(group)
        changed = before != (member.member_epoch, member.assigned, member.pending_revocation)
        send_assignment = (
            request.member_epoch == 0 or changed
            or (request.owned is not None and request.owned != member.assigned)
        )
        return HeartbeatResult(ErrorCode.none, None, member.member_id, member.member_epoch,
                               self.heartbeat_interval_ms(group.group_id),
                               dict(member.assigned) if send_assignment else None)

    def update_and_reconcile(self, group: ConsumerGroup, member: ConsumerMember, bump_group_epoch: bool,
                             owned: Assignment | None) -> None:
        """After a member changed: the group epoch is bumped (if asked, or if the subscribed topics
        changed), the target assignment catches up, and the member reconciles towards it."""
        self._update_target(group, bump_group_epoch)
        self._reconcile(group, member, owned)

    def _update_target(self, group: ConsumerGroup, bump_group_epoch: bool) -> None:
        metadata = self._subscribed_metadata(group)
        if metadata != group.subscribed_metadata:
            group.subscribed_metadata = metadata
            bump_group_epoch = True
        if bump_group_epoch:
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            self._compute_target(group)

    def _update_regex(self, group: ConsumerGroup, member: ConsumerMember, old_regex: str | None) -> bool:
        """Kafka's maybeUpdateRegularExpressions, True if the group epoch is to be bumped: a regex the
        group already resolved counts at once (as does a regex dropped); a regex no other member
        subscribes to is resolved after this heartbeat has been answered, so this answer assigns the
        member only its named topics; a regex another member brought and that is still unresolved
        waits for that resolution."""
        regex = member.subscribed_topic_regex
        if regex == old_regex:
            return False
        others = [m for m in group.members.values() if m is not member and m.subscribed_topic_regex == regex]
        member.regex_pending = regex is not None and (not others or others[0].regex_pending)
        if regex is None or not member.regex_pending:
            return True
        if not others:
            group_id = group.group_id
            self._manager.timers.schedule(("consumer-regex", group_id, regex), self._manager.now(),
                                          lambda: self._on_regex_resolved(group_id, regex))
        return False

    def _on_regex_resolved(self, group_id: str, regex: str) -> None:
        """Kafka's handleRegularExpressionsResult: the resolution bumps the group epoch, so the
        members get the regex's topics with their next heartbeat."""
        group = self.groups.get(group_id)
        if group is None:
            return
        waiting = [m for m in group.members.values() if m.regex_pending and m.subscribed_topic_regex == regex]
        if not waiting:
            return
        for m in waiting:
            m.regex_pending = False
        self._update_target(group, True)
        self._manager.store_consumer_group(group)

    def _static_member(self, group: ConsumerGroup,
                       request: HeartbeatRequest) -> ConsumerMember | HeartbeatResult | None:
        """A static member joining under its instance id: it takes over the partitions and epoch of
        the instance's member if that one left temporarily (epoch -2); an active instance cannot be
        joined twice. None when this is not a static rejoin."""
        if request.member_epoch != 0 or request.instance_id is None:
            return None
        old_id = group.static_members.get(request.instance_id)
        old = group.members.get(old_id) if old_id is not None else None
        if old is None:
            return None
        if not old.left_static:
            if old_id == request.member_id:
                return None
            return HeartbeatResult(ErrorCode.unreleased_instance_id,
                                   f"Static member {old_id} with instance id {request.instance_id} is "
                                   f"present in the consumer group {group.group_id}.")
        del group.members[old.member_id]
        self._manager.timers.cancel(("consumer-session", group.group_id, old.member_id))
        self._manager.timers.cancel(("consumer-revocation", group.group_id, old.member_id))
        target = group.target.pop(old.member_id, {})
        old.member_id, old.left_static = request.member_id, False
        group.members[old.member_id] = old
        group.target[old.member_id] = target
        group.static_members[request.instance_id] = old.member_id
        return old

    def _validate(self, request: HeartbeatRequest) -> str | None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid (v1: the client's member id)."""
        if not request.group_id:
            return "GroupId can't be empty."
        if not request.member_id:
            return "MemberId can't be empty."
        if request.member_epoch == 0:
            if request.rebalance_timeout_ms == -1:
                return "RebalanceTimeoutMs must be provided in first request."
            if request.owned is None or any(request.owned.values()):
                return "TopicPartitions must be empty when (re-)joining."
            if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
                return "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
        elif request.member_epoch == STATIC_LEAVE_EPOCH and request.instance_id is None:
            return "InstanceId can't be null."
        elif request.member_epoch < STATIC_LEAVE_EPOCH:
            return "MemberEpoch is invalid."
        if request.server_assignor is not None and request.server_assignor not in self.config.assignors:
            return f"ServerAssignor {request.server_assignor} is not supported. Supported assignors: " + ", ".join(
                self.config.assignors) + "."
        if request.subscribed_topic_regex is not None:
            try:
                re.compile(request.subscribed_topic_regex)
            except re.error as exc:
                return f"SubscribedTopicRegex {request.subscribed_topic_regex} is not a valid regular expression: {exc}"
        return None

    @staticmethod
    def _epoch_error(member: ConsumerMember, request: HeartbeatRequest) -> str | None:
        """Kafka's throwIfMemberEpochIsInvalid."""
        received = request.member_epoch
        if received > member.member_epoch:
            return f"The consumer group member has a greater member epoch ({received}) than the one known " \
                   f"by the group coordinator ({member.member_epoch}). The member must abandon all its " \
                   f"partitions and rejoin."
        # An older epoch is accepted only as the member's previous one (it may have missed our answer
        # that bumped it), and only if what it owns is still within its assignment.
        if received < member.member_epoch and (
            received != member.previous_member_epoch or request.owned is None
            or not _is_subset(request.owned, member.assigned)
        ):
                return f"The consumer group member has a smaller member epoch ({received}) than the one known " \
                   f"by the group coordinator ({member.member_epoch}). The member must abandon all its " \
                   f"partitions and rejoin."
        return None

    @staticmethod
    def update_member(member: ConsumerMember, request: HeartbeatRequest) -> bool:
        """Apply the fields the heartbeat carries; True if the topic names (or assignor) changed. A
        changed regex is weighed by _update_regex."""
        bump = False
        if request.instance_id is not None:
            member.instance_id = request.instance_id
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.client_id = request.client_id
        member.client_host = request.client_host
        if request.subscribed_topic_names is not None:
            names = tuple(sorted(set(request.subscribed_topic_names)))
            bump |= names != member.subscribed_topic_names
            member.subscribed_topic_names = names
        if request.subscribed_topic_regex is not None:
            member.subscribed_topic_regex = request.subscribed_topic_regex or None
        if request.server_assignor is not None:
            bump |= request.server_assignor != member.server_assignor
            member.server_assignor = request.server_assignor
        return bump

    def assignor_name(self, group: ConsumerGroup) -> str:
        """The assignor most members asked for, else the configured default (Kafka's
        ConsumerGroup.preferredServerAssignor)."""
        asked = [m.server_assignor for m in group.members.values() if m.server_assignor]
        if not asked:
            return self.config.assignors[0]
        return max(sorted(set(asked)), key=asked.count)

    def _compute_target(self, group: ConsumerGroup) -> None:
        assign = ASSIGNORS[self.assignor_name(group)]
        group.target = assign(group.members, group.subscribed_metadata, group.target)
        group.assignment_epoch = group.group_epoch

    # -- reconciliation (Kafka's CurrentAssignmentBuilder) --------------------------------------

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember, owned: Assignment | None) -> None:
        target = group.target.get(member.member_id, {})
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if owned is None or _intersect(member.pending_revocation, owned):
                return  # still waiting for the member to give the partitions up
            member.pending_revocation = {}
            self._timers_cancel_revocation(group, member)
        elif member.state is MemberState.STABLE and member.member_epoch == group.assignment_epoch:
            return
        kept = _intersect(member.assigned, target)
        revoke = _minus(member.assigned, target)
        pending: dict[str, set[int]] = {}
        unreleased = False
        for topic, parts in _minus(target, kept).items():
            for p in parts:
                if group.owner_epoch(topic, p, member.member_id) == -1:
                    pending.setdefault(topic, set()).add(p)
                else:
                    unreleased = True
        newly = {t: frozenset(ps) for t, ps in pending.items()}
        if revoke and (owned is None or _intersect(revoke, owned)):
            member.assigned = kept
            member.pending_revocation = revoke
            member.state = MemberState.UNREVOKED_PARTITIONS
            self._schedule_revocation(group, member)
            return
        member.assigned = _union(kept, newly)
        member.pending_revocation = {}
        if member.member_epoch != group.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = group.assignment_epoch
        member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE

    # -- leaving and timeouts ------------------------------------------------------------------

    def _leave(self, request: HeartbeatRequest) -> HeartbeatResult:
        group = self.groups.get(request.group_id)
        if group is None:
            return HeartbeatResult(ErrorCode.unknown_member_id, f"Group {request.group_id} not found.")
        member = group.members.get(request.member_id)
        if member is None:
            return HeartbeatResult(ErrorCode.unknown_member_id,
                                   f"Member {request.member_id} is not a member of group {request.group_id}.")
        if member.classic is not None:
            return HeartbeatResult(ErrorCode.unknown_member_id,
                                   f"Member {member.member_id} uses the classic protocol.")
        if request.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            # Kept, partitions and all, until the session times out or the instance rejoins.
            member.left_static = True
            self.schedule_session(group, member)
            self._manager.store_consumer_group(group)
            return HeartbeatResult(ErrorCode.none, None, request.member_id, STATIC_LEAVE_EPOCH, 0, None)
        self.remove_members(group, [member.member_id])
        return HeartbeatResult(ErrorCode.none, None, request.member_id, request.member_epoch, 0, None)

    def remove_members(self, group: ConsumerGroup, member_ids: list[str]) -> None:
        """Kafka's consumerGroupFenceMembers: the members go and the group rebalances, unless they were
        the last consumer-protocol members among classic ones and the group goes back to classic."""
        if self.downgrade is not None and self.downgrade(group, member_ids):
            return
        for member_id in member_ids:
            self._remove_member(group, member_id)
        group.group_epoch += 1
        self._compute_target(group)
        self._manager.store_consumer_group(group)

    def _remove_member(self, group: ConsumerGroup, member_id: str) -> None:
        member = group.members.pop(member_id, None)
        if member is not None and member.instance_id is not None \
                and group.static_members.get(member.instance_id) == member_id:
            del group.static_members[member.instance_id]
        group.target.pop(member_id, None)
        self.cancel_timers(group.group_id, member_id)

    def cancel_timers(self, group_id: str, member_id: str) -> None:
        for kind in ("consumer-session", "consumer-revocation", "consumer-join", "consumer-sync"):
            self._manager.timers.cancel((kind, group_id, member_id))

    def _fence(self, group_id: str, member_id: str, why: str) -> None:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return
        _log.info("member %s of consumer group %s fenced: %s", member_id, group_id, why)
        self.remove_members(group, [member_id])

    def schedule_fence(self, kind: str, group: ConsumerGroup, member: ConsumerMember, timeout_ms: int, *,
                       if_absent: bool = False) -> None:
        """A timer fencing the member unless cancelled first (a classic member's join and sync
        timeouts: it must rejoin, or sync after its join, within its rebalance timeout)."""
        key = (kind, group.group_id, member.member_id)
        if if_absent and self._manager.timers.deadline(key) is not None:
            return
        group_id, member_id = group.group_id, member.member_id
        self._manager.timers.schedule(key, self._manager.now() + timeout_ms,
                                      lambda: self._fence(group_id, member_id, f"{kind} timeout"))

    def on_loaded(self) -> None:
        """After the groups were replayed from `__consumer_offsets` (Kafka's onLoaded): the subscribed
        topics' partition counts are read again, every member's session starts over, and a member
        still revoking gets its rebalance timeout again."""
        for group in self.groups.values():
            group.subscribed_metadata = self._subscribed_metadata(group)
            for member in group.members.values():
                self.schedule_session(group, member)
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_revocation(group, member)

    def schedule_session(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """The member's session starts again: the group's timeout, a classic member's own."""
        group_id, member_id = group.group_id, member.member_id
        timeout = member.classic.session_timeout_ms if member.classic is not None \
            else self.session_timeout_ms(group_id)
        self._manager.timers.schedule(("consumer-session", group_id, member_id),
                                      self._manager.now() + timeout,
                                      lambda: self._fence(group_id, member_id, "session timeout"))

    def _schedule_revocation(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        group_id, member_id = group.group_id, member.member_id
        self._manager.timers.schedule(("consumer-revocation", group_id, member_id),
                                      self._manager.now() + member.rebalance_timeout_ms,
                                      lambda: self._fence(group_id, member_id, "revocation timeout"))

    def _timers_cancel_revocation(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        self._manager.timers.cancel(("consumer-revocation", group.group_id, member.member_id))

    # -- admin ---------------------------------------------------------------------------------

    def is_consumer_group(self, group_id: str) -> bool:
        return group_id in self.groups

    def delete(self, group_id: str) -> bool:
        """Whether `group_id` was a consumer group, now deleted; a group with members is not."""
        group = self.groups.get(group_id)
        if group is None:
            return False
        if group.members:
            raise NonEmptyGroup(f"consumer group {group_id} has members")
        del self.groups[group_id]
        return True
