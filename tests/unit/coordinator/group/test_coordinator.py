"""GroupCoordinator against an in-memory log and a fake clock (timers driven by run_due)."""

from __future__ import annotations

import asyncio
from functools import partial

import pytest
from minikafka.coordinator.group import (
    GroupConfig,
    GroupCoordinator,
    GroupListing,
    GroupState,
    JoinGroupRequest,
    OffsetCommit,
    SyncGroupRequest,
)
from minikafka.coordinator.group.coordinator import FetchedOffset
from minikafka.coordinator.group.log import OFFSETS_TOPIC
from minikafka.coordinator.hashing import partition_for
from minikafka.protocol.errors import ErrorCode

from .fakes import FakeClock, FakeLogManager
from .outcomes import codes, member_codes, partition_codes, raised

E = ErrorCode
PROTOCOLS = [("range", b"range-meta"), ("roundrobin", b"rr-meta")]


def make(**config: int) -> tuple[GroupCoordinator, FakeLogManager, FakeClock]:
    logs, clock = FakeLogManager(), FakeClock()
    settings = {"offsets_topic_num_partitions": 5, **config}
    return GroupCoordinator(logs, clock, GroupConfig(**settings)), logs, clock


def join(
    coord: GroupCoordinator,
    member_id: str = "",
    *,
    group: str = "g",
    instance: str | None = None,
    protocols=PROTOCOLS,
    session: int = 10000,
    rebalance: int = 30000,
    v4: bool = False,
    v9: bool = False,
):
    return coord.join_group(JoinGroupRequest(
        group_id=group,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocols=protocols,
        session_timeout_ms=session,
        rebalance_timeout_ms=rebalance,
        client_id="c",
        client_host="/127.0.0.1",
        require_known_member_id=v4,
        supports_skip_assignment=v9,
    ))


def sync(
    coord: GroupCoordinator,
    member_id: str,
    generation: int,
    assignments=None,
    *,
    group: str = "g",
    instance: str | None = None,
):
    return coord.sync_group(SyncGroupRequest(
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type=None,
        protocol_name=None,
        assignments=assignments or {},
    ))


async def settle(coord, clock, *tasks):
    await asyncio.sleep(0)
    return [await t for t in tasks]


async def stable_pair(coord: GroupCoordinator):
    first = await join(coord)
    assert first.error is E.none and first.generation_id == 1 and first.leader_id == first.member_id
    await sync(coord, first.member_id, 1, {first.member_id: b"all"})
    # a second member joins: the first must rejoin before the join phase completes
    second_task = asyncio.create_task(join(coord))
    await asyncio.sleep(0)
    assert coord.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert (
        raised(lambda: coord.heartbeat(group_id="g", generation_id=1, member_id=first.member_id,
                                       group_instance_id=None))
        is E.rebalance_in_progress
    )
    rejoin = await join(coord, first.member_id)
    second = await second_task
    assert rejoin.generation_id == second.generation_id == 2
    assert {m[0] for m in rejoin.members} == {first.member_id, second.member_id}
    assert second.members == ()
    follower = asyncio.create_task(sync(coord, second.member_id, 2))
    await asyncio.sleep(0)
    leader = await sync(coord, first.member_id, 2, {first.member_id: b"A", second.member_id: b"B"})
    assert leader.assignment == b"A" and (await follower).assignment == b"B"
    assert coord.groups["g"].state is GroupState.STABLE
    return first.member_id, second.member_id


async def test_single_member_join_sync() -> None:
    coord, logs, _ = make()
    result = await join(coord)
    assert result.error is E.none and result.protocol_name == "range"
    assert result.members == ((result.member_id, None, b"range-meta"),)
    assert coord.groups["g"].state is GroupState.COMPLETING_REBALANCE
    synced = await sync(coord, result.member_id, 1, {result.member_id: b"asg"})
    assert synced.error is E.none and synced.assignment == b"asg"
    assert coord.groups["g"].state is GroupState.STABLE
    assert logs.topic(OFFSETS_TOPIC).partitions == 5
    assert logs.configs[OFFSETS_TOPIC]["cleanup.policy"] == "compact"


async def test_member_id_required_for_v4() -> None:
    coord, _, _ = make()
    first = await join(coord, v4=True)
    assert first.error is E.member_id_required and first.member_id.startswith("c-")
    second = await join(coord, first.member_id, v4=True)
    assert second.error is E.none and second.member_id == first.member_id


