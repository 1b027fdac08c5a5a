"""A crash at each step of ending a transaction, then a restart from disk: all or nothing.

The coordinator writes, in order: PrepareCommit to `__transaction_state`, one marker per
partition, CompleteCommit. A crash is simulated by raising from the N-th write of that sequence
(nothing after it reaches disk, as with kill -9), the logs are closed uncleanly and reopened from
disk, and a fresh coordinator replays `__transaction_state`. Every partition must then carry the
same outcome, and the transaction must end in Complete*.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from minikafka.coordinator.transaction.coordinator import TransactionCoordinator, TxnConfig
from minikafka.coordinator.transaction.crash_points import CRASH_POINTS
from minikafka.coordinator.transaction.state import TxnState
from minikafka.protocol.records import Record, build_batch, decode_batch, iter_whole_batches
from minikafka.storage.clock import ManualClock
from minikafka.storage.config import LogConfig
from minikafka.storage.log import PartitionLog
from minikafka.storage.manager import LogManager

START_MS = 1_700_000_000_000
TOPIC = "orders"
PARTITIONS = 3
TID = "crash-tid"
TIMEOUT_MS = 60_000


class Crash(BaseException):
    """Not an Exception, so no handler in the coordinator can swallow it (as with SIGKILL)."""


class CrashingLogs:
    """LogManager whose partitions raise Crash on the `crash_at`-th append after arming."""

    def __init__(self, logs: LogManager) -> None:
        self._logs = logs
        self.crash_at: int | None = None
        self.writes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._logs, name)

    def partition(self, topic: str, partition: int) -> Any:
        log = self._logs.partition(topic, partition)
        return None if log is None else _CrashingLog(log, self)

    def count_write(self) -> None:
        if self.crash_at is None:
            return
        self.writes += 1
        if self.writes == self.crash_at:
            raise Crash(f"crash at write {self.writes}")


class _CrashingLog:
    def __init__(self, log: PartitionLog, owner: CrashingLogs) -> None:
        self._log = log
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)

    def append(self, *args: Any, **kwargs: Any) -> Any:
        self._owner.count_write()
        return self._log.append(*args, **kwargs)

    def append_control(self, *args: Any, **kwargs: Any) -> Any:
        self._owner.count_write()
        return self._log.append_control(*args, **kwargs)


def open_node(data_dir: Path, clock: ManualClock) -> tuple[LogManager, CrashingLogs, TransactionCoordinator,
                                                           list[Callable[[], None]]]:
    logs = LogManager(data_dir, LogConfig(), clock)
    logs.load()
    crashing = CrashingLogs(logs)
    scheduled: list[Callable[[], None]] = []
    ids = itertools.count(1000)
    coordinator = TransactionCoordinator(
        crashing, lambda: next(ids), clock, TxnConfig(num_partitions=4),
        complete_group_transaction=lambda *_args: None, notify=lambda _tp: None, schedule=scheduled.append)
    coordinator.load()
    return logs, crashing, coordinator, scheduled


def run_scheduled(scheduled: list[Callable[[], None]]) -> None:
    for _ in range(100):
        if not scheduled:
            return
        scheduled.pop(0)()
    raise AssertionError("scheduled jobs keep scheduling more")


def markers(log: PartitionLog) -> list[str]:
    """The control markers of a partition, in log order ('COMMIT' / 'ABORT')."""
    found = []
    data = log.read(0, 1 << 20).records
    for pos, header in iter_whole_batches(data):
        if header.is_control:
            key = decode_batch(data, pos).records[0].key
            assert key is not None
            found.append("COMMIT" if struct.unpack(">hh", key)[1] == 1 else "ABORT")
    return found


# Writes while ending: 1 Prepare*, then PARTITIONS markers, then Complete*.
ENDING_WRITES = PARTITIONS + 2


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
@pytest.mark.parametrize("crash_at", range(1, ENDING_WRITES + 1),
                         ids=["before-prepare", "before-marker-1", "before-marker-2", "before-marker-3",
                              "before-complete"])
def test_crash_while_ending_a_transaction(tmp_path: Path, commit: bool, crash_at: int) -> None:
    clock = ManualClock(START_MS)
    logs, crashing, coordinator, scheduled = open_node(tmp_path, clock)
    logs.create_topic(TOPIC, PARTITIONS)
    pid, epoch = coordinator.init_producer_id(TID, TIMEOUT_MS)
    coordinator.add_partitions(TID, pid, epoch, [(TOPIC, p) for p in range(PARTITIONS)])
    for partition in range(PARTITIONS):
        data_log = logs.partition(TOPIC, partition)
        assert data_log is not None
        data_log.append(build_batch([Record(None, b"v%d" % partition, (), START_MS)], producer_id=pid,
                                    producer_epoch=epoch, base_sequence=0, transactional=True), START_MS)

    crashing.crash_at = crash_at
    with pytest.raises(Crash):
        coordinator.end_transaction(TID, pid, epoch, commit)
        run_scheduled(scheduled)
    logs.close(clean=False)

    logs, _crashing, coordinator, scheduled = open_node(tmp_path, clock)
    run_scheduled(scheduled)
    if crash_at == 1:
        # Nothing of the decision reached disk: the transaction is still open, and the coordinator
        # aborts it once it times out, fencing the old producer epoch.
        assert coordinator.describe(TID).state == TxnState.ONGOING
        clock.advance(TIMEOUT_MS + 1)
        assert coordinator.abort_timed_out() == [TID]
        run_scheduled(scheduled)
        expected, final = "ABORT", TxnState.COMPLETE_ABORT
        assert coordinator.describe(TID).producer_epoch == epoch + 1
    else:
        expected = "COMMIT" if commit else "ABORT"
        final = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
    assert coordinator.describe(TID).state == final
    for partition in range(PARTITIONS):
        data_log = logs.partition(TOPIC, partition)
        assert data_log is not None
        # A partition that had its marker before the crash gets it again on replay, as Kafka re-sends
        # WriteTxnMarkers after a coordinator failover; a repeated marker is harmless.
        written = markers(data_log)
        assert written and set(written) == {expected}, f"partition {partition}: {written}"
        assert len(written) == (2 if crash_at > partition + 2 else 1)
        assert data_log.last_stable_offset == data_log.high_watermark == 1 + len(written)
        data_aborted = any(a.first_offset <= 0 <= a.last_offset for a in data_log.collect_aborted(0, 1))
        assert data_aborted == (expected == "ABORT")
    logs.close()


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_named_crash_points_sit_between_the_writes(tmp_path: Path, commit: bool) -> None:
    """The broker's crash points (broker/control/crash_points.py) are named positions in the write sequence
    above: the hook is called with each name right after the write it follows, and a hook that does
    not return (the broker kills its process there) leaves disk as a crash at the next write does."""
    clock = ManualClock(START_MS)
    logs, crashing, coordinator, scheduled = open_node(tmp_path, clock)
    logs.create_topic(TOPIC, PARTITIONS)
    pid, epoch = coordinator.init_producer_id(TID, TIMEOUT_MS)
    coordinator.add_partitions(TID, pid, epoch, [(TOPIC, p) for p in range(PARTITIONS)])
    crashing.crash_at = ENDING_WRITES + 1  # counting the ending's writes, never crashing
    reached: list[tuple[str, int]] = []
    coordinator.crash_point = lambda point: reached.append((point, crashing.writes))
    coordinator.end_transaction(TID, pid, epoch, commit)
    run_scheduled(scheduled)
    outcome = "commit" if commit else "abort"
    assert reached == [(f"after_prepare_{outcome}", 1), ("after_first_marker", 2),
                       (f"before_complete_{outcome}", 1 + PARTITIONS)]
    assert {point for point, _writes in reached} <= set(CRASH_POINTS)
    logs.close()
