"""Online migration of non-empty groups between the classic and the KIP-848 consumer protocol
(Kafka 4.1's convertToConsumerGroup / classicGroup*ToConsumerGroup / convertToClassicGroup), through
GroupCoordinator with the in-memory log and a fake clock."""

from __future__ import annotations

import asyncio
import struct

import pytest
from minikafka.coordinator.group import GroupConfig, GroupCoordinator, JoinGroupRequest, OffsetCommit
from minikafka.coordinator.group.classic import SyncGroupRequest
from minikafka.coordinator.group.consumer import HeartbeatRequest, MemberState
from minikafka.coordinator.group.consumer_protocol import decode_assignment, encode_assignment
from minikafka.coordinator.group.state import GroupState, JoinResult
from minikafka.protocol.errors import ErrorCode

from .fakes import FakeClock
from .outcomes import codes, member_codes, raised
from .test_consumer import GROUP, REBALANCE_MS, TopicLogs, beat, join

E = ErrorCode
SESSION_MS = 10000
ALL = frozenset(range(6))


def subscription(topics: tuple[str, ...] = ("t",), owned: dict[str, frozenset[int]] | None = None) -> bytes:
    """A ConsumerProtocolSubscription v1 (topics, null user data, owned partitions)."""
    out = bytearray(struct.pack(">hi", 1, len(topics)))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    out += struct.pack(">i", -1)
    owned = owned or {}
    out += struct.pack(">i", len(owned))
    for topic, parts in owned.items():
        out += struct.pack(">h", len(topic)) + topic.encode() + struct.pack(">i", len(parts))
        for p in sorted(parts):
            out += struct.pack(">i", p)
    return bytes(out)


def make(policy: str = "bidirectional") -> tuple[GroupCoordinator, TopicLogs, FakeClock]:
    logs, clock = TopicLogs(), FakeClock()
    logs.create_topic("t", 6)
    coordinator = GroupCoordinator(logs, clock, GroupConfig(offsets_topic_num_partitions=3,
                                                            consumer_migration_policy=policy))
    coordinator.load()
    return coordinator, logs, clock


def classic_join(member_id: str = "", *, protocol_type: str = "consumer",
                 protocols: list[tuple[str, bytes]] | None = None, owned: dict[str, frozenset[int]] | None = None,
                 instance_id: str | None = None) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=GROUP, member_id=member_id, group_instance_id=instance_id, protocol_type=protocol_type,
        protocols=protocols if protocols is not None else [("range", subscription(owned=owned))],
        session_timeout_ms=SESSION_MS, rebalance_timeout_ms=REBALANCE_MS, client_id="classic",
        client_host="/127.0.0.1", require_known_member_id=False,
    )


def sync(member_id: str, generation: int, assignments: dict[str, bytes] | None = None,
         protocol_type: str = "consumer") -> SyncGroupRequest:
    return SyncGroupRequest(GROUP, generation, member_id, None, protocol_type, "range", assignments or {})


def classic_beat(c: GroupCoordinator, member_id: str, generation_id: int, instance_id: str | None = None) -> ErrorCode:
    """The classic Heartbeat's answer."""
    return raised(lambda: c.heartbeat(group_id=GROUP, generation_id=generation_id, member_id=member_id,
                                      group_instance_id=instance_id))


async def stable_classic_group(c: GroupCoordinator, protocol_type: str = "consumer") -> tuple[str, str, int]:
    """Two classic members that split the six partitions of t (0-2, 3-5): (first, second, generation)."""
    protocols = [("range", subscription())]
    alone = await asyncio.wait_for(c.join_group(classic_join(protocol_type=protocol_type, protocols=protocols)), 5)
    assert (await c.sync_group(sync(alone.member_id, alone.generation_id, {}, protocol_type))).error is E.none
    # The second member's join starts a rebalance the first completes by rejoining.
    b, a = await asyncio.wait_for(asyncio.gather(
        c.join_group(classic_join(protocol_type=protocol_type, protocols=protocols)),
        c.join_group(classic_join(alone.member_id, protocol_type=protocol_type, protocols=protocols))), 5)
    assert a.error is E.none and b.error is E.none and a.generation_id == b.generation_id
    leader, follower = (a, b) if a.leader_id == a.member_id else (b, a)
    plan = {leader.member_id: encode_assignment({"t": frozenset({0, 1, 2})}),
            follower.member_id: encode_assignment({"t": frozenset({3, 4, 5})})}
    synced = await asyncio.wait_for(asyncio.gather(
        c.sync_group(sync(follower.member_id, follower.generation_id, protocol_type=protocol_type)),
        c.sync_group(sync(leader.member_id, leader.generation_id, plan, protocol_type))), 5)
    assert [s.error for s in synced] == [E.none, E.none]
    assert c.groups[GROUP].is_(GroupState.STABLE)
    return leader.member_id, follower.member_id, leader.generation_id


