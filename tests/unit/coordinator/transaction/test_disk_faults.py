"""Ending a transaction on a full disk: markers and Complete* are retried until written.

Kafka's TransactionMarkerRequestCompletionHandler retries a marker that failed with
KAFKA_STORAGE_ERROR, for the partitions still without one, and writes Complete* only once every
marker is written; until then the id stays in Prepare* and its producer gets
CONCURRENT_TRANSACTIONS. The disk is a real LogManager whose writer refuses chosen partitions.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from minikafka.coordinator.transaction.coordinator import (
    RETRY_BACKOFF_MAX_MS,
    RETRY_BACKOFF_MS,
    TRANSACTION_STATE_TOPIC,
    TransactionCoordinator,
    TxnConfig,
)
from minikafka.coordinator.transaction.log import decode_value
from minikafka.coordinator.transaction.state import TxnState
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.records import Record, build_batch, decode_all
from minikafka.storage.clock import ManualClock, SystemClock
from minikafka.storage.config import LogConfig
from minikafka.storage.log import PartitionLog
from minikafka.storage.manager import LogManager

from ..disk import FullPartitions
from .test_crash_points import markers

START_MS = 1_700_000_000_000
TOPIC = "orders"
TID = "disk-tid"
TIMEOUT_MS = 60_000
TXN_STATE_DIR = f"{TRANSACTION_STATE_TOPIC}-0"
LOGGER = "minikafka.coordinator.transaction"


class Node:
    """Logs on a disk that can fill up, and a transaction coordinator over them."""

    def __init__(self, data_dir: Path, clock: ManualClock | SystemClock, disk: FullPartitions,
                 schedule: Callable[[Callable[[], None]], object] | None = None) -> None:
        self.clock = clock
        self.logs = LogManager(data_dir, LogConfig(), clock, writer=disk)
        self.logs.load()
        self.scheduled: list[Callable[[], None]] = []
        ids = itertools.count(1000)
        self.coordinator = TransactionCoordinator(
            self.logs, lambda: next(ids), clock, TxnConfig(num_partitions=1),
            complete_group_transaction=lambda *_args: None, notify=lambda _tp: None,
            schedule=schedule or self.scheduled.append)
        self.coordinator.load()

    def run_scheduled(self) -> None:
        for _ in range(100):
            if not self.scheduled:
                return
            self.scheduled.pop(0)()
        raise AssertionError("scheduled jobs keep scheduling more")

    def data(self, partition: int) -> PartitionLog:
        log = self.logs.partition(TOPIC, partition)
        assert log is not None
        return log

    def logged_states(self) -> list[str]:
        """The states of TID written to `__transaction_state`, in order."""
        log = self.logs.partition(TRANSACTION_STATE_TOPIC, 0)
        assert log is not None
        values = [r.value for b in decode_all(log.read(0, 1 << 20).records) for r in b.records]
        return [decoded.state.display_name for v in values if (decoded := decode_value(v)) is not None]

    def state(self) -> TxnState:
        return self.coordinator.describe(TID).state


def open_transaction(node: Node, partitions: int) -> tuple[int, int]:
    """A transaction with one record in each of `partitions` partitions of TOPIC."""
    node.logs.create_topic(TOPIC, partitions)
    pid, epoch = node.coordinator.init_producer_id(TID, TIMEOUT_MS)
    node.coordinator.add_partitions(TID, pid, epoch, [(TOPIC, p) for p in range(partitions)])
    for partition in range(partitions):
        now = node.clock.now_ms()
        node.data(partition).append(build_batch([Record(None, b"v%d" % partition, (), now)], producer_id=pid,
                                                producer_epoch=epoch, base_sequence=0, transactional=True), now)
        assert node.data(partition).last_stable_offset == 0
    return pid, epoch


def concurrent_transactions(call: Callable[[], object]) -> bool:
    try:
        call()
    except KafkaError as exc:
        return exc.error_code == ErrorCode.concurrent_transactions
    return False


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_marker_retried_until_written_then_complete_and_lso_advances(
        tmp_path: Path, commit: bool, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    clock, disk = ManualClock(START_MS), FullPartitions()
    node = Node(tmp_path, clock, disk)
    pid, epoch = open_transaction(node, 2)
    expected = "COMMIT" if commit else "ABORT"
    prepared = "PrepareCommit" if commit else "PrepareAbort"
    disk.full.add(f"{TOPIC}-1")

    node.coordinator.end_transaction(TID, pid, epoch, commit)
    node.run_scheduled()
    assert markers(node.data(0)) == [expected] and markers(node.data(1)) == []
    assert node.state() == (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT)
    assert node.logged_states()[-1] == prepared, "Complete* must wait for every marker"
    assert node.data(1).last_stable_offset == 0, "the partition without a marker stays unstable"
    # The producer is told to retry while the markers are pending (Kafka's CONCURRENT_TRANSACTIONS).
    assert concurrent_transactions(lambda: node.coordinator.add_partitions(TID, pid, epoch, [(TOPIC, 0)]))
    assert concurrent_transactions(lambda: node.coordinator.init_producer_id(TID, TIMEOUT_MS))
    assert concurrent_transactions(lambda: node.coordinator.end_transaction(TID, pid, epoch, commit))

    # Retries back off exponentially up to the bound, on the coordinator's clock.
    delays = []
    for _ in range(6):
        deadline = node.coordinator.timers.next_deadline()
        assert deadline is not None, "a retry is scheduled"
        delays.append(deadline - clock.now_ms())
        clock.advance(delays[-1] - 1)
        assert node.coordinator.timers.run_due(clock.now_ms()) == 0, "not before its deadline"
        clock.advance(1)
        assert node.coordinator.timers.run_due(clock.now_ms()) == 1
    assert delays == [RETRY_BACKOFF_MS, 200, 400, 800, RETRY_BACKOFF_MAX_MS, RETRY_BACKOFF_MAX_MS]
    assert markers(node.data(1)) == [] and node.logged_states()[-1] == prepared
    warnings = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]
    assert len(warnings) == 1, "one warning per failure streak, not one per retry"
    assert f"{TOPIC}-1" in warnings[0].getMessage()

    disk.full.clear()
    deadline = node.coordinator.timers.next_deadline()
    assert deadline is not None
    clock.advance(deadline - clock.now_ms())
    node.coordinator.timers.run_due(clock.now_ms())
    assert markers(node.data(1)) == [expected]
    assert markers(node.data(0)) == [expected], "a written marker is not written again"
    assert node.state() == (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT)
    assert node.logged_states()[-2:] == [prepared, "CompleteCommit" if commit else "CompleteAbort"]
    for partition in (0, 1):
        assert node.data(partition).last_stable_offset == node.data(partition).log_end_offset == 2
    if not commit:
        assert [t.producer_id for t in node.data(1).collect_aborted(0, 2)] == [pid]
    assert node.coordinator.timers.next_deadline() is None, "nothing left to retry"
    assert any("completed after 7 failed attempts" in r.getMessage() for r in caplog.records)
    node.logs.close()


def test_complete_write_retried_without_rewriting_markers(tmp_path: Path) -> None:
    clock, disk = ManualClock(START_MS), FullPartitions()
    node = Node(tmp_path, clock, disk)
    pid, epoch = open_transaction(node, 2)
    node.coordinator.end_transaction(TID, pid, epoch, True)  # PrepareCommit is written
    disk.full.add(TXN_STATE_DIR)
    node.run_scheduled()
    assert markers(node.data(0)) == markers(node.data(1)) == ["COMMIT"]
    assert node.state() == TxnState.PREPARE_COMMIT and node.logged_states()[-1] == "PrepareCommit"
    assert concurrent_transactions(lambda: node.coordinator.init_producer_id(TID, TIMEOUT_MS))

    for _ in range(3):
        clock.advance(RETRY_BACKOFF_MAX_MS)
        assert node.coordinator.timers.run_due(clock.now_ms()) == 1
        assert node.state() == TxnState.PREPARE_COMMIT
    disk.full.clear()
    clock.advance(RETRY_BACKOFF_MAX_MS)
    node.coordinator.timers.run_due(clock.now_ms())
    assert node.state() == TxnState.COMPLETE_COMMIT
    assert node.logged_states()[-2:] == ["PrepareCommit", "CompleteCommit"]
    assert markers(node.data(0)) == markers(node.data(1)) == ["COMMIT"], "markers are written once"
    # The producer goes on with its next transaction.
    new_pid, new_epoch = node.coordinator.init_producer_id(TID, TIMEOUT_MS)
    assert (new_pid, new_epoch) == (pid, epoch + 1)
    node.logs.close()

    again = Node(tmp_path, clock, FullPartitions())
    assert again.state() == TxnState.EMPTY and again.scheduled == []
    again.logs.close()


def test_restart_while_markers_are_pending_finishes_the_transaction(tmp_path: Path) -> None:
    clock, disk = ManualClock(START_MS), FullPartitions()
    node = Node(tmp_path, clock, disk)
    pid, epoch = open_transaction(node, 2)
    disk.full.add(f"{TOPIC}-1")
    node.coordinator.end_transaction(TID, pid, epoch, True)
    node.run_scheduled()
    assert node.state() == TxnState.PREPARE_COMMIT
    node.logs.close(clean=False)  # stopped while the disk was full

    again = Node(tmp_path, clock, FullPartitions())  # space was freed meanwhile
    assert again.state() == TxnState.COMPLETE_COMMIT, "recovery re-sends the markers of Prepare*"
    assert markers(again.data(1)) == ["COMMIT"]
    for partition in (0, 1):
        assert again.data(partition).last_stable_offset == again.data(partition).log_end_offset
    assert again.coordinator.timers.next_deadline() is None
    again.logs.close()


def test_recovery_on_a_still_full_disk_retries_too(tmp_path: Path) -> None:
    clock, disk = ManualClock(START_MS), FullPartitions()
    node = Node(tmp_path, clock, disk)
    pid, epoch = open_transaction(node, 1)
    disk.full.add(f"{TOPIC}-0")
    node.coordinator.end_transaction(TID, pid, epoch, False)
    node.run_scheduled()
    node.logs.close(clean=False)

    again = Node(tmp_path, clock, disk)  # still full at the restart
    assert again.state() == TxnState.PREPARE_ABORT
    assert again.coordinator.timers.next_deadline() == clock.now_ms() + RETRY_BACKOFF_MS
    disk.full.clear()
    clock.advance(RETRY_BACKOFF_MS)
    again.coordinator.timers.run_due(clock.now_ms())
    assert again.state() == TxnState.COMPLETE_ABORT and markers(again.data(0)) == ["ABORT"]
    again.logs.close()


async def test_retries_run_on_the_event_loop_and_stop_with_the_timers(tmp_path: Path) -> None:
    """The broker's wiring: the first attempt soon after EndTxn, retries on the started timers."""
    disk = FullPartitions()
    node = Node(tmp_path, SystemClock(), disk, schedule=asyncio.get_running_loop().call_soon)
    node.coordinator.timers.start()
    try:
        pid, epoch = open_transaction(node, 1)
        disk.full.add(f"{TOPIC}-0")
        node.coordinator.end_transaction(TID, pid, epoch, True)
        for _ in range(500):  # bounded poll: until a few retries have failed
            if disk.refused >= 3:
                break
            await asyncio.sleep(0.01)
        assert disk.refused >= 3 and node.state() == TxnState.PREPARE_COMMIT
        disk.full.clear()
        for _ in range(500):
            if node.state() == TxnState.COMPLETE_COMMIT:
                break
            await asyncio.sleep(0.01)
        assert node.state() == TxnState.COMPLETE_COMMIT and markers(node.data(0)) == ["COMMIT"]

        # Stopped timers retry nothing more: a transaction stuck at shutdown is left to recovery.
        pid, epoch = node.coordinator.init_producer_id(TID, TIMEOUT_MS)
        node.coordinator.add_partitions(TID, pid, epoch, [(TOPIC, 0)])
        disk.full.add(f"{TOPIC}-0")
        node.coordinator.end_transaction(TID, pid, epoch, True)
        for _ in range(500):
            if node.coordinator.timers.next_deadline() is not None:
                break
            await asyncio.sleep(0.01)
        refused = disk.refused
        await node.coordinator.timers.close()
        await asyncio.sleep(RETRY_BACKOFF_MAX_MS / 1000 * 1.5)  # longer than any backoff: no retry may come
        assert disk.refused == refused and node.state() == TxnState.PREPARE_COMMIT
    finally:
        await node.coordinator.timers.close()
        node.logs.close(clean=False)
