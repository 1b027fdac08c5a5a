"""The KIP-848 consumer protocol engine through GroupCoordinator: epochs, reconciliation, timeouts,
assignors, offset checks (in-memory log, fake clock; timers driven by run_due)."""

from __future__ import annotations

import uuid
from dataclasses import replace

from minikafka.coordinator.group import GroupConfig, GroupCoordinator, JoinGroupRequest, OffsetCommit
from minikafka.coordinator.group.consumer import (
    ConsumerGroupState,
    ConsumerMember,
    HeartbeatRequest,
    HeartbeatResult,
    range_assign,
    uniform_assign,
)
from minikafka.protocol.errors import ErrorCode

from .fakes import FakeClock, FakeLogManager, FakePartitionLog, _Meta
from .outcomes import codes, partition_codes, raised

E = ErrorCode
GROUP = "g"
SESSION_MS = 45000
REBALANCE_MS = 300000


class TopicLogs(FakeLogManager):
    """FakeLogManager with topic ids and the `topics()` listing the consumer engine reads."""

    def __init__(self) -> None:
        self.logs: dict[tuple[str, int], FakePartitionLog] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self._metas: dict[str, _Meta] = {}

    def create_topic(
        self, name: str, partitions: int, configs: dict[str, str] | None = None, internal: bool = False
    ) -> _Meta:
        meta = self._metas[name] = _Meta(name, partitions, internal)
        meta.topic_id = uuid.uuid4()  # type: ignore[attr-defined]
        self.configs[name] = dict(configs or {})
        for p in range(partitions):
            self.logs[(name, p)] = FakePartitionLog()
        return meta

    def topic(self, name: str) -> _Meta | None:
        return self._metas.get(name)

    def topic_by_id(self, topic_id: uuid.UUID | None) -> _Meta | None:
        return next((m for m in self._metas.values() if m.topic_id == topic_id), None)  # type: ignore[attr-defined]

    def topics(self) -> list[_Meta]:
        return list(self._metas.values())


def make(partitions: int = 6) -> tuple[GroupCoordinator, TopicLogs, FakeClock]:
    logs, clock = TopicLogs(), FakeClock()
    logs.create_topic("t", partitions)
    coordinator = GroupCoordinator(logs, clock, GroupConfig(offsets_topic_num_partitions=3))
    coordinator.load()
    return coordinator, logs, clock


def join(c: GroupCoordinator, member_id: str, topics: tuple[str, ...] = ("t",), **extra: object) -> HeartbeatResult:
    request = HeartbeatRequest(GROUP, member_id, 0, rebalance_timeout_ms=REBALANCE_MS,
                               subscribed_topic_names=topics, owned={})
    return c.consumer_group_heartbeat(replace(request, **extra))  # type: ignore[arg-type]


def beat(c: GroupCoordinator, member_id: str, epoch: int,
         owned: dict[str, frozenset[int]] | None = None) -> HeartbeatResult:
    return c.consumer_group_heartbeat(HeartbeatRequest(GROUP, member_id, epoch, owned=owned))


def count(assignment: dict[str, frozenset[int]] | None) -> int:
    return sum(len(parts) for parts in (assignment or {}).values())


def test_first_member_gets_every_partition_at_epoch_1() -> None:
    c, _, _ = make()
    result = join(c, "a")
    assert (result.error, result.member_id, result.member_epoch) == (E.none, "a", 1)
    assert result.heartbeat_interval_ms == 5000
    assert result.assignment == {"t": frozenset(range(6))}
    group = c.consumer_group(GROUP)
    assert group is not None and group.state() is ConsumerGroupState.STABLE
    assert (group.group_epoch, group.assignment_epoch) == (1, 1)
    # A heartbeat with nothing new carries no assignment.
    again = beat(c, "a", 1)
    assert (again.error, again.member_epoch, again.assignment) == (E.none, 1, None)


