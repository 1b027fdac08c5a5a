"""The log cleaner (storage/cleaner.py): what compaction keeps, transactions, the crash-safe swap."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from minikafka.protocol.records import (
    BatchHeader,
    Record,
    build_batch,
    decode_batch,
    iter_whole_batches,
)
from minikafka.storage.cleaner import (
    CLEANER_CHECKPOINT_FILE,
    CRASH_POINTS,
    LogCleaner,
    LogToClean,
    cleanable_offsets,
)
from minikafka.storage.clock import ManualClock
from minikafka.storage.config import LogConfig, resolve_log_config
from minikafka.storage.errors import InvalidConfig, PolicyViolation, RecordValidationError
from minikafka.storage.log import PartitionLog
from minikafka.storage.manager import LogManager

NOW = 1_700_000_000_000
DAY_MS = 86_400_000


def compacted(**overrides: str) -> LogConfig:
    configs = {"cleanup.policy": "compact", "segment.bytes": "400", "min.cleanable.dirty.ratio": "0.01"}
    configs.update(overrides)
    return resolve_log_config(LogConfig(), configs)


class Source:
    """The LogManager surface the cleaner uses, over one log."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log

    def partition_logs(self) -> list[tuple[tuple[str, int], PartitionLog]]:
        return [(("t", 0), self.log)]

    def partition(self, topic: str, partition: int) -> PartitionLog | None:
        return self.log if (topic, partition) == ("t", 0) else None


def open_log(path: Path, config: LogConfig, *, clean: bool = True) -> PartitionLog:
    log = PartitionLog(path, "t", 0, config, NOW)
    log.open(recovery_point=0, log_start_offset=0, clean=clean)
    return log


def append(log: PartitionLog, items: list[tuple[bytes | None, bytes | None]], ts: int = NOW,
           **batch_args: object) -> None:
    records = [Record(key, value, (), ts) for key, value in items]
    log.append(build_batch(records, **batch_args), ts)  # type: ignore[arg-type]