async def test_pending_member_expires() -> None:
    coord, _, clock = make()
    first = await join(coord, v4=True)
    clock.now += 10001
    coord.timers.run_due(clock.now)
    assert (await join(coord, first.member_id, v4=True)).error is E.unknown_member_id


async def test_invalid_session_timeout_and_protocols() -> None:
    coord, _, _ = make()
    assert (await join(coord, session=100)).error is E.invalid_session_timeout
    result = await join(coord)
    await sync(coord, result.member_id, 1, {})
    other = await join(coord, protocols=[("sticky", b"")])
    assert other.error is E.inconsistent_group_protocol
    assert (await join(coord, "nobody")).error is E.unknown_member_id


async def test_two_members_then_leave_and_expire() -> None:
    coord, _, clock = make()
    a, b = await stable_pair(coord)
    assert raised(lambda: coord.heartbeat(group_id="g", generation_id=2, member_id=b, group_instance_id=None)) is E.none
    assert (
        raised(lambda: coord.heartbeat(group_id="g", generation_id=1, member_id=b, group_instance_id=None))
        is E.illegal_generation
    )
    assert member_codes(coord.leave_group("g", [(a, None)])) == [E.none]
    assert coord.groups["g"].state is GroupState.PREPARING_REBALANCE
    rejoin = await join(coord, b)
    assert rejoin.generation_id == 3 and rejoin.leader_id == b
    await sync(coord, b, 3, {b: b"all"})
    clock.now += 10001
    coord.timers.run_due(clock.now)
    group = coord.groups["g"]
    assert group.state is GroupState.EMPTY and not group.members and group.generation_id == 4


async def test_member_not_rejoining_is_dropped_at_rebalance_timeout() -> None:
    coord, _, clock = make()
    a, b = await stable_pair(coord)
    late = asyncio.create_task(join(coord))  # third member starts a rebalance
    rejoin_a = asyncio.create_task(join(coord, a))
    await asyncio.sleep(0)
    clock.now += 30001
    coord.timers.run_due(clock.now)
    third, ra = await late, await rejoin_a
    assert third.generation_id == ra.generation_id == 3
    assert b not in coord.groups["g"].members
    assert (
        raised(lambda: coord.heartbeat(group_id="g", generation_id=3, member_id=b, group_instance_id=None))
        is E.unknown_member_id
    )


async def test_sync_errors() -> None:
    coord, _, _ = make()
    result = await join(coord)
    assert (await sync(coord, "x", 1)).error is E.unknown_member_id
    assert (await sync(coord, result.member_id, 7)).error is E.illegal_generation
    assert (await sync(coord, result.member_id, 1, group="nope")).error is E.unknown_member_id


async def test_rebalance_during_sync_wait_errors_follower() -> None:
    coord, _, _ = make()
    a, b = await stable_pair(coord)
    ra = asyncio.create_task(join(coord, a))
    rb = asyncio.create_task(join(coord, b))
    await asyncio.sleep(0)
    assert (await ra).generation_id == 3 and (await rb).generation_id == 3
    follower = asyncio.create_task(sync(coord, b, 3))
    await asyncio.sleep(0)
    coord.leave_group("g", [(a, None)])
    assert (await follower).error is E.rebalance_in_progress


async def test_static_member_rejoins_without_rebalance() -> None:
    coord, _, _ = make()
    first = await join(coord, instance="i1")
    assert first.member_id.startswith("i1-")
    await sync(coord, first.member_id, 1, {first.member_id: b"mine"}, instance="i1")
    again = await join(coord, instance="i1")
    assert again.error is E.none and again.generation_id == 1 and again.member_id != first.member_id
    # JoinGroup < v9: the rejoining static leader is answered as a follower (leader = its old id)
    assert again.leader_id == first.member_id and again.members == () and not again.skip_assignment
    group = coord.groups["g"]
    assert group.state is GroupState.STABLE and group.leader_id == again.member_id
    synced = await sync(coord, again.member_id, 1, instance="i1")
    assert synced.assignment == b"mine"
    assert (
        raised(lambda: coord.heartbeat(group_id="g", generation_id=1, member_id=first.member_id,
                                       group_instance_id="i1"))
        is E.fenced_instance_id
    )
    assert member_codes(coord.leave_group("g", [("", "i1")])) == [E.none]
    assert group.state is not GroupState.STABLE