def test_revocation_before_reassignment() -> None:
    c, _, _ = make()
    join(c, "a")
    b = join(c, "b")
    # b is at the new epoch but gets nothing a still holds.
    assert (b.error, b.member_epoch, count(b.assignment)) == (E.none, 2, 0)
    group = c.consumer_group(GROUP)
    assert group is not None and group.state() is ConsumerGroupState.RECONCILING
    # a is told to keep 3 partitions and stays at epoch 1 until it gives the other 3 up.
    a = beat(c, "a", 1, owned={"t": frozenset(range(6))})
    assert (a.member_epoch, count(a.assignment)) == (1, 3)
    kept = a.assignment
    assert kept is not None
    # While a still owns them, b gets none of them.
    assert count(beat(c, "b", 2, owned={}).assignment) == 0
    # a acknowledges: it moves to epoch 2; then b receives the released partitions.
    a2 = beat(c, "a", 1, owned=kept)
    assert (a2.error, a2.member_epoch) == (E.none, 2)
    b2 = beat(c, "b", 2, owned={})
    assert (b2.member_epoch, count(b2.assignment)) == (2, 3)
    assert b2.assignment is not None and not (b2.assignment["t"] & kept["t"])
    beat(c, "b", 2, owned=b2.assignment)
    assert group.state() is ConsumerGroupState.STABLE


def test_epoch_fencing_and_unknown_members() -> None:
    c, _, _ = make()
    join(c, "a")
    assert beat(c, "a", 5).error is E.fenced_member_epoch
    assert beat(c, "nobody", 1).error is E.unknown_member_id
    unknown_group = c.consumer_group_heartbeat(HeartbeatRequest("other", "a", 3, owned=None))
    assert unknown_group.error is E.unknown_member_id
    # Move a to epoch 2 (b joins, a revokes, a acknowledges).
    join(c, "b")
    kept = beat(c, "a", 1, owned={"t": frozenset(range(6))}).assignment
    assert beat(c, "a", 1, owned=kept).member_epoch == 2
    # The previous epoch is accepted when what it owns is within its assignment, not otherwise.
    assert beat(c, "a", 1, owned=kept).error is E.none
    assert beat(c, "a", 1, owned={"t": frozenset(range(6))}).error is E.fenced_member_epoch
    assert beat(c, "a", 1, owned=None).error is E.fenced_member_epoch


def test_leave_hands_partitions_back() -> None:
    c, _, _ = make()
    join(c, "a")
    join(c, "b")
    kept = beat(c, "a", 1, owned={"t": frozenset(range(6))}).assignment
    beat(c, "a", 1, owned=kept)
    b = beat(c, "b", 2, owned={})
    beat(c, "b", 2, owned=b.assignment)
    left = beat(c, "b", -1)
    assert (left.error, left.member_epoch) == (E.none, -1)
    a = beat(c, "a", 2, owned=kept)
    assert (a.member_epoch, a.assignment) == (3, {"t": frozenset(range(6))})
    assert beat(c, "b", 2).error is E.unknown_member_id


def test_session_timeout_removes_a_silent_member() -> None:
    c, _, clock = make()
    join(c, "a")
    join(c, "b")
    clock.now += SESSION_MS - 1
    beat(c, "a", 1, owned={"t": frozenset(range(6))})  # a stays alive; b says nothing
    clock.now += 1
    c.timers.run_due(clock.now)
    group = c.consumer_group(GROUP)
    assert group is not None and set(group.members) == {"a"}
    result = beat(c, "a", 1, owned={"t": frozenset(range(6))})
    assert result.error is E.none and count(group.target["a"]) == 6


def test_dynamic_group_configs_set_heartbeat_interval_and_session_timeout() -> None:
    c, _, clock = make()
    overrides: dict[str, dict[str, str]] = {}
    c.use_group_configs(lambda group_id: overrides.get(group_id, {}))
    assert join(c, "a").heartbeat_interval_ms == 5000
    overrides[GROUP] = {"consumer.heartbeat.interval.ms": "7000", "consumer.session.timeout.ms": "50000"}
    # Read on every heartbeat, as Kafka's GroupConfigManager: no rejoin needed.
    assert beat(c, "a", 1).heartbeat_interval_ms == 7000
    join(c, "b")  # b's session: 50 s from now
    other = c.consumer_group_heartbeat(HeartbeatRequest("other", "x", 0, rebalance_timeout_ms=REBALANCE_MS,
                                                        subscribed_topic_names=("t",), owned={}))
    assert other.heartbeat_interval_ms == 5000  # another group keeps the broker's setting
    clock.now += SESSION_MS
    beat(c, "a", 1, owned={"t": frozenset(range(6))})
    c.timers.run_due(clock.now)
    group = c.consumer_group(GROUP)
    assert group is not None and set(group.members) == {"a", "b"}  # past 45 s, still inside 50 s
    clock.now += 50_000 - SESSION_MS
    beat(c, "a", 1, owned={"t": frozenset(range(6))})
    c.timers.run_due(clock.now)
    assert set(group.members) == {"a"}