def read_all(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every data record, fetched through PartitionLog.read as a consumer does,
    stepping over gaps by each batch's last offset."""
    out: list[tuple[int, bytes | None, bytes | None]] = []
    offset = log.log_start_offset
    for _ in range(100_000):
        if offset >= log.log_end_offset:
            return out
        data = log.read(offset, 1 << 20).records
        batches = list(iter_whole_batches(data))
        assert batches, f"no whole batch at offset {offset}"
        for pos, header in batches:
            if not header.is_control:
                out.extend((r.offset, r.key, r.value) for r in decode_batch(data, pos).records if r.offset >= offset)
            offset = max(offset, header.next_offset)
    raise AssertionError("the log did not end")


def headers(log: PartitionLog) -> list[BatchHeader]:
    return [header for segment in log.segments for _pos, header in segment.iter_headers()]


def clean(log: PartitionLog, clock: ManualClock) -> LogCleaner:
    cleaner = LogCleaner(Source(log), log.dir.parent, clock)
    cleaner.clean_now()
    return cleaner


Row = tuple[int, bytes | None, bytes | None]


def last_values(records: list[Row], below: int) -> dict[bytes, tuple[int, bytes | None]]:
    last: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, key, value in records:
        if offset < below and key is not None:
            last[key] = (offset, value)
    return last


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


def test_keeps_the_last_record_per_key_and_never_touches_the_active_segment(tmp_path: Path,
                                                                             clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", compacted())
    for round_ in range(12):
        append(log, [(b"k%d" % (i % 3), b"v%d-%d" % (round_, i)) for i in range(4)])
    assert len(log.segments) > 3
    before = read_all(log)
    uncleanable = log.active.base_offset
    active_bytes = log.active.read(0, log.active.size)

    cleaner = clean(log, clock)

    after = read_all(log)
    assert cleaner.rounds == 1
    # Below the first uncleanable offset: exactly each key's last record there, at its own offset.
    cleaned = [r for r in after if r[0] < uncleanable]
    last = last_values(before, uncleanable)
    assert sorted(cleaned) == sorted((offset, key, value) for key, (offset, value) in last.items())
    assert [r for r in after if r[0] >= uncleanable] == [r for r in before if r[0] >= uncleanable]
    assert log.active.read(0, log.active.size) == active_bytes
    offsets = [r[0] for r in after]
    assert offsets == sorted(set(offsets))
    assert log.log_end_offset == 48
    checkpoint = (tmp_path / CLEANER_CHECKPOINT_FILE).read_text().split()
    assert checkpoint[-3:] == ["t", "0", str(uncleanable)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(st.tuples(st.sampled_from([b"a", b"b", b"c", b"d", b"e"]),
                                           st.one_of(st.none(), st.binary(min_size=1, max_size=30))),
                                 min_size=1, max_size=6), min_size=1, max_size=40),
       segment_bytes=st.integers(200, 2000), rounds=st.integers(1, 3))
def test_property_cleaning_keeps_exactly_the_last_value_of_each_key(tmp_path_factory: pytest.TempPathFactory,
                                                                     batches: list[list[tuple[bytes, bytes | None]]],
                                                                     segment_bytes: int, rounds: int) -> None:
    clock = ManualClock(NOW)
    log = open_log(tmp_path_factory.mktemp("p") / "t-0", compacted(**{"segment.bytes": str(segment_bytes)}))
    chunk = max(1, len(batches) // rounds)
    history: list[tuple[int, bytes | None, bytes | None]] = []
    for start in range(0, len(batches), chunk):
        for items in batches[start : start + chunk]:
            append(log, list(items))
        history = _merge(history, read_all(log))
        uncleanable = log.active.base_offset
        before_tail = [r for r in read_all(log) if r[0] >= uncleanable]
        clean(log, clock)
        after = read_all(log)
        offsets = [r[0] for r in after]
        assert offsets == sorted(set(offsets)), "offsets strictly increase"
        # Every key's last record below the first uncleanable offset survives with its value (a
        # tombstone stays: its delete horizon is a day away), and no older record of it does.
        last = last_values(history, uncleanable)
        kept = {key: (offset, value) for offset, key, value in after if offset < uncleanable and key is not None}
        assert kept == last
        assert len([r for r in after if r[0] < uncleanable]) == len(last)
        assert [r for r in after if r[0] >= uncleanable] == before_tail, "nothing past the uncleanable offset moved"
    log.close()


def _merge(history: list[tuple[int, bytes | None, bytes | None]],
           now: list[tuple[int, bytes | None, bytes | None]]) -> list[tuple[int, bytes | None, bytes | None]]:
    """Everything ever appended: the history so far plus what the log holds past it."""
    seen = history[-1][0] if history else -1
    return history + [r for r in now if r[0] > seen]


def test_tombstones_get_a_delete_horizon_then_go(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", compacted(**{"delete.retention.ms": str(DAY_MS)}))
    for i in range(6):
        append(log, [(b"a", b"a%d" % i), (b"b", b"b%d" % i)])
    append(log, [(b"a", None)])
    for i in range(6):
        append(log, [(b"c", b"c%d" % i)])
    cleaner = clean(log, clock)
    assert (b"a", None) in [(k, v) for _o, k, v in read_all(log)]
    tombstone_batches = [h for h in headers(log) if h.delete_horizon_ms is not None]
    assert [h.delete_horizon_ms for h in tombstone_batches] == [NOW + DAY_MS]

    clock.advance(DAY_MS + 1)
    for i in range(6):  # new dirty data so the log is cleaned again
        append(log, [(b"c", b"again%d" % i)], ts=NOW + DAY_MS)
    cleaner.clean_now()
    assert b"a" not in {k for _o, k, _v in read_all(log)}
    assert (b"b", b"b5") in [(k, v) for _o, k, v in read_all(log)]


def test_aborted_transactions_and_their_markers_are_removed(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", compacted(**{"delete.retention.ms": "1000"}))
    pid, epoch = 7, 0
    sequence = 0

    def txn(items: list[tuple[bytes, bytes]], commit: bool) -> None:
        nonlocal sequence
        append(log, items, producer_id=pid, producer_epoch=epoch, base_sequence=sequence, transactional=True)
        sequence += len(items)
        log.append_control(pid, epoch, 0, commit, clock.now_ms())

    txn([(b"k1", b"committed-1")], commit=True)
    txn([(b"k1", b"aborted"), (b"k2", b"aborted")], commit=False)
    txn([(b"k3", b"committed-3")], commit=True)
    for i in range(8):
        append(log, [(b"filler", b"%d" % i)])
    assert log.collect_aborted(0, log.log_end_offset)

    cleaner = clean(log, clock)
    values = [(k, v) for _o, k, v in read_all(log)]
    assert (b"k1", b"committed-1") in values and (b"k3", b"committed-3") in values
    assert b"aborted" not in {v for _k, v in values}
    markers = [h for h in headers(log) if h.is_control]
    # The abort marker stays (its data was removed in this cleaning, and so is its index entry), with
    # the commit markers of transactions whose data is still there.
    assert len(markers) == 3
    assert [t.producer_id for t in log.collect_aborted(0, log.log_end_offset)] == [pid]

    clock.advance(2000)
    for i in range(8):
        append(log, [(b"filler", b"again%d" % i)], ts=NOW + 2000)
    cleaner.clean_now()
    clock.advance(2000)
    for i in range(8):
        append(log, [(b"filler", b"third%d" % i)], ts=NOW + 4000)
    cleaner.clean_now()
    markers = [h for h in headers(log) if h.is_control and h.records_count]
    # Only the markers of committed transactions whose data remains are left.
    assert len(markers) == 2
    assert log.collect_aborted(0, log.log_end_offset) == []
    log.close()
    reopened = open_log(tmp_path / "t-0", log.config, clean=False)
    assert [(k, v) for _o, k, v in read_all(reopened) if k in (b"k1", b"k3")] == [(b"k1", b"committed-1"),
                                                                                  (b"k3", b"committed-3")]


def test_the_batch_with_a_producers_last_sequence_is_kept_empty(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", compacted())
    pid = 11
    for sequence in range(5):
        append(log, [(b"same", b"v%d" % sequence)], producer_id=pid, producer_epoch=0, base_sequence=sequence)
    for i in range(10):
        append(log, [(b"same", b"plain%d" % i)])  # a later write of the same key by another producer
    last_offset = log.producer_state.last_entry(pid).last_offset  # type: ignore[union-attr]
    clean(log, clock)
    kept = [h for h in headers(log) if h.producer_id == pid]
    assert [(h.last_offset, h.records_count, h.last_sequence) for h in kept] == [(last_offset, 0, 4)]
    log.close()
    reopened = open_log(tmp_path / "t-0", log.config, clean=False)
    entry = reopened.producer_state.last_entry(pid)
    assert entry is not None and entry.last_seq == 4
    # The producer's next batch is in sequence: its state survived compaction.
    append(reopened, [(b"same", b"next")], producer_id=pid, producer_epoch=0, base_sequence=5)


def test_min_compaction_lag_keeps_recent_segments_dirty(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", compacted(**{"min.compaction.lag.ms": "60000"}))
    for i in range(12):
        append(log, [(b"k", b"v%d" % i)])
    first_dirty, uncleanable, _reset = cleanable_offsets(log, None, clock.now_ms())
    assert (first_dirty, uncleanable) == (0, 0), "every segment is within min.compaction.lag.ms"
    cleaner = clean(log, clock)
    assert cleaner.rounds == 0 and len(read_all(log)) == 12
    clock.advance(60_001)
    cleaner.clean_now()
    assert cleaner.rounds == 1 and len(read_all(log)) < 12


def test_max_compaction_lag_forces_a_cleaning_under_the_dirty_ratio(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", compacted(**{"min.cleanable.dirty.ratio": "0.9",
                                                  "max.compaction.lag.ms": "120000"}))
    for i in range(30):
        append(log, [(b"k%d" % i, b"v")])  # distinct keys: the cleaned log stays as large
    cleaner = clean(log, clock)
    assert cleaner.rounds == 1
    for i in range(6):
        append(log, [(b"k0", b"again%d" % i)], ts=NOW + 1000)
    cleaner.clean_now()
    assert cleaner.rounds == 1, "the dirty ratio is under 0.9 and max.compaction.lag.ms is not reached"
    clock.advance(121_001)
    cleaner.clean_now()
    assert cleaner.rounds == 2, "max.compaction.lag.ms forces the cleaning"


def test_produce_without_key_to_a_compacted_topic_is_refused_per_record(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", compacted())
    with pytest.raises(RecordValidationError) as refused:
        append(log, [(b"k", b"1"), (None, b"2"), (None, b"3")])
    assert refused.value.record_errors == [
        (1, "Compacted topic cannot accept message without key in topic partition t-0"),
        (2, "Compacted topic cannot accept message without key in topic partition t-0")]
    assert str(refused.value).startswith("One or more records have been rejected due to 2 record errors in total, "
                                         "and only showing the first three errors at most: [RecordError(batchIndex=1")
    assert log.log_end_offset == 0


def test_retention_leaves_a_compact_only_topic_alone(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", compacted(**{"retention.ms": "1"}))
    for i in range(10):
        append(log, [(b"k%d" % i, b"v")])
    assert log.apply_retention(NOW + DAY_MS) == 0
    both = open_log(tmp_path / "u-0", compacted(**{"retention.ms": "1", "cleanup.policy": "compact,delete"}))
    for i in range(10):
        append(both, [(b"k%d" % i, b"v")])
    assert both.apply_retention(NOW + DAY_MS) > 0


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_crash_at_any_step_of_the_swap_leaves_a_readable_log_with_the_kept_data(tmp_path: Path, clock: ManualClock,
                                                                                 point: str) -> None:
    log = open_log(tmp_path / "t-0", compacted())
    for round_ in range(12):
        append(log, [(b"k%d" % (i % 3), b"v%d-%d" % (round_, i)) for i in range(4)])
    before = read_all(log)
    crashed = tmp_path / "crashed"

    class Killed(Exception):
        pass

    def kill_here(reached: str) -> None:
        # What a kill -9 leaves is what the files hold at this instant.
        shutil.copytree(log.dir, crashed / "t-0")
        raise Killed(reached)

    cleaner = LogCleaner(Source(log), tmp_path, clock)
    cleaner.crash_point_name = point
    cleaner.on_crash_point = kill_here
    cleaner.clean_now()
    assert (crashed / "t-0").exists()
    suffixes = {p.name.split(".", 1)[1] for p in (crashed / "t-0").iterdir() if "." in p.name}
    expected = {"after_cleaned": "log.cleaned", "after_swap": "log.swap", "after_delete": "log.swap"}[point]
    assert expected in suffixes

    recovered = open_log(crashed / "t-0", log.config, clean=False)
    after = read_all(recovered)
    uncleanable = log.active.base_offset
    assert last_values(after, uncleanable) == last_values(before, uncleanable)
    assert [r for r in after if r[0] >= uncleanable] == [r for r in before if r[0] >= uncleanable]
    below = [r for r in after if r[0] < uncleanable]
    if point == "after_cleaned":  # nothing committed: the old segments are all there
        assert below == [r for r in before if r[0] < uncleanable]
    else:  # the first group's swap had committed: its cleaned segment replaced (part of) it
        assert len(below) < len([r for r in before if r[0] < uncleanable])
    assert not [p for p in (crashed / "t-0").iterdir() if p.name.endswith((".cleaned", ".swap"))]
    # And the recovered log is cleaned again from scratch without trouble.
    again = LogCleaner(Source(recovered), crashed, clock)
    again.clean_now()
    assert last_values(read_all(recovered), uncleanable) == last_values(before, uncleanable)


def test_log_manager_cleaner_forgets_a_deleted_topic(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager(tmp_path / "data", LogConfig(), clock)
    manager.load()
    manager.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": "300",
                                  "min.cleanable.dirty.ratio": "0.01"})
    log = manager.partition("c", 0)
    assert log is not None
    for i in range(20):
        append(log, [(b"k", b"%d" % i)])
    assert manager.cleaner.clean_now() == 1
    assert manager.cleaner.checkpoints[("c", 0)] == log.active.base_offset
    manager.delete_topic("c")
    assert ("c", 0) not in manager.cleaner.checkpoints
    manager.close()


def test_log_to_clean_ratio() -> None:
    ltc = LogToClean("t", 0, None, 0, 10, False, 300, 100)  # type: ignore[arg-type]
    assert ltc.total_bytes == 400 and ltc.cleanable_ratio == 0.25


def test_segments_removed_while_cleaning_abort_that_cleaning_only(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", compacted())
    for round_ in range(12):
        append(log, [(b"k%d" % (i % 3), b"v%d-%d" % (round_, i)) for i in range(4)])
    cleaner = LogCleaner(Source(log), tmp_path, clock)
    steps = cleaner.run_until_idle(max_rounds=1)
    for _ in range(5):  # into the offset map of the first segments
        assert next(steps) is None
    assert cleaner.in_progress == {("t", 0)}
    new_start = log.segments[2].base_offset
    log.delete_records_before(new_start)  # DeleteRecords removes segments the cleaner reads
    with pytest.raises(StopIteration) as finished:
        while True:
            step = next(steps)
            if step is not None:
                step.run()
    assert finished.value.value == 0 and cleaner.in_progress == set()
    assert not list(log.dir.glob("*.cleaned")) and not list(log.dir.glob("*.swap"))
    before = read_all(log)
    assert cleaner.clean_now() == 1, "not marked uncleanable: the next run cleans it"
    uncleanable = log.active.base_offset
    assert last_values(read_all(log), uncleanable) == last_values(before, uncleanable)


def test_min_compaction_lag_over_max_is_refused_as_kafka_does() -> None:
    with pytest.raises(InvalidConfig, match=r"conflict topic config setting min.compaction.lag.ms \(60000\) > "
                                            r"max.compaction.lag.ms \(1\)"):
        resolve_log_config(LogConfig(), {"min.compaction.lag.ms": "60000", "max.compaction.lag.ms": "1"})


def test_segment_ms_rolls_so_old_data_becomes_cleanable(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", compacted(**{"segment.bytes": "1000000", "segment.ms": "60000"}))
    for i in range(5):
        append(log, [(b"k", b"v%d" % i)])
    assert len(log.segments) == 1 and clean(log, clock).rounds == 0, "the active segment is never cleaned"
    append(log, [(b"k", b"later")], ts=NOW + 60_001)  # past segment.ms: the old segment rolls first
    assert len(log.segments) == 2
    clean(log, clock)
    assert [(k, v) for _o, k, v in read_all(log)] == [(b"k", b"v4"), (b"k", b"later")]


def test_a_full_offset_map_cleans_in_several_rounds(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path / "t-0", compacted())
    items = [(b"k%02d" % (i % 30), b"v%d" % i) for i in range(120)]
    for start in range(0, len(items), 3):
        append(log, items[start : start + 3])
    before = read_all(log)
    uncleanable = log.active.base_offset
    cleaner = LogCleaner(Source(log), tmp_path, clock, map_entries=12)
    cleaner.clean_now()
    assert cleaner.rounds > 1, "each round maps at most 10 keys"
    after = read_all(log)
    assert last_values(after, uncleanable) == last_values(before, uncleanable)
    assert len([r for r in after if r[0] < uncleanable]) < len([r for r in before if r[0] < uncleanable])
    assert cleaner.checkpoints[("t", 0)] == uncleanable


def test_delete_records_on_a_compact_only_topic_is_a_policy_violation(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager(tmp_path / "data", LogConfig(), clock)
    manager.load()
    manager.create_topic("c", 1, {"cleanup.policy": "compact"})
    manager.create_topic("cd", 1, {"cleanup.policy": "compact,delete"})
    for topic in ("c", "cd"):
        log = manager.partition(topic, 0)
        assert log is not None
        append(log, [(b"k", b"v"), (b"k", b"w")])
    with pytest.raises(PolicyViolation, match="Records of partition c-0 can not be deleted due to the configured "
                                              "policy"):
        manager.delete_records("c", 0, 1)
    assert manager.delete_records("cd", 0, 1) == 1
    manager.close()


class FullDisk:
    """A FileWriter that fails every write with ENOSPC while `full`."""

    def __init__(self) -> None:
        self.full = False

    def write(self, fd: int, data: memoryview) -> int:
        if self.full:
            raise OSError(errno.ENOSPC, "No space left on device")
        return os.write(fd, data)


def test_a_full_disk_fails_the_cleaning_and_the_next_run_retries(tmp_path: Path, clock: ManualClock) -> None:
    disk = FullDisk()
    log = PartitionLog(tmp_path / "t-0", "t", 0, compacted(), NOW, disk)
    log.open(recovery_point=0, log_start_offset=0, clean=True)
    for round_ in range(12):
        append(log, [(b"k%d" % (i % 3), b"v%d-%d" % (round_, i)) for i in range(4)])
    before = read_all(log)
    uncleanable = log.active.base_offset
    disk.full = True
    cleaner = clean(log, clock)
    # Groups cleaned to nothing (no write) may have been swapped in before a write failed: what is
    # left is still each key's last value.
    assert cleaner.rounds == 0 and last_values(read_all(log), uncleanable) == last_values(before, uncleanable)
    assert not list(log.dir.glob("*.cleaned")) and not list(log.dir.glob("*.swap"))
    disk.full = False
    assert cleaner.clean_now() == 1, "not marked uncleanable"
    after = read_all(log)
    assert last_values(after, uncleanable) == last_values(before, uncleanable)
    assert len([r for r in after if r[0] < uncleanable]) == len(last_values(before, uncleanable))