async def test_commit_and_fetch_offsets() -> None:
    coord, _, _ = make()
    assert codes(coord.commit_offsets(
        group_id="simple",
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        commits=[OffsetCommit("t", 0, 10, 3, "m")],
    )) == {("t", 0): E.none}
    fetched = coord.fetch_offsets("simple", [("t", 0), ("t", 1)])
    assert fetched[("t", 0)].offset == 10 and fetched[("t", 0)].leader_epoch == 3
    assert fetched[("t", 0)].metadata == "m" and fetched[("t", 1)].offset == -1
    assert list(coord.fetch_offsets("simple", None)) == [("t", 0)]
    assert coord.list_groups() == [GroupListing("simple", "", "Empty")]
    a, _b = await stable_pair(coord)
    ok = coord.commit_offsets(
        group_id="g", generation_id=2, member_id=a, group_instance_id=None, commits=[OffsetCommit("t", 0, 5)]
    )
    assert codes(ok) == {("t", 0): E.none}
    assert raised(lambda: coord.commit_offsets(
        group_id="g", generation_id=1, member_id=a, group_instance_id=None, commits=[OffsetCommit("t", 0, 5)]
    )) is E.illegal_generation
    assert raised(lambda: coord.commit_offsets(
        group_id="g",
        generation_id=2,
        member_id="zz",
        group_instance_id=None,
        commits=[OffsetCommit("t", 0, 5)],
    )) is E.unknown_member_id
    assert raised(lambda: coord.commit_offsets(
        group_id="g",
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        commits=[OffsetCommit("t", 0, 5)],
    )) is E.unknown_member_id
    assert raised(lambda: coord.commit_offsets(
        group_id="nogroup",
        generation_id=3,
        member_id="x",
        group_instance_id=None,
        commits=[OffsetCommit("t", 0, 5)],
        api_version=8,
    )) is E.illegal_generation
    too_big = coord.commit_offsets(
        group_id="simple",
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        commits=[OffsetCommit("t", 0, 1, metadata="x" * 5000)],
    )
    assert codes(too_big) == {("t", 0): E.offset_metadata_too_large}


async def test_state_survives_reload() -> None:
    coord, logs, clock = make()
    a, b = await stable_pair(coord)
    coord.commit_offsets(
        group_id="g",
        generation_id=2,
        member_id=a,
        group_instance_id=None,
        commits=[OffsetCommit("t", 1, 99, 2, "meta")],
    )
    coord.commit_offsets(
        group_id="s",
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        commits=[OffsetCommit("t", 0, 1)],
    )
    coord.delete_offsets("s", [("t", 0)])
    written = logs.partition(OFFSETS_TOPIC, partition_for("g", 5)).log_end_offset
    assert written >= 3
    reloaded = GroupCoordinator(logs, clock, coord.config)
    reloaded.load()
    group = reloaded.groups["g"]
    assert group.state is GroupState.STABLE and group.generation_id == 2 and group.leader_id == a
    assert group.members[b].assignment == b"B"
    assert reloaded.fetch_offsets("g", [("t", 1)])[("t", 1)].offset == 99
    assert reloaded.fetch_offsets("s", None) == {}
    assert raised(lambda: reloaded.heartbeat(group_id="g", generation_id=2, member_id=b,
                                             group_instance_id=None)) is E.none
    # members that never come back expire after their session timeout
    clock.now += 10001
    reloaded.timers.run_due(clock.now)
    assert not reloaded.groups["g"].members


async def test_describe_list_delete() -> None:
    coord, logs, clock = make()
    a, b = await stable_pair(coord)
    described = coord.describe_group("g")
    assert described.state == "Stable" and described.protocol == "range" and described.exists
    assert {m.assignment for m in described.members} == {b"A", b"B"}
    unknown = coord.describe_group("zz")
    assert unknown.state == "Dead" and not unknown.exists and unknown.members == ()
    assert coord.list_groups(["stable"]) == [GroupListing("g", "consumer", "Stable")]
    assert coord.list_groups(["Empty"]) == []
    assert raised(lambda: coord.delete_group("g")) is E.non_empty_group
    assert raised(lambda: coord.delete_group("missing")) is E.group_id_not_found
    coord.commit_offsets(
        group_id="g", generation_id=2, member_id=a, group_instance_id=None, commits=[OffsetCommit("t", 0, 3)]
    )
    coord.leave_group("g", [(a, None), (b, None)])
    assert coord.groups["g"].state is GroupState.EMPTY
    assert raised(lambda: coord.delete_group("g")) is E.none
    assert "g" not in coord.groups and coord.fetch_offsets("g", [("t", 0)])[("t", 0)].offset == -1
    reloaded = GroupCoordinator(logs, clock, coord.config)
    reloaded.load()
    assert "g" not in reloaded.groups