def test_revocation_timeout_fences_a_member_that_never_revokes() -> None:
    c, _, clock = make()
    join(c, "a", rebalance_timeout_ms=20_000)
    join(c, "b")
    beat(c, "a", 1, owned={"t": frozenset(range(6))})  # told to revoke: the revocation timer starts
    clock.now += 10_000
    beat(c, "a", 1, owned={"t": frozenset(range(6))})  # alive, but still owns what it must give up
    beat(c, "b", 2, owned={})
    clock.now += 10_000
    c.timers.run_due(clock.now)
    group = c.consumer_group(GROUP)
    assert group is not None and set(group.members) == {"b"}


def test_invalid_requests() -> None:
    c, _, _ = make()
    assert join(c, "").error is E.invalid_request
    assert join(c, "a", rebalance_timeout_ms=-1).error is E.invalid_request
    assert join(c, "a", subscribed_topic_names=None).error is E.invalid_request
    assert join(c, "a", owned={"t": frozenset({0})}).error is E.invalid_request
    bad = join(c, "a", server_assignor="sticky")
    assert bad.error is E.invalid_request and bad.error_message is not None and "sticky" in bad.error_message
    assert c.consumer_group_heartbeat(HeartbeatRequest(GROUP, "a", -2)).error is E.invalid_request


def test_regex_subscription_and_new_topic_bumps_the_group_epoch() -> None:
    c, logs, clock = make()
    # As Kafka's maybeUpdateRegularExpressions: a regex new to the group is resolved after the
    # heartbeat that brought it, so that heartbeat assigns nothing; the resolution bumps the epoch.
    joined = join(c, "a", topics=(), subscribed_topic_regex="t.*")
    assert (joined.member_epoch, joined.assignment) == (1, {})
    c.timers.run_due(clock.now)
    first = beat(c, "a", 1, owned={})
    assert first.member_epoch == 2 and first.assignment == {"t": frozenset(range(6))}
    logs.create_topic("t2", 2)
    nxt = beat(c, "a", 2, owned=first.assignment)
    assert nxt.member_epoch == 3 and nxt.assignment == {"t": frozenset(range(6)), "t2": frozenset({0, 1})}


def test_uniform_assignor_is_balanced_and_sticky() -> None:
    members = {m: ConsumerMember(m, subscribed_topic_names=("t", "u")) for m in ("a", "b", "c")}
    partitions = {"t": 7, "u": 3}
    first = uniform_assign(members, partitions, {})
    assert sorted(count(a) for a in first.values()) == [3, 3, 4]
    members["d"] = ConsumerMember("d", subscribed_topic_names=("t", "u"))
    second = uniform_assign(members, partitions, first)
    assert sorted(count(a) for a in second.values()) == [2, 2, 3, 3]
    for member_id in ("a", "b", "c"):  # old members only lose partitions
        for topic, parts in second[member_id].items():
            assert parts <= first[member_id].get(topic, frozenset())


def test_uniform_assignor_homogeneous_as_kafka() -> None:
    """Kafka's UniformHomogeneousAssignmentBuilder: members keep their lowest partitions up to their
    quota; what is left goes, in order, to the members below quota (librdkafka 0113's expectations)."""
    members = {"c0": ConsumerMember("c0", subscribed_topic_names=("t",))}
    first = uniform_assign(members, {"t": 6}, {})
    members["c1"] = ConsumerMember("c1", subscribed_topic_names=("t",))
    second = uniform_assign(members, {"t": 6}, first)
    assert second == {"c0": {"t": frozenset({0, 1, 2})}, "c1": {"t": frozenset({3, 4, 5})}}
    members["c2"] = ConsumerMember("c2", subscribed_topic_names=("t",))
    third = uniform_assign(members, {"t": 6}, second)
    assert third == {"c0": {"t": frozenset({0, 1})}, "c1": {"t": frozenset({3, 4})}, "c2": {"t": frozenset({2, 5})}}


