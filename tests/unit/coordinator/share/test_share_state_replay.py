"""The share coordinator on a real log directory: what it writes to `__share_group_state` (snapshots,
updates, tombstones) is what a new coordinator replays."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from minikafka.coordinator.share.coordinator import ShareConfig, ShareCoordinator
from minikafka.coordinator.share.group import ShareHeartbeat
from minikafka.coordinator.share.partition import AckType
from minikafka.coordinator.share.state_log import SNAPSHOT, UPDATE, decode_key
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.records import Record, build_batch
from minikafka.storage.config import LogConfig
from minikafka.storage.manager import LogManager

from ..group.fakes import FakeClock

CONFIG = ShareConfig(state_topic_num_partitions=1, snapshot_update_records=3, record_lock_duration_ms=1000)


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[LogManager]:
    manager = LogManager(tmp_path, LogConfig(), FakeClock())
    manager.load()
    manager.create_topic("t", 1)
    log = manager.partition("t", 0)
    assert log is not None
    log.append(build_batch([Record(key=None, value=b"%d" % i, timestamp=0) for i in range(10)]), 0)
    yield manager
    manager.close()


def _loaded(logs: LogManager) -> ShareCoordinator:
    shares = ShareCoordinator(logs, FakeClock(), CONFIG)
    shares.group_overrides = lambda _g: {"share.auto.offset.reset": "earliest"}
    for _ in shares.load_steps():
        pass
    return shares


def _join(shares: ShareCoordinator) -> None:
    result = shares.heartbeat(ShareHeartbeat("g", "m", 0, None, ("t",), "c", "/h"))
    assert result.error == ErrorCode.none


def _record_types(logs: LogManager) -> list[int | None]:
    shares = ShareCoordinator(logs, FakeClock(), CONFIG)
    return [decode_key(key)[0] if value is not None else None for key, value in shares.topic.records() if key]


def test_acknowledgements_are_replayed_with_snapshots_between_updates(logs: LogManager) -> None:
    shares = _loaded(logs)
    _join(shares)
    fetched = shares.acquire("g", "m", "t", 0, 10, 1 << 20)
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in fetched.acquired] == [(0, 9, 1)]
    for offset in (0, 1, 3, 5):
        shares.acknowledge("g", "m", "t", 0, [(offset, offset, [AckType.ACCEPT])], renew_allowed=False)
    shares.acknowledge("g", "m", "t", 0, [(4, 4, [AckType.RELEASE])], renew_allowed=False)
    shares.acknowledge("g", "m", "t", 0, [(6, 6, [AckType.REJECT])], renew_allowed=False)
    # the initial snapshot, 3 updates, a snapshot in place of the 4th, then updates again
    assert _record_types(logs) == [SNAPSHOT, UPDATE, UPDATE, UPDATE, SNAPSHOT, UPDATE, UPDATE]

    again = _loaded(logs)
    state = again.share_partition("g", "t", 0)
    assert state is not None and state.start_offset == 2
    assert list(state.available_offsets()) == [2, 4, 7, 8, 9]
    assert state.records[4].delivery_count == 1
    _join(again)
    refetched = again.acquire("g", "m", "t", 0, 10, 1 << 20)
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in refetched.acquired] == [
        (2, 2, 1), (4, 4, 2), (7, 9, 1)]


def test_deleting_the_group_writes_tombstones(logs: LogManager) -> None:
    shares = _loaded(logs)
    _join(shares)
    shares.acquire("g", "m", "t", 0, 10, 1 << 20)
    shares.acknowledge("g", "m", "t", 0, [(0, 9, [AckType.ACCEPT])], renew_allowed=False)
    shares.engine.remove_member("g", "m")
    shares.delete_group("g")
    assert _record_types(logs)[-2:] == [None, None]
    again = _loaded(logs)
    assert not again.groups and again.views("g") == []


def test_a_member_whose_session_ends_gives_its_records_back(logs: LogManager) -> None:
    clock = FakeClock()
    shares = ShareCoordinator(logs, clock, CONFIG)
    shares.group_overrides = lambda _g: {"share.auto.offset.reset": "earliest"}
    for _ in shares.load_steps():
        pass
    _join(shares)
    shares.acquire("g", "m", "t", 0, 4, 1 << 20)
    deadline = shares.session_deadline("g", "m")
    assert deadline == clock.now + CONFIG.session_timeout_ms
    clock.now += CONFIG.record_lock_duration_ms - 1
    shares.timers.run_due(clock.now)
    assert shares.share_partition("g", "t", 0).acquired_count() == 4  # type: ignore[union-attr]
    clock.now = deadline
    shares.timers.run_due(clock.now)  # the locks end first, then the session: nothing is left held
    state = shares.share_partition("g", "t", 0)
    assert state is not None and state.acquired_count() == 0 and list(state.available_offsets())[:4] == [0, 1, 2, 3]
    assert shares.group("g") is not None and shares.group("g").state == "Empty"  # type: ignore[union-attr]


def test_leaving_releases_without_waiting_for_the_locks(logs: LogManager) -> None:
    shares = _loaded(logs)
    _join(shares)
    shares.acquire("g", "m", "t", 0, 4, 1 << 20)
    left = shares.heartbeat(ShareHeartbeat("g", "m", -1, None, None, "c", "/h"))
    assert left.error == ErrorCode.none
    state = shares.share_partition("g", "t", 0)
    assert state is not None and state.acquired_count() == 0
    assert [state.records[o].delivery_count for o in range(4)] == [1, 1, 1, 1]
