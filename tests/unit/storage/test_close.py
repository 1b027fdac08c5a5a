"""What a clean close makes durable: every file written since its last fsync (a rolled segment too), the
producer snapshots, the checkpoints and then the clean-shutdown marker; and nothing for files untouched
since, so a broker with thousands of empty partitions stops without an fsync for each. The fsyncs are
the real ones: `os.fsync` is wrapped only to note which file each was for.

On Linux one syncfs of the data directory's filesystem stands for the logs' fsyncs (storage/manager.py);
the tests of the fsync per file, the way everywhere else, switch syncfs off with `per_file_fsyncs`. The
syncfs is the real one too: it is wrapped only to note the files on disk when it ran, or to fail it."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from minikafka.protocol.records import Record, build_batch
from minikafka.storage import files
from minikafka.storage import manager as manager_module
from minikafka.storage.clock import ManualClock
from minikafka.storage.config import LogConfig
from minikafka.storage.log import PartitionLog
from minikafka.storage.manager import CLEAN_SHUTDOWN_FILE, LogManager

NOW = 1_700_000_000_000


class FsyncSpy:
    """Names (relative to `root`) of the files fsynced, in any thread; `failing` names fail with EIO once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.synced: list[str] = []
        self.failing: set[str] = set()
        self._real = os.fsync

    def __call__(self, fd: int) -> None:
        if fd < 0:
            self._real(fd)  # as os.fsync does: ValueError (a close that fsyncs a file it already closed)
        name = os.path.relpath(os.readlink(f"/proc/self/fd/{fd}"), self.root)
        if name in self.failing:
            self.failing.discard(name)
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        self._real(fd)
        self.synced.append(name)

    def take(self) -> set[str]:
        synced, self.synced = set(self.synced), []
        return synced


@pytest.fixture
def fsyncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FsyncSpy]:
    spy = FsyncSpy(tmp_path)
    monkeypatch.setattr(os, "fsync", spy)
    yield spy


@pytest.fixture
def per_file_fsyncs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The close of a system without syncfs: an fsync for each file written since its last."""
    monkeypatch.setattr(manager_module, "can_sync_filesystem", lambda: False)


class SyncfsSpy:
    """The data directory's files (relative to `root`) when each syncfs ran; `failing` fails the next one."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files_at_sync: list[set[str]] = []
        self.failing = False
        self._real = manager_module.sync_filesystem

    def __call__(self, directory: Path) -> None:
        assert directory == self.root
        self.files_at_sync.append({str(path.relative_to(self.root)) for path in self.root.rglob("*")})
        if self.failing:
            self.failing = False
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        self._real(directory)


@pytest.fixture
def syncfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SyncfsSpy:
    if not files.can_sync_filesystem():
        assert not sys.platform.startswith("linux"), "Linux has syncfs(2): the close must use it"
        pytest.skip("no syncfs(2) here: the close fsyncs each file (the per_file_fsyncs tests)")
    spy = SyncfsSpy(tmp_path)
    monkeypatch.setattr(manager_module, "sync_filesystem", spy)
    return spy


def batch(count: int, *, producer_id: int = -1) -> bytes:
    records = [Record(b"k%d" % i, b"v" * 100, (), NOW + i) for i in range(count)]
    if producer_id < 0:
        return build_batch(records)
    return build_batch(records, producer_id=producer_id, producer_epoch=0, base_sequence=0)


def busy_manager(tmp_path: Path) -> LogManager:
    """Two partitions with 60 batches each (their indexes have entries) and a producer each; 50 untouched."""
    manager = LogManager(tmp_path, LogConfig(), ManualClock(NOW))
    manager.load()
    manager.create_topic("busy", 2)
    manager.create_topic("idle", 50)
    for partition in (0, 1):
        log = manager.partition("busy", partition)
        assert log is not None
        for _ in range(59):  # past index.interval.bytes: the offset and time indexes get entries too
            log.append(batch(1), NOW)
        log.append(batch(1, producer_id=7 + partition), NOW)  # a producer for the snapshot to hold
    return manager


def reopened_busy(tmp_path: Path) -> tuple[LogManager, PartitionLog]:
    again = LogManager(tmp_path, LogConfig(), ManualClock(NOW))
    again.load()
    reopened = again.partition("busy", 1)
    assert reopened is not None and reopened.log_end_offset == 60
    return again, reopened


def test_clean_close_fsyncs_what_was_written_and_nothing_untouched(tmp_path: Path, fsyncs: FsyncSpy,
                                                                    per_file_fsyncs: None) -> None:
    manager = busy_manager(tmp_path)
    fsyncs.take()

    manager.close(clean=True)

    synced = fsyncs.take()
    for partition in (0, 1):
        for suffix in (".log", ".index", ".timeindex"):
            assert f"busy-{partition}/{0:020d}{suffix}" in synced
        assert f"busy-{partition}/{60:020d}.snapshot.tmp" in synced, "the producer snapshot is made durable"
        assert (tmp_path / f"busy-{partition}" / f"{60:020d}.snapshot").exists()
    assert not [name for name in synced if name.startswith("idle-")], "an untouched partition costs no fsync"
    assert {"recovery-point-offset-checkpoint.tmp", "log-start-offset-checkpoint.tmp",
            f"{CLEAN_SHUTDOWN_FILE}.tmp"} <= synced
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()

    again, _reopened = reopened_busy(tmp_path)
    fsyncs.take()
    again.close(clean=True)
    synced = fsyncs.take()
    # Nothing was written since the last close: only the checkpoints and the marker are written again.
    assert not [name for name in synced if name.startswith(("busy-", "idle-"))], synced