async def rejoin(c: GroupCoordinator, member_id: str,
                 owned: dict[str, frozenset[int]]) -> tuple[JoinResult, dict[str, frozenset[int]]]:
    """A classic member's rejoin and sync inside a consumer group: (join answer, synced assignment)."""
    joined = await c.join_group(classic_join(member_id, owned=owned))
    assert joined.error is E.none, joined
    synced = await c.sync_group(sync(member_id, joined.generation_id))
    if synced.error is E.rebalance_in_progress:
        return joined, owned
    assert synced.error is E.none, synced
    return joined, decode_assignment(synced.assignment)


async def settle(c: GroupCoordinator, member_ids: tuple[str, ...]) -> dict[str, frozenset[int]]:
    """Classic members do what a classic client does until their heartbeats are quiet: rejoin (eager:
    owning nothing) whenever told REBALANCE_IN_PROGRESS. Their assignments of topic t."""
    group = c.consumer_group(GROUP)
    assert group is not None
    assigned = dict.fromkeys(member_ids, frozenset[int]())
    for _ in range(10):
        told = [m for m in member_ids if classic_beat(c, m, group.members[m].member_epoch) is not E.none]
        if not told:
            return assigned
        for member_id in told:
            assigned[member_id] = (await rejoin(c, member_id, owned={}))[1].get("t", frozenset())
    raise AssertionError("the classic members never settled")


async def test_a_consumer_member_upgrades_a_stable_classic_group_and_partitions_move_without_overlap() -> None:
    c, _, _ = make()
    first, second, generation = await stable_classic_group(c)
    joined = join(c, "modern")
    assert joined.error is E.none
    group = c.consumer_group(GROUP)
    assert group is not None and GROUP not in c.groups  # the classic group is gone
    classic = group.members[first]
    assert classic.classic is not None and classic.classic.session_timeout_ms == SESSION_MS
    assert classic.assigned == {"t": frozenset({0, 1, 2})}
    assert group.members[second].assigned == {"t": frozenset({3, 4, 5})}
    # The joining member bumped the group epoch past the classic generation.
    assert group.group_epoch == generation + 1
    # Nothing is handed to the new member while the classic members still hold every partition.
    assert not joined.assignment
    # The classic members are told to rejoin; they give up what the assignor moved (eager: they own
    # nothing when they rejoin), then the new member gets its share.
    assert classic_beat(c, first, generation) is E.rebalance_in_progress
    owned: dict[str, dict[str, frozenset[int]]] = {}
    for member_id in (first, second):
        answer, owned[member_id] = await rejoin(c, member_id, owned={})
        assert answer.protocol_type == "consumer" and answer.protocol_name == "range" and answer.leader_id == ""
        assert answer.generation_id == group.members[member_id].member_epoch
    modern = beat(c, "modern", joined.member_epoch, owned={})
    assert modern.error is E.none
    assignments = [owned[first].get("t", frozenset()), owned[second].get("t", frozenset()),
                   (modern.assignment or {}).get("t", frozenset())]
    assert sum(len(a) for a in assignments) == 6 and frozenset().union(*assignments) == ALL
    assert all(len(a) == 2 for a in assignments)
    # The classic members see a settled group.
    for member_id in (first, second):
        assert classic_beat(c, member_id, group.members[member_id].member_epoch) is E.none


async def test_a_cooperative_classic_member_revokes_before_the_partition_moves() -> None:
    c, _, _ = make()
    first, _second, _generation = await stable_classic_group(c)
    join(c, "modern")
    group = c.consumer_group(GROUP)
    assert group is not None
    # Rejoining while still owning its partitions (cooperative): it keeps its epoch until it revokes.
    joined, assigned = await rejoin(c, first, owned={"t": frozenset({0, 1, 2})})
    member = group.members[first]
    assert member.state is MemberState.UNREVOKED_PARTITIONS and member.pending_revocation
    assert classic_beat(c, first, joined.generation_id) is E.rebalance_in_progress
    moved = member.pending_revocation["t"]
    assert not assigned.get("t", frozenset()) & moved  # what it must give up is not in its assignment
    _, assigned = await rejoin(c, first, owned={"t": frozenset({0, 1, 2}) - moved})
    assert member.state is not MemberState.UNREVOKED_PARTITIONS and not member.pending_revocation
    assert member.member_epoch == group.group_epoch