async def test_offset_delete_respects_subscription() -> None:
    coord, _, _ = make()
    subscription = (
        (1).to_bytes(2, "big") + (1).to_bytes(4, "big") + (1).to_bytes(2, "big") + b"t" + b"\xff\xff\xff\xff"
    )
    r = await join(coord, protocols=[("range", subscription)])
    await sync(coord, r.member_id, 1, {})
    coord.commit_offsets(
        group_id="g",
        generation_id=1,
        member_id=r.member_id,
        group_instance_id=None,
        commits=[OffsetCommit("t", 0, 3), OffsetCommit("u", 0, 4)],
    )
    results = coord.delete_offsets("g", [("t", 0), ("u", 0)])
    # Kafka 4's deleteOffsets: only the subscribed topic's partitions fail; the request does not.
    assert codes(results) == {("t", 0): E.group_subscribed_to_topic, ("u", 0): E.none}
    assert coord.fetch_offsets("g", [("t", 0), ("u", 0)]) == {
        ("t", 0): FetchedOffset(3), ("u", 0): FetchedOffset()
    }
    assert raised(lambda: coord.delete_offsets("nope", [("t", 0)])) is E.group_id_not_found


async def test_offsets_expire_for_empty_groups() -> None:
    coord, _, clock = make(offsets_retention_ms=1000)
    coord.commit_offsets(
        group_id="s",
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        commits=[OffsetCommit("t", 0, 1)],
    )
    assert coord.expire_offsets(clock.now + 999) == 0
    assert coord.expire_offsets(clock.now + 1000) == 1
    assert "s" not in coord.groups


async def test_initial_rebalance_delay() -> None:
    coord, _, clock = make(initial_rebalance_delay_ms=3000)
    first = asyncio.create_task(join(coord))
    await asyncio.sleep(0)
    second = asyncio.create_task(join(coord))
    await asyncio.sleep(0)
    assert not first.done()
    clock.now += 3000
    coord.timers.run_due(clock.now)  # a member arrived during the delay: extended once
    await asyncio.sleep(0)
    assert not first.done()
    clock.now += 3000
    coord.timers.run_due(clock.now)
    a, b = await first, await second
    assert a.generation_id == b.generation_id == 1 and len(a.members) == 2


async def test_transactional_offsets_apply_on_commit_marker() -> None:
    coord, logs, clock = make()
    coord.commit_transactional_offsets("g", 7, 0, [OffsetCommit("t", 0, 50)])
    assert coord.fetch_offsets("g", [("t", 0)])[("t", 0)].offset == -1
    assert (
        coord.fetch_offsets("g", [("t", 0)], require_stable=True)[("t", 0)].error is E.unstable_offset_commit
    )
    coord.complete_transaction(coord.partition_for("g"), 7, 0, commit=True)
    assert coord.fetch_offsets("g", [("t", 0)])[("t", 0)].offset == 50
    coord.commit_transactional_offsets("g", 8, 0, [OffsetCommit("t", 0, 60)])
    coord.complete_transaction(coord.partition_for("g"), 8, 0, commit=False)
    reloaded = GroupCoordinator(logs, clock, coord.config)
    reloaded.load()
    assert reloaded.fetch_offsets("g", [("t", 0)])[("t", 0)].offset == 50


@pytest.mark.parametrize(
    ("generation", "member", "expected"),
    [
        (1, True, E.rebalance_in_progress),  # current generation: the state check answers
        (0, True, E.illegal_generation),  # Kafka 4 checks the generation before the state
        (-1, True, E.illegal_generation),
        (1, False, E.unknown_member_id),
        (-1, False, E.unknown_member_id),  # no member fields: only an Empty group takes it
    ],
)
async def test_commit_during_completing_rebalance(generation: int, member: bool, expected: E) -> None:
    coord, _, _ = make()
    r = await join(coord)
    assert coord.groups["g"].state is GroupState.COMPLETING_REBALANCE
    out = partition_codes(lambda: coord.commit_offsets(
        group_id="g",
        generation_id=generation,
        member_id=r.member_id if member else "",
        group_instance_id=None,
        commits=[OffsetCommit("t", 0, 1)],
    ), [("t", 0)])
    assert out == {("t", 0): expected}