def test_flush_reaches_a_rolled_segment_and_then_costs_nothing(tmp_path: Path, fsyncs: FsyncSpy) -> None:
    log = PartitionLog(tmp_path / "t-0", "t", 0, LogConfig(), NOW)
    log.open(recovery_point=0, log_start_offset=0, clean=True)
    log.append(batch(3), NOW)
    log.roll(NOW)
    log.append(batch(2), NOW)

    log.flush()

    synced = fsyncs.take()
    assert {f"t-0/{0:020d}.log", f"t-0/{3:020d}.log"} <= synced, "the segment rolled since the last flush too"
    log.flush()
    assert fsyncs.take() == set(), "nothing written since the last flush"
    log.close()


def test_failed_fsync_at_close_leaves_no_clean_shutdown_marker(tmp_path: Path, fsyncs: FsyncSpy,
                                                               per_file_fsyncs: None) -> None:
    """Linux reports a failed writeback to one fsync only, so the close's own retry of that fsync may
    succeed: the failure seen first must still keep the marker away."""
    manager = LogManager(tmp_path, LogConfig(), ManualClock(NOW))
    manager.load()
    manager.create_topic("t", 3)
    for partition in range(3):
        log = manager.partition("t", partition)
        assert log is not None
        log.append(batch(2), NOW)
    fsyncs.failing.add(f"t-1/{0:020d}.log")

    manager.close(clean=True)

    assert not fsyncs.failing, "the fsync that fails was attempted"
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists(), "the next start must recover"
    again = LogManager(tmp_path, LogConfig(), ManualClock(NOW))
    again.load()
    for partition in range(3):
        reopened = again.partition("t", partition)
        assert reopened is not None and reopened.log_end_offset == 2
    again.close()


def test_clean_close_by_syncfs_syncs_once_after_the_snapshots_and_before_the_marker(
        tmp_path: Path, fsyncs: FsyncSpy, syncfs: SyncfsSpy) -> None:
    manager = busy_manager(tmp_path)
    fsyncs.take()

    manager.close(clean=True)

    assert len(syncfs.files_at_sync) == 1, "one syncfs for every log"
    on_disk = syncfs.files_at_sync[0]
    for partition in (0, 1):
        assert f"busy-{partition}/{60:020d}.snapshot" in on_disk, "the snapshots are written before the syncfs"
    assert CLEAN_SHUTDOWN_FILE not in on_disk and f"{CLEAN_SHUTDOWN_FILE}.tmp" not in on_disk
    synced = fsyncs.take()
    assert not [name for name in synced if name.startswith(("busy-", "idle-"))], \
        f"the syncfs stands for the logs' fsyncs: {synced}"
    assert {"recovery-point-offset-checkpoint.tmp", "log-start-offset-checkpoint.tmp",
            f"{CLEAN_SHUTDOWN_FILE}.tmp"} <= synced
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()

    again, reopened = reopened_busy(tmp_path)
    assert 7 + 1 in reopened.producer_state.entries, "the producer came back from the snapshot"
    again.close(clean=True)
    assert len(syncfs.files_at_sync) == 1, "nothing was written since the last close: no syncfs"
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


def test_failed_syncfs_at_close_leaves_no_clean_shutdown_marker(tmp_path: Path, syncfs: SyncfsSpy) -> None:
    manager = busy_manager(tmp_path)
    syncfs.failing = True

    manager.close(clean=True)

    assert len(syncfs.files_at_sync) == 1 and not syncfs.failing, "the syncfs that fails was attempted"
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists(), "the next start must recover"
    again = LogManager(tmp_path, LogConfig(), ManualClock(NOW))
    again.load()
    for partition in (0, 1):
        reopened = again.partition("busy", partition)
        assert reopened is not None and reopened.log_end_offset == 60
    again.close()


def test_many_partitions_with_data_close_cleanly_near_the_descriptor_limit(tmp_path: Path) -> None:
    """Each partition with data holds its log's descriptor; sealing at close opens its time index too.
    Opening all those before closing any ran out of descriptors at 10,000 partitions (ulimit 20,000),
    so the clean-shutdown marker was never written and the next start recovered every log."""
    resource = pytest.importorskip("resource")
    partitions = 300
    manager = LogManager(tmp_path, LogConfig(), ManualClock(NOW))
    manager.load()
    manager.create_topic("many", partitions)
    for partition in range(partitions):
        log = manager.partition("many", partition)
        assert log is not None
        log.append(batch(1), NOW)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    in_use = len(os.listdir("/proc/self/fd"))
    # Room for every open descriptor plus a few per close thread, not for a second one per partition.
    resource.setrlimit(resource.RLIMIT_NOFILE, (in_use + partitions // 2, hard))
    try:
        manager.close(clean=True)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    for partition in (0, partitions - 1):
        assert (tmp_path / f"many-{partition}" / f"{1:020d}.snapshot").exists()