async def test_upgrade_is_refused_unless_the_policy_allows_it() -> None:
    for policy in ("disabled", "downgrade"):
        c, _, _ = make(policy)
        await stable_classic_group(c)
        refused = join(c, "modern")
        assert refused.error is E.group_id_not_found
        assert refused.error_message == (f"Cannot upgrade classic group {GROUP} to consumer group because online "
                                         f"upgrade is disabled.")
        assert c.consumer_group(GROUP) is None and c.groups[GROUP].is_(GroupState.STABLE)


async def test_upgrade_needs_the_consumer_protocol_type() -> None:
    c, _, _ = make()
    await stable_classic_group(c, protocol_type="connect")
    refused = join(c, "modern")
    assert refused.error is E.group_id_not_found
    assert refused.error_message == (f"Cannot upgrade classic group {GROUP} to consumer group because the group does "
                                     f"not use the consumer embedded protocol.")
    assert c.consumer_group(GROUP) is None


async def test_upgrade_of_a_rebalancing_group_sends_its_waiting_members_back_to_rejoin() -> None:
    c, _, _ = make()
    first, second, generation = await stable_classic_group(c)
    # The first member rejoins: the group prepares a rebalance and the join waits for the second.
    waiting = asyncio.ensure_future(c.join_group(classic_join(first)))
    await asyncio.sleep(0)  # let the join reach the coordinator (no state is polled here)
    assert c.groups[GROUP].is_(GroupState.PREPARING_REBALANCE)
    assert join(c, "modern").error is E.none
    answer = await asyncio.wait_for(waiting, 5)
    assert answer.error is E.rebalance_in_progress
    group = c.consumer_group(GROUP)
    assert group is not None and set(group.members) == {first, second, "modern"}
    assert group.members[first].member_epoch == generation


async def test_classic_joins_into_a_consumer_group_need_a_protocol_every_classic_member_has() -> None:
    c, _, _ = make()
    await stable_classic_group(c)
    join(c, "modern")
    wrong_type = await c.join_group(classic_join(protocol_type="connect"))
    assert wrong_type.error is E.inconsistent_group_protocol
    unknown_protocol = await c.join_group(classic_join(protocols=[("roundrobin", subscription())]))
    assert unknown_protocol.error is E.inconsistent_group_protocol
    fine = await c.join_group(classic_join(protocols=[("roundrobin", subscription()), ("range", subscription())]))
    assert fine.error is E.none and fine.protocol_name == "roundrobin"  # answered with its first protocol


async def test_a_consumer_protocol_member_of_a_classic_only_group_joins_through_join_group() -> None:
    c, _, _ = make()
    join(c, "modern")
    new = await c.join_group(classic_join(protocols=[("range", subscription())]))
    assert new.error is E.none
    group = c.consumer_group(GROUP)
    assert group is not None and group.members[new.member_id].classic is not None
    # A consumer-protocol member is not a classic one, nor the other way round.
    assert classic_beat(c, "modern", group.members["modern"].member_epoch) is E.unknown_member_id
    assert beat(c, new.member_id, new.generation_id).error is E.unknown_member_id
    assert (await c.sync_group(sync(new.member_id, new.generation_id + 5))).error is E.illegal_generation


async def test_the_last_consumer_member_leaving_downgrades_the_group_to_classic() -> None:
    c, _, _ = make()
    first, second, _ = await stable_classic_group(c)
    modern = join(c, "modern")
    group = c.consumer_group(GROUP)
    assert group is not None
    for member_id in (first, second):
        await rejoin(c, member_id, owned={})
    beat(c, "modern", modern.member_epoch, owned={})
    targets = {m: group.target[m] for m in (first, second)}
    left = c.consumer_group_heartbeat(HeartbeatRequest(GROUP, "modern", -1))
    assert left.error is E.none
    assert c.consumer_group(GROUP) is None
    classic = c.groups[GROUP]
    assert set(classic.members) == {first, second} and classic.protocol_type == "consumer"
    assert classic.protocol_name == "range" and classic.generation_id == group.group_epoch
    assert classic.is_(GroupState.PREPARING_REBALANCE)  # the classic members rejoin to rebalance
    for member_id in (first, second):
        assert decode_assignment(classic.members[member_id].assignment) == targets[member_id]


async def test_without_downgrade_the_group_stays_a_consumer_group_of_classic_members() -> None:
    c, _, _ = make("upgrade")
    first, second, _ = await stable_classic_group(c)
    join(c, "modern")
    assert c.consumer_group_heartbeat(HeartbeatRequest(GROUP, "modern", -1)).error is E.none
    group = c.consumer_group(GROUP)
    assert group is not None and set(group.members) == {first, second}
    # The classic members go on inside it and share the partitions again.
    for member_id in (first, second):
        assert classic_beat(c, member_id, group.members[member_id].member_epoch) is E.rebalance_in_progress
    assigned = await settle(c, (first, second))
    assert assigned[first] | assigned[second] == ALL and not assigned[first] & assigned[second]