def test_uniform_assignor_respects_subscriptions() -> None:
    members = {"a": ConsumerMember("a", subscribed_topic_names=("t",)),
               "b": ConsumerMember("b", subscribed_topic_names=("t", "u"))}
    result = uniform_assign(members, {"t": 2, "u": 2}, {})
    assert "u" not in result["a"] and result["b"]["u"] == frozenset({0, 1})


def test_range_assignor() -> None:
    members = {m: ConsumerMember(m, subscribed_topic_names=("t",)) for m in ("a", "b")}
    assert range_assign(members, {"t": 5}, {}) == {"a": {"t": frozenset({0, 1, 2})}, "b": {"t": frozenset({3, 4})}}


def test_range_chosen_by_the_members() -> None:
    c, _, _ = make(partitions=4)
    join(c, "a", server_assignor="range")
    group = c.consumer_group(GROUP)
    assert group is not None and c.consumer_assignor_name(group) == "range"


def test_offset_commit_and_fetch_check_member_epochs() -> None:
    c, _, _ = make()
    join(c, "a")
    commit = [OffsetCommit("t", 0, 5)]

    def commit_with(member_id: str, epoch: int, api_version: int = 9) -> ErrorCode:
        return partition_codes(lambda: c.commit_offsets(group_id=GROUP, generation_id=epoch, member_id=member_id,
                                                        group_instance_id=None, commits=commit,
                                                        api_version=api_version), [("t", 0)])[("t", 0)]

    assert commit_with("a", 1) is E.none
    assert commit_with("a", 0) is E.stale_member_epoch
    assert commit_with("a", 2) is E.stale_member_epoch
    assert commit_with("x", 1) is E.unknown_member_id
    assert commit_with("a", -1) is E.stale_member_epoch  # the group has members: no simple commit
    assert commit_with("a", 1, api_version=8) is E.unsupported_version
    assert c.fetch_offsets(GROUP, [("t", 0)])[("t", 0)].offset == 5
    assert raised(lambda: c.validate_offset_fetch(GROUP, "a", 1)) is E.none
    assert raised(lambda: c.validate_offset_fetch(GROUP, "a", 0)) is E.stale_member_epoch
    assert raised(lambda: c.validate_offset_fetch(GROUP, "x", 1)) is E.unknown_member_id
    assert raised(lambda: c.validate_offset_fetch(GROUP, None, -1)) is E.none
    beat(c, "a", -1)
    assert commit_with("", -1) is E.none  # empty group: an admin/simple commit


async def test_classic_join_to_a_consumer_group_is_refused() -> None:
    c, _, _ = make()
    join(c, "a")
    result = await c.join_group(JoinGroupRequest(
        group_id=GROUP, member_id="", group_instance_id=None, client_id="c", client_host="/127.0.0.1",
        session_timeout_ms=10000, rebalance_timeout_ms=10000, protocol_type="consumer",
        protocols=[("range", b"")], require_known_member_id=False,
    ))
    assert result.error is E.inconsistent_group_protocol


async def test_a_classic_join_replaces_an_empty_consumer_group_and_keeps_its_offsets() -> None:
    c, logs, clock = make()
    join(c, "a")
    assert codes(c.commit_offsets(group_id=GROUP, generation_id=1, member_id="a", group_instance_id=None,
                                  commits=[OffsetCommit("t", 1, 7)])) == {("t", 1): E.none}
    beat(c, "a", -1)
    group = c.consumer_group(GROUP)
    assert group is not None and group.state() is ConsumerGroupState.EMPTY
    result = await c.join_group(JoinGroupRequest(
        group_id=GROUP, member_id="", group_instance_id=None, client_id="c", client_host="/127.0.0.1",
        session_timeout_ms=10000, rebalance_timeout_ms=10000, protocol_type="consumer",
        protocols=[("range", b"")], require_known_member_id=False,
    ))
    assert result.error is E.none
    assert c.consumer_group(GROUP) is None and GROUP in c.groups
    assert c.fetch_offsets(GROUP, [("t", 1)])[("t", 1)].offset == 7
    # The consumer group's tombstones were written: a restarted coordinator has only the classic group.
    restarted = GroupCoordinator(logs, clock, GroupConfig(offsets_topic_num_partitions=3))
    restarted.load()
    assert restarted.consumer_group(GROUP) is None
    assert restarted.fetch_offsets(GROUP, [("t", 1)])[("t", 1)].offset == 7


