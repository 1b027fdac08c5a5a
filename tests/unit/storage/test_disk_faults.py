"""Disk faults through the injected file writer: a failed append is undone everywhere, reads go on,
writes resume when the disk does, and a restart finds only whole batches."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from minikafka.protocol.records import Record, build_batch, decode_all
from minikafka.storage.clock import ManualClock
from minikafka.storage.config import LogConfig
from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.files import FileWriter
from minikafka.storage.log import PartitionLog
from minikafka.storage.manager import CLEAN_SHUTDOWN_FILE, LogManager

NOW = 1_700_000_000_000


class FullDisk:
    """Writes through until `budget` bytes are spent, then short writes and ENOSPC, like a full
    filesystem; only to files whose name ends with one of `suffixes`."""

    def __init__(self, budget: int | None = None, suffixes: tuple[str, ...] = (".log",),
                 error: int = errno.ENOSPC) -> None:
        self.budget = budget
        self.suffixes = suffixes
        self.error = error
        self.refused = 0

    def write(self, fd: int, data: memoryview) -> int:
        if self.budget is None or not os.readlink(f"/proc/self/fd/{fd}").endswith(self.suffixes):
            return os.write(fd, data)
        if self.budget <= 0:
            self.refused += 1
            raise OSError(self.error, os.strerror(self.error))
        written = os.write(fd, data[: self.budget])
        self.budget -= written
        return written

    def heal(self) -> None:
        self.budget = None


def batch(values: list[bytes], *, producer_id: int = -1, base_sequence: int = -1) -> bytes:
    records = [Record(None, v, (), NOW + i) for i, v in enumerate(values)]
    if producer_id < 0:
        return build_batch(records)
    return build_batch(records, producer_id=producer_id, producer_epoch=0, base_sequence=base_sequence)


def open_log(path: Path, writer: FileWriter, *, clean: bool = True, **config: int) -> PartitionLog:
    log = PartitionLog(path, "t", 0, LogConfig(**config), NOW, writer)
    log.open(recovery_point=0, log_start_offset=0, clean=clean)
    return log


def values(log: PartitionLog) -> list[bytes | None]:
    return [r.value for b in decode_all(log.read(0, 1 << 20).records) for r in b.records]


@pytest.mark.parametrize("budget", [0, 10, 70], ids=["nothing-written", "torn-header", "torn-records"])
@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EROFS, errno.EIO], ids=["ENOSPC", "EROFS", "EIO"])
# From 16 KiB an append is written as patched headers and the caller's record bytes: a tear inside either.
@pytest.mark.parametrize("failed_size", [100, 20_000], ids=["copied", "written-in-place"])
def test_failed_append_leaves_no_trace_and_writes_resume(tmp_path: Path, budget: int, error: int,
                                                         failed_size: int) -> None:
    disk = FullDisk(error=error)
    log = open_log(tmp_path / "p", disk)
    log.append(batch([b"a", b"b"]), NOW)
    size_before = log.active.size
    disk.budget = budget
    with pytest.raises(KafkaStorageError):
        log.append(batch([b"c" * failed_size]), NOW)
    assert disk.refused == 1
    assert log.log_end_offset == 2 and log.active.size == size_before
    assert os.path.getsize(log.active.log_path) == size_before, "a torn batch was left on disk"
    assert values(log) == [b"a", b"b"], "reads of what is on disk keep working"

    disk.heal()
    appended = log.append(batch([b"d"]), NOW)
    assert appended.base_offset == 2
    assert values(log) == [b"a", b"b", b"d"]
    log.close(clean=False)

    # The next start recovers nothing torn: the log is exactly the acknowledged batches.
    again = open_log(tmp_path / "p", disk, clean=False)
    assert values(again) == [b"a", b"b", b"d"] and again.log_end_offset == 3
    again.close()


def test_failed_index_write_undoes_the_batch_and_its_index_entries(tmp_path: Path) -> None:
    disk = FullDisk(suffixes=(".index", ".timeindex"))
    log = open_log(tmp_path / "p", disk, index_interval_bytes=1)
    for value in (b"a", b"b", b"c"):
        log.append(batch([value]), NOW)
    offsets, positions = list(log.active.offset_index.offsets), list(log.active.offset_index.positions)
    size = log.active.size
    disk.budget = 3  # the next 8-byte index entry is torn
    with pytest.raises(KafkaStorageError):
        log.append(batch([b"d"]), NOW)
    index = log.active.offset_index
    assert (index.offsets, index.positions) == (offsets, positions)
    assert os.path.getsize(index.path) == 8 * len(offsets)
    assert os.path.getsize(log.active.log_path) == size and log.log_end_offset == 3

    disk.heal()
    assert log.append(batch([b"d"]), NOW).base_offset == 3
    log.close()
    again = open_log(tmp_path / "p", disk)  # clean start: indexes are trusted, so they must be right
    assert values(again) == [b"a", b"b", b"c", b"d"]
    assert again.active.find(3) is not None
    again.close()


def test_failed_idempotent_append_does_not_advance_the_producer_sequence(tmp_path: Path) -> None:
    disk = FullDisk()
    log = open_log(tmp_path / "p", disk)
    log.append(batch([b"a"], producer_id=7, base_sequence=0), NOW)
    disk.budget = 0
    with pytest.raises(KafkaStorageError):
        log.append(batch([b"b"], producer_id=7, base_sequence=1), NOW)
    disk.heal()
    # The producer's retry of sequence 1 is a new append, neither a duplicate nor out of order.
    retried = log.append(batch([b"b"], producer_id=7, base_sequence=1), NOW)
    assert (retried.base_offset, retried.duplicate) == (1, False)
    assert values(log) == [b"a", b"b"]
    log.close()


def test_abort_marker_without_its_txnindex_entry_is_taken_back(tmp_path: Path) -> None:
    disk = FullDisk(suffixes=(".txnindex",))
    log = open_log(tmp_path / "p", disk)
    records = [Record(None, b"x", (), NOW)]
    log.append(build_batch(records, producer_id=9, producer_epoch=0, base_sequence=0, transactional=True), NOW)
    assert log.last_stable_offset == 0
    disk.budget = 0
    with pytest.raises(KafkaStorageError):
        log.append_control(9, 0, 0, commit=False, now_ms=NOW)
    assert log.log_end_offset == 1, "the marker was not left in the log"
    assert log.last_stable_offset == 0, "the transaction is still open"
    assert log.collect_aborted(0, 1) == []

    disk.heal()
    log.append_control(9, 0, 0, commit=False, now_ms=NOW)
    assert log.log_end_offset == 2 and log.last_stable_offset == 2
    assert [t.producer_id for t in log.collect_aborted(0, 2)] == [9]
    log.close(clean=False)
    again = open_log(tmp_path / "p", disk, clean=False)
    assert [t.producer_id for t in again.collect_aborted(0, 2)] == [9]
    again.close()


def test_failed_roll_keeps_appending_to_the_old_segment_once_the_disk_is_back(tmp_path: Path) -> None:
    disk = FullDisk()
    log = open_log(tmp_path / "p", disk, segment_bytes=200)
    log.append(batch([b"a" * 120]), NOW)
    disk.budget = 0
    with pytest.raises(KafkaStorageError):
        log.append(batch([b"b" * 120]), NOW)  # rolls, then the write to the new segment fails
    assert log.log_end_offset == 1 and values(log) == [b"a" * 120]
    disk.heal()
    log.append(batch([b"c" * 120]), NOW)
    assert values(log)[:1] == [b"a" * 120] and log.log_end_offset == 2
    log.close(clean=False)
    again = open_log(tmp_path / "p", disk, clean=False, segment_bytes=200)
    assert again.log_end_offset == 2
    again.close()


def test_close_that_cannot_write_leaves_no_clean_shutdown_marker(tmp_path: Path) -> None:
    disk = FullDisk(suffixes=(".timeindex",))
    manager = LogManager(tmp_path, LogConfig(), ManualClock(NOW), writer=disk)
    manager.load()
    manager.create_topic("t", 1)
    log = manager.partition("t", 0)
    assert log is not None
    log.append(batch([b"a"]), NOW)
    disk.budget = 0  # closing seals the segment: its final time index entry cannot be written
    manager.close(clean=True)
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists(), "the next start must recover"

    disk.heal()
    again = LogManager(tmp_path, LogConfig(), ManualClock(NOW), writer=disk)
    again.load()
    reopened = again.partition("t", 0)
    assert reopened is not None and values(reopened) == [b"a"]
    again.close()


def test_topic_whose_partition_cannot_be_created_is_not_half_created(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(), ManualClock(NOW))
    manager.load()
    (tmp_path / "t-1").write_bytes(b"")  # a file where partition 1's directory must go
    with pytest.raises(KafkaStorageError):
        manager.create_topic("t", 2)
    assert manager.topic("t") is None and manager.partition("t", 0) is None
    assert not (tmp_path / "t-0").exists()
    (tmp_path / "t-1").unlink()
    assert manager.create_topic("t", 2).partitions == 2
    manager.close()