async def test_a_classic_member_in_a_consumer_group_times_out_on_its_own_session() -> None:
    c, _, clock = make()
    first, _, _ = await stable_classic_group(c)
    join(c, "modern")
    group = c.consumer_group(GROUP)
    assert group is not None
    beat(c, "modern", group.members["modern"].member_epoch)  # the consumer member's session goes on
    clock.now += SESSION_MS - 1
    c.timers.run_due(clock.now)
    assert first in group.members
    beat(c, "modern", group.members["modern"].member_epoch)
    clock.now += 1
    c.timers.run_due(clock.now)
    assert first not in group.members


async def test_classic_leave_and_offset_commits_inside_a_consumer_group() -> None:
    c, _, _ = make()
    first, second, generation = await stable_classic_group(c)
    join(c, "modern")
    commit = [OffsetCommit("t", 0, 5)]
    stale = raised(lambda: c.commit_offsets(group_id=GROUP, generation_id=generation + 7, member_id=first,
                                            group_instance_id=None, commits=commit, api_version=8))
    assert stale is E.illegal_generation
    ok = c.commit_offsets(group_id=GROUP, generation_id=generation, member_id=first, group_instance_id=None,
                          commits=commit, api_version=8)
    assert codes(ok) == {("t", 0): E.none}
    group = c.consumer_group(GROUP)
    assert group is not None
    epoch = group.group_epoch
    errors = member_codes(c.leave_group(GROUP, [(second, None), ("nobody", None), ("modern", None)]))
    assert errors == [E.none, E.unknown_member_id, E.unknown_member_id]
    assert second not in group.members and group.group_epoch == epoch + 1


async def test_a_mixed_group_is_replayed_with_its_classic_members_after_a_restart() -> None:
    c, logs, clock = make()
    first, second, _ = await stable_classic_group(c)
    join(c, "modern")
    group = c.consumer_group(GROUP)
    assert group is not None
    await rejoin(c, first, owned={})
    expected = {m.member_id: (m.member_epoch, m.assigned, m.classic) for m in group.members.values()}
    again = GroupCoordinator(logs, clock, GroupConfig(offsets_topic_num_partitions=3))
    again.load()
    replayed = again.consumer_group(GROUP)
    assert replayed is not None and GROUP not in again.groups
    assert {m.member_id: (m.member_epoch, m.assigned, m.classic) for m in replayed.members.values()} == expected
    assert replayed.members[first].classic is not None and replayed.members["modern"].classic is None
    # After the restart the classic member goes on with its generation.
    assert classic_beat(again, second, expected[second][0]) in (E.none, E.rebalance_in_progress)
    assert classic_beat(again, second, expected[second][0] + 9) is E.illegal_generation


async def test_a_downgraded_group_is_replayed_as_a_classic_group() -> None:
    c, logs, clock = make()
    first, second, _ = await stable_classic_group(c)
    join(c, "modern")
    c.consumer_group_heartbeat(HeartbeatRequest(GROUP, "modern", -1))
    assert c.consumer_group(GROUP) is None
    again = GroupCoordinator(logs, clock, GroupConfig(offsets_topic_num_partitions=3))
    again.load()
    assert again.consumer_group(GROUP) is None and set(again.groups[GROUP].members) == {first, second}


def test_an_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match=r"group\.consumer\.migration\.policy"):
        make("sideways")


async def test_a_static_classic_member_restarting_takes_over_its_instance_without_a_rebalance() -> None:
    c, _, _ = make()
    join(c, "modern")
    joined = await c.join_group(classic_join(instance_id="i1"))
    assert joined.error is E.none  # a static member needs no MEMBER_ID_REQUIRED round
    group = c.consumer_group(GROUP)
    assert group is not None
    await settle(c, (joined.member_id,))
    before = group.members[joined.member_id]
    epoch, assigned, group_epoch = before.member_epoch, dict(before.assigned), group.group_epoch
    # Another live member id claiming the instance is fenced; a restart (no member id) takes it over.
    assert (await c.join_group(classic_join("someone-else", instance_id="i1"))).error is E.fenced_instance_id
    restarted = await c.join_group(classic_join(instance_id="i1"))
    assert restarted.error is E.none and restarted.member_id != joined.member_id
    assert joined.member_id not in group.members and group.static_members["i1"] == restarted.member_id
    member = group.members[restarted.member_id]
    assert (member.member_epoch, member.assigned, group.group_epoch) == (epoch, assigned, group_epoch)
    assert classic_beat(c, joined.member_id, epoch, "i1") is E.fenced_instance_id
