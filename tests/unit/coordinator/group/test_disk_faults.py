"""The group coordinator on a full disk (a real LogManager whose writer refuses `__consumer_offsets`).

SyncGroup: when the leader's assignment cannot be stored, Kafka's resetAndPropagateAssignmentError
answers every member waiting in SyncGroup (leader and followers) with the store's error, which the
broker shows as Kafka's storeGroup maps it (KAFKA_STORAGE_ERROR -> NOT_COORDINATOR, in
broker/wire/errors.py), and the group goes back to PreparingRebalance, so followers do not wait for
the rebalance timeout.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from minikafka.broker.wire.errors import shown_member_code
from minikafka.coordinator.group import GroupConfig, GroupCoordinator, GroupState, OffsetCommit
from minikafka.coordinator.group.log import OFFSETS_TOPIC
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode
from minikafka.storage.config import LogConfig
from minikafka.storage.manager import LogManager

from ..disk import FullPartitions
from .fakes import FakeClock
from .outcomes import codes, member_codes, raised
from .test_coordinator import join, sync

E = ErrorCode
OFFSETS_DIR = f"{OFFSETS_TOPIC}-0"


def shown(api_key: ApiKey, code: ErrorCode) -> ErrorCode:
    """The code a JoinGroup/SyncGroup member's client is shown for the code of its result."""
    return shown_member_code(api_key, 5, code)


@pytest.fixture
def disk() -> FullPartitions:
    return FullPartitions()


@pytest.fixture
def node(tmp_path: Path, disk: FullPartitions) -> Iterator[tuple[GroupCoordinator, FakeClock, LogManager]]:
    clock = FakeClock()
    logs = LogManager(tmp_path, LogConfig(), clock, writer=disk)
    logs.load()
    yield GroupCoordinator(logs, clock, GroupConfig(offsets_topic_num_partitions=1)), clock, logs
    logs.close()


async def two_members_completing_rebalance(coord: GroupCoordinator) -> tuple[str, str]:
    """(leader, follower) of group g in generation 2, both joined, nobody synced yet."""
    first = await join(coord)
    assert (await sync(coord, first.member_id, 1, {first.member_id: b"all"})).error is E.none
    second_task = asyncio.create_task(join(coord))
    await asyncio.sleep(0)
    rejoin = await join(coord, first.member_id)
    second = await second_task
    assert rejoin.error is second.error is E.none and rejoin.generation_id == second.generation_id == 2
    assert rejoin.leader_id == first.member_id
    assert coord.groups["g"].state is GroupState.COMPLETING_REBALANCE
    return first.member_id, second.member_id


async def test_failed_assignment_store_answers_every_waiting_member_and_rebalances(
        node: tuple[GroupCoordinator, FakeClock, LogManager], disk: FullPartitions) -> None:
    coord, _clock, _logs = node
    leader, follower = await two_members_completing_rebalance(coord)
    follower_sync = asyncio.create_task(sync(coord, follower, 2))
    await asyncio.sleep(0)
    assert not follower_sync.done(), "a follower waits for the leader's assignment"

    disk.full.add(OFFSETS_DIR)
    leader_result = await sync(coord, leader, 2, {leader: b"L", follower: b"F"})
    assert leader_result.error is E.kafka_storage_error and leader_result.assignment == b""
    assert shown(ApiKey.SYNC_GROUP, leader_result.error) is E.not_coordinator
    # The follower is answered now, not when the rebalance times out.
    follower_result = await asyncio.wait_for(follower_sync, timeout=5)
    assert follower_result.error is E.kafka_storage_error and follower_result.assignment == b""
    assert shown(ApiKey.SYNC_GROUP, follower_result.error) is E.not_coordinator
    group = coord.groups["g"]
    assert group.state is GroupState.PREPARING_REBALANCE
    assert all(m.assignment == b"" for m in group.members.values()), "the unstored assignment is dropped"
    assert not any(m.awaiting_sync for m in group.members.values())

    # Both rejoin (as clients do after NOT_COORDINATOR) and, with the disk back, the group settles.
    disk.full.clear()
    rejoins = [asyncio.create_task(join(coord, member)) for member in (leader, follower)]
    results = [await task for task in rejoins]
    assert {r.error for r in results} == {E.none} and {r.generation_id for r in results} == {3}
    new_leader = results[0].leader_id
    other = follower if new_leader == leader else leader
    follower_sync = asyncio.create_task(sync(coord, other, 3))
    await asyncio.sleep(0)
    synced = await sync(coord, new_leader, 3, {new_leader: b"L2", other: b"F2"})
    assert synced.error is E.none and synced.assignment == b"L2"
    assert (await follower_sync).assignment == b"F2"
    assert group.state is GroupState.STABLE