def test_delete_consumer_group_only_when_empty() -> None:
    c, _, _ = make()
    join(c, "a")
    assert raised(lambda: c.delete_group(GROUP)) is E.non_empty_group
    beat(c, "a", -1)
    assert raised(lambda: c.delete_group(GROUP)) is E.none
    assert c.consumer_group(GROUP) is None


def test_an_empty_classic_group_becomes_the_consumer_group_and_keeps_its_offsets() -> None:
    c, _, _ = make()
    simple = c.commit_offsets(group_id=GROUP, generation_id=-1, member_id="", group_instance_id=None,
                              commits=[OffsetCommit("t", 1, 7)])
    assert codes(simple) == {("t", 1): E.none} and GROUP in c.groups
    assert join(c, "a").error is E.none
    assert GROUP not in c.groups and c.consumer_group(GROUP) is not None
    assert c.fetch_offsets(GROUP, [("t", 1)])[("t", 1)].offset == 7
    assert [g.group_id for g in c.list_groups()] == []


def test_static_member_rejoins_with_its_partitions_and_no_rebalance() -> None:
    c, _, clock = make()
    join(c, "a", instance_id="i1")
    second = join(c, "b", instance_id="i2")
    kept = beat(c, "a", 1, owned={"t": frozenset(range(6))}).assignment
    beat(c, "a", 1, owned=kept)
    b = beat(c, "b", second.member_epoch, owned={})
    assert b.assignment is not None and count(b.assignment) == 3
    group = c.consumer_group(GROUP)
    assert group is not None
    epoch_before = group.group_epoch
    # The same instance cannot join twice while active.
    assert join(c, "b-new", instance_id="i2").error is E.unreleased_instance_id
    left = c.consumer_group_heartbeat(HeartbeatRequest(GROUP, "b", -2, instance_id="i2"))
    assert (left.error, left.member_epoch) == (E.none, -2)
    assert group.group_epoch == epoch_before and "b" in group.members  # its partitions stay put
    assert beat(c, "b", b.member_epoch).error is E.fenced_member_epoch
    back = join(c, "b-new", instance_id="i2")
    assert (back.error, back.member_epoch, back.assignment) == (E.none, b.member_epoch, b.assignment)
    assert group.group_epoch == epoch_before and set(group.members) == {"a", "b-new"}
    # Left temporarily and never back: the session timeout removes it and a gets everything.
    c.consumer_group_heartbeat(HeartbeatRequest(GROUP, "b-new", -2, instance_id="i2"))
    clock.now += SESSION_MS - 1
    beat(c, "a", 2, owned=kept)
    clock.now += 1
    c.timers.run_due(clock.now)
    assert set(group.members) == {"a"} and group.static_members == {"i1": "a"}
    assert count(beat(c, "a", 2, owned=kept).assignment) == 6


def test_offset_delete_refuses_subscribed_topics_only() -> None:
    c, logs, _ = make()
    logs.create_topic("other", 1)
    join(c, "a")
    commits = [OffsetCommit("t", 0, 1), OffsetCommit("other", 0, 2)]
    assert set(codes(c.commit_offsets(group_id=GROUP, generation_id=1, member_id="a", group_instance_id=None,
                                      commits=commits)).values()) == {E.none}
    results = codes(c.delete_offsets(GROUP, [("t", 0), ("other", 0)]))  # raises nothing: no request error
    assert results == {("t", 0): E.group_subscribed_to_topic, ("other", 0): E.none}
    fetched = c.fetch_offsets(GROUP, [("t", 0), ("other", 0)])
    assert (fetched[("t", 0)].offset, fetched[("other", 0)].offset) == (1, -1)


def test_transactional_offset_commit_checks_the_member_epoch() -> None:
    c, _, _ = make()
    join(c, "a")
    commits = [OffsetCommit("t", 0, 4)]

    def txn_commit(member_id: str, epoch: int) -> ErrorCode:
        return partition_codes(lambda: c.commit_transactional_offsets(GROUP, 1000, 0, commits, generation_id=epoch,
                                                                      member_id=member_id), [("t", 0)])[("t", 0)]

    assert txn_commit("a", 2) is E.stale_member_epoch
    assert txn_commit("b", 1) is E.unknown_member_id
    assert txn_commit("a", 1) is E.none
