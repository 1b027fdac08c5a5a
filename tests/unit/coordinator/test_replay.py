"""iter_partition_batches, the one loop the coordinators replay their topics with, on a real log directory:
every batch once and in order however the reads cut the log, markers kept or passed over, and an end."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from minikafka.coordinator.replay import iter_partition_batches
from minikafka.protocol.records import DecodedBatch, Record, build_batch
from minikafka.storage.config import LogConfig
from minikafka.storage.log import PartitionLog
from minikafka.storage.manager import LogManager

from .group.fakes import FakeClock

PRODUCER_ID = 7


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[LogManager]:
    manager = LogManager(tmp_path, LogConfig(), FakeClock())
    manager.load()
    yield manager
    manager.close()


def _partition(logs: LogManager, configs: dict[str, str] | None = None) -> PartitionLog:
    logs.create_topic("state", 1, configs)
    log = logs.partition("state", 0)
    assert log is not None
    return log


def _append(log: PartitionLog, *values: bytes) -> None:
    log.append(build_batch([Record(key=b"k", value=value, timestamp=0) for value in values]), 0)


def _append_transactional(log: PartitionLog, value: bytes) -> None:
    log.append(build_batch([Record(key=b"k", value=value, timestamp=0)], producer_id=PRODUCER_ID,
                           producer_epoch=0, base_sequence=0, transactional=True), 0)


def _commit(log: PartitionLog) -> None:
    log.append_control(PRODUCER_ID, 0, 0, True, 0)


def _values(batches: Iterator[DecodedBatch]) -> list[bytes | None]:
    return [record.value for batch in batches for record in batch.records]


def test_every_batch_once_in_order_when_reads_cut_batches_short(logs: LogManager) -> None:
    log = _partition(logs)
    for n in range(20):
        _append(log, b"%d" % n, b"x" * 50)
    one_batch = log.read(0, 1 << 20).records
    assert isinstance(one_batch, bytes)
    # a read of a batch and a half: every chunk but the last ends in a partial batch
    batches = list(iter_partition_batches(log, chunk_bytes=len(one_batch) * 3 // 40))
    assert [batch.header.base_offset for batch in batches] == list(range(0, 40, 2))
    assert _values(iter(batches))[::2] == [b"%d" % n for n in range(20)]


def _segmented(logs: LogManager) -> PartitionLog:
    """Twelve batches of two records (offsets 0 to 23) over several segments, which a read never crosses."""
    log = _partition(logs, {"segment.bytes": "300"})
    for n in range(12):
        _append(log, b"%d" % n, b"y" * 40)
    assert len(log.segments) > 3
    return log


def test_every_batch_once_across_segments(logs: LogManager) -> None:
    log = _segmented(logs)
    batches = list(iter_partition_batches(log))
    assert [batch.header.base_offset for batch in batches] == list(range(0, 24, 2))


def test_markers_are_replayed_unless_skipped(logs: LogManager) -> None:
    log = _partition(logs)
    _append(log, b"before")
    _append_transactional(log, b"in-txn")
    _commit(log)
    _append(log, b"after")
    every = list(iter_partition_batches(log))
    assert [batch.header.is_control for batch in every] == [False, False, True, False]
    assert every[2].header.producer_id == PRODUCER_ID
    assert _values(iter_partition_batches(log, skip_control=True)) == [b"before", b"in-txn", b"after"]


def test_a_read_of_markers_only_does_not_end_the_replay(logs: LogManager) -> None:
    """A segment holding nothing but a marker: the read of it brings no batch to replay, yet the log goes on."""
    log = _partition(logs)
    _append_transactional(log, b"in-txn")
    log.roll(0)
    _commit(log)
    log.roll(0)
    _append(log, b"after")
    assert len(log.segments) == 3
    assert _values(iter_partition_batches(log, skip_control=True)) == [b"in-txn", b"after"]


def test_a_log_that_starts_after_offset_zero(logs: LogManager) -> None:
    log = _segmented(logs)
    # inside the batch of offsets 10 and 11: the replay starts with that whole batch
    log.delete_records_before(11)
    assert log.log_start_offset == 11
    batches = list(iter_partition_batches(log))
    assert [batch.header.base_offset for batch in batches] == list(range(10, 24, 2))


def test_an_empty_log_replays_nothing(logs: LogManager) -> None:
    assert list(iter_partition_batches(_partition(logs))) == []


def test_a_log_emptied_by_deletion_replays_nothing(logs: LogManager) -> None:
    log = _partition(logs)
    _append(log, b"gone")
    log.delete_records_before(log.log_end_offset)
    assert list(iter_partition_batches(log)) == []


def test_what_is_appended_during_the_replay_is_not_replayed(logs: LogManager) -> None:
    log = _partition(logs)
    _append(log, b"first")
    _append(log, b"second")
    replay = iter_partition_batches(log)
    assert _values(iter([next(replay)])) == [b"first"]
    _append(log, b"later")
    assert _values(replay) == [b"second"]


@dataclass
class _Slice:
    records: bytes


class _StuckLog:
    """A log whose reads never get past its first batch: the replay must end, not read forever."""

    def __init__(self, chunk: bytes, start: int, end: int) -> None:
        self._chunk = chunk
        self.log_start_offset = start
        self.log_end_offset = end
        self.reads = 0

    def read(self, offset: int, max_bytes: int) -> _Slice:
        self.reads += 1
        if self.reads > 5:
            raise AssertionError("the replay kept reading a log that does not move")
        return _Slice(self._chunk)


@pytest.mark.parametrize("chunk", [b"", build_batch([Record(key=b"k", value=b"v", timestamp=0)])],
                         ids=["empty read", "the same batch again"])
def test_a_read_that_brings_nothing_new_ends_the_replay(chunk: bytes) -> None:
    # the batch holds offset 0 only: after it the log claims offsets up to 10 but reads return it again
    stuck = _StuckLog(chunk, 0, 10)
    replayed = list(iter_partition_batches(stuck))  # type: ignore[arg-type]
    assert len(replayed) == (1 if chunk else 0)
    assert stuck.reads == (2 if chunk else 1)