async def test_failed_store_when_a_follower_syncs_late(
        node: tuple[GroupCoordinator, FakeClock, LogManager], disk: FullPartitions) -> None:
    """A follower arriving after the failed store finds the group rebalancing."""
    coord, _clock, _logs = node
    leader, follower = await two_members_completing_rebalance(coord)
    disk.full.add(OFFSETS_DIR)
    assert shown(ApiKey.SYNC_GROUP, (await sync(coord, leader, 2, {leader: b"L", follower: b"F"})).error) \
        is E.not_coordinator
    assert (await sync(coord, follower, 2)).error is E.rebalance_in_progress


async def test_empty_group_and_offset_expiry_writes_fail_without_a_stack_trace(
        node: tuple[GroupCoordinator, FakeClock, LogManager], disk: FullPartitions,
        caplog: pytest.LogCaptureFixture) -> None:
    coord, clock, _logs = node
    caplog.set_level(logging.INFO, logger="minikafka.coordinator")
    assert codes(coord.commit_offsets(group_id="simple", generation_id=-1, member_id="", group_instance_id=None,
                                      commits=[OffsetCommit("t", 0, 5)])) == {("t", 0): E.none}
    only = await join(coord, group="leaving")
    await sync(coord, only.member_id, 1, {only.member_id: b"a"}, group="leaving")
    disk.full.add(OFFSETS_DIR)

    # The last member leaves: the join phase ends Empty and the group record cannot be written.
    assert member_codes(coord.leave_group("leaving", [(only.member_id, None)])) == [E.none]
    assert coord.groups["leaving"].state is GroupState.EMPTY
    # Retention cannot write its tombstones: the offsets stay until a later check can.
    clock.now += coord.config.offsets_retention_ms + 1
    assert coord.expire_offsets(clock.now) == 0
    assert coord.fetch_offsets("simple", [("t", 0)])[("t", 0)].offset == 5
    assert not any(r.exc_info for r in caplog.records), "expected disk errors are logged without a trace"
    assert sum("failed to write" in r.getMessage() for r in caplog.records) >= 2

    disk.full.clear()
    assert coord.expire_offsets(clock.now) == 1
    assert coord.fetch_offsets("simple", [("t", 0)])[("t", 0)].offset == -1


async def test_static_member_replacement_that_cannot_be_stored_is_undone(
        node: tuple[GroupCoordinator, FakeClock, LogManager], disk: FullPartitions) -> None:
    coord, _clock, _logs = node
    first = await join(coord, instance="static-1")
    assert (await sync(coord, first.member_id, 1, {first.member_id: b"a"})).error is E.none
    disk.full.add(OFFSETS_DIR)

    # The static member restarts (empty member id): its new id cannot be persisted.
    rejoin = await join(coord, instance="static-1")
    assert shown(ApiKey.JOIN_GROUP, rejoin.error) is E.not_coordinator and rejoin.member_id == ""
    group = coord.groups["g"]
    assert group.state is GroupState.STABLE and set(group.members) == {first.member_id}
    assert group.leader_id == first.member_id and group.static_members["static-1"] == first.member_id
    assert raised(lambda: coord.heartbeat(group_id="g", generation_id=1, member_id=first.member_id,
                                          group_instance_id="static-1")) is E.none, "the old member id is still valid"

    disk.full.clear()
    again = await join(coord, instance="static-1")
    assert again.error is E.none and again.member_id != first.member_id
    assert group.static_members["static-1"] == again.member_id