async def test_commit_to_unknown_group_with_a_generation() -> None:
    coord, _, _ = make()
    commit = {"generation_id": 3, "member_id": "m", "group_instance_id": None, "commits": [OffsetCommit("t", 0, 1)]}
    assert raised(lambda: coord.commit_offsets(group_id="nope", api_version=8, **commit)) is E.illegal_generation
    assert raised(lambda: coord.commit_offsets(group_id="nope", api_version=9, **commit)) is E.group_id_not_found
    assert "nope" not in coord.groups


async def test_commit_with_an_unknown_instance_id_is_unknown_member() -> None:
    coord, _, _ = make()
    r = await join(coord)
    await sync(coord, r.member_id, 1, {r.member_id: b"a"})
    out = raised(lambda: coord.commit_offsets(group_id="g", generation_id=1, member_id=r.member_id,
                                              group_instance_id="other", commits=[OffsetCommit("t", 0, 1)]))
    assert out is E.unknown_member_id


async def test_static_leader_rejoin_with_skip_assignment() -> None:
    coord, _, _ = make()
    first = await join(coord, instance="i1")
    await sync(coord, first.member_id, 1, {first.member_id: b"mine"}, instance="i1")
    again = await join(coord, instance="i1", v9=True)
    assert again.skip_assignment and again.leader_id == again.member_id
    assert again.members == ((again.member_id, "i1", b"range-meta"),)
    assert coord.groups["g"].state is GroupState.STABLE and coord.groups["g"].generation_id == 1


async def test_transactional_commit_checks_generation_and_member_kip_447() -> None:
    coord, _, _ = make()
    assert raised(lambda: coord.commit_transactional_offsets("new", 7, 0, [OffsetCommit("t", 0, 1)], generation_id=3,
                                                             member_id="m")) is E.illegal_generation
    first = await join(coord, instance="i1")
    member = first.member_id
    # KIP-447: unlike a plain commit, a transactional one is allowed while the rebalance completes
    assert coord.groups["g"].state is GroupState.COMPLETING_REBALANCE
    assert codes(coord.commit_transactional_offsets("g", 7, 0, [OffsetCommit("t", 0, 5)], generation_id=1,
                                                    member_id=member, group_instance_id="i1")) == {("t", 0): E.none}
    await sync(coord, member, 1, {member: b"all"}, instance="i1")
    cases = [
        ({"generation_id": 0, "member_id": member, "group_instance_id": "i1"}, E.illegal_generation),
        ({"generation_id": 1, "member_id": "zombie", "group_instance_id": None}, E.unknown_member_id),
        ({"generation_id": 1, "member_id": "zombie", "group_instance_id": "i1"}, E.fenced_instance_id),
        ({}, E.none),  # v0-2 carry no member fields: accepted even by a non-empty group
        ({"generation_id": 1, "member_id": member, "group_instance_id": "i1"}, E.none),
    ]
    for fields, expected in cases:
        commit = partial(coord.commit_transactional_offsets, "g", 7, 0, [OffsetCommit("t", 0, 9)], **fields)
        result = partition_codes(commit, [("t", 0)])
        assert result == {("t", 0): expected}, fields
    coord.complete_transaction(coord.partition_for("g"), 7, 0, commit=True)
    assert coord.fetch_offsets("g", [("t", 0)])[("t", 0)].offset == 9


async def test_close_answers_parked_members_not_coordinator() -> None:
    """Kafka's onGroupUnloaded: a member waiting in JoinGroup or SyncGroup is answered NOT_COORDINATOR at
    once when the coordinator shuts down, not when the rebalance times out."""
    coord, _, _ = make()
    a, b = await stable_pair(coord)
    rejoin_a, rejoin_b = asyncio.create_task(join(coord, a)), asyncio.create_task(join(coord, b))
    await asyncio.sleep(0)
    assert (await rejoin_a).generation_id == (await rejoin_b).generation_id == 3
    parked_sync = asyncio.create_task(sync(coord, b, 3))  # the follower waits for the leader's assignment
    await asyncio.sleep(0)
    alone = await join(coord, group="h")
    await sync(coord, alone.member_id, alone.generation_id, {alone.member_id: b"all"}, group="h")
    parked_join = asyncio.create_task(join(coord, group="h"))  # a newcomer waits for the member to rejoin
    await asyncio.sleep(0)
    assert not parked_sync.done() and not parked_join.done()
    await coord.close()
    assert (await asyncio.wait_for(parked_sync, 5)).error is E.not_coordinator
    assert (await asyncio.wait_for(parked_join, 5)).error is E.not_coordinator
