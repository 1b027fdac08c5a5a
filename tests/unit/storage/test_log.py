"""PartitionLog and LogManager: append/read, indexes, roll, retention, recovery, metadata."""

from __future__ import annotations

import errno
import gc
import os
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from minikafka.protocol.records import BatchHeader, Record, build_batch, decode_all, iter_batches
from minikafka.protocol.regions import FileRegion
from minikafka.storage.clock import ManualClock
from minikafka.storage.config import LogConfig, log_config_from_broker_properties, resolve_log_config
from minikafka.storage.errors import (
    InvalidConfig,
    InvalidPartitions,
    InvalidTimestamp,
    InvalidTopic,
    OffsetOutOfRange,
    RecordTooLarge,
    TopicAlreadyExists,
)
from minikafka.storage.files import write_fully, write_parts_fully
from minikafka.storage.log import REGION_MIN_BYTES, PartitionLog
from minikafka.storage.manager import CLEAN_SHUTDOWN_FILE, LogManager

from tests.support.descriptors import open_descriptor_targets

NOW = 1_700_000_000_000


def batch(values: list[bytes], ts: int = NOW) -> bytes:
    return build_batch([Record(None, v, (), ts + i) for i, v in enumerate(values)])


def open_log(path: Path, config: LogConfig | None = None, *, clean: bool = True,
             recovery_point: int = 0) -> PartitionLog:
    log = PartitionLog(path, "t", 0, config or LogConfig(), NOW)
    log.open(recovery_point=recovery_point, log_start_offset=0, clean=clean)
    return log


def read_values(log: PartitionLog, start: int = 0) -> list[tuple[int, bytes | None]]:
    """Every record from `start` to the end, reading as a consumer would (one fetch at a time)."""
    out: list[tuple[int, bytes | None]] = []
    offset = start
    for _ in range(10_000):
        if offset >= log.log_end_offset:
            break
        data = log.read(offset, 1 << 20).records
        whole = data[: sum(h.size for _p, h in _whole_batches(data))]
        for decoded in decode_all(whole):
            for record in decoded.records:
                if record.offset >= offset:
                    out.append((record.offset, record.value))
        offset = out[-1][0] + 1 if out else offset + 1
    return out


def _whole_batches(data: bytes) -> list[tuple[int, BatchHeader]]:
    result = []
    pos = 0
    while pos + 61 <= len(data):
        header = BatchHeader.parse_header_only(data, pos)
        if pos + header.size > len(data):
            break
        result.append((pos, header))
        pos += header.size
    return result


def test_offsets_are_assigned_consecutively(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    first = log.append(batch([b"a", b"b"]), NOW)
    second = log.append(batch([b"c"]), NOW)
    assert (first.base_offset, first.last_offset, second.base_offset) == (0, 1, 2)
    assert log.log_end_offset == log.high_watermark == 3
    assert read_values(log) == [(0, b"a"), (1, b"b"), (2, b"c")]
    stored = log.read(0, 1 << 20).records
    assert [h.base_offset for _p, h in iter_batches(stored)] == [0, 2]


def test_read_bounds_and_out_of_range(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(batch([b"a"]), NOW)
    assert log.read(1, 100).records == b""
    with pytest.raises(OffsetOutOfRange):
        log.read(2, 100)
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 100)


def test_first_batch_is_returned_whole_even_above_max_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    big = batch([b"x" * 5000])
    log.append(big, NOW)
    log.append(batch([b"y"]), NOW)
    assert len(log.read(0, 10).records) == len(big)
    assert len(log.read(0, 10, min_one_batch=False).records) == 10


def test_upper_bound_stops_before_batches_at_or_past_it(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(batch([b"a"]), NOW)
    log.append(batch([b"b"]), NOW)
    data = log.read(0, 1 << 20, upper_bound=1).records
    assert [h.base_offset for _p, h in iter_batches(data)] == [0]


def test_record_too_large(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(max_message_bytes=100))
    with pytest.raises(RecordTooLarge):
        log.append(batch([b"x" * 200]), NOW)
    assert log.log_end_offset == 0


def test_create_time_bounds_are_enforced_but_not_for_log_append_time(tmp_path: Path) -> None:
    hour = 3_600_000
    log = open_log(tmp_path / "t-0", LogConfig(message_timestamp_before_max_ms=2 * hour))
    with pytest.raises(InvalidTimestamp):
        log.append(batch([b"late"], ts=NOW + hour + 1), NOW)  # after.max.ms defaults to one hour
    with pytest.raises(InvalidTimestamp):
        log.append(batch([b"early"], ts=NOW - 2 * hour - 1), NOW)
    assert log.log_end_offset == 0
    log.append(batch([b"edge"], ts=NOW + hour), NOW)
    log.append(batch([b"edge"], ts=NOW - 2 * hour), NOW)
    assert log.log_end_offset == 2
    stamped = open_log(tmp_path / "t-1", LogConfig(message_timestamp_type="LogAppendTime"))
    stamped.append(batch([b"any"], ts=NOW + 10 * hour), NOW)
    assert stamped.log_end_offset == 1


def test_roll_by_size_and_sparse_index(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=1000, index_interval_bytes=100))
    for i in range(40):
        log.append(batch([bytes([i]) * 50]), NOW)
    assert len(log.segments) > 3
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.log"))[0] == "00000000000000000000.log"
    index_bytes = (tmp_path / "t-0" / "00000000000000000000.index").read_bytes()
    assert len(index_bytes) % 8 == 0 and len(index_bytes) > 0
    assert [v for _o, v in read_values(log)] == [bytes([i]) * 50 for i in range(40)]
    assert list((tmp_path / "t-0").glob("*.snapshot")), "a roll takes a producer-state snapshot"


def test_roll_by_time_uses_the_first_batch_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(segment_ms=1000))
    log.append(batch([b"a"], ts=NOW), NOW)
    log.append(batch([b"b"], ts=NOW + 10), NOW + 500)
    assert len(log.segments) == 1
    log.append(batch([b"c"], ts=NOW + 2000), NOW + 2000)
    assert len(log.segments) == 2 and log.segments[1].base_offset == 2


def test_retention_by_time_and_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=200, retention_ms=10_000))
    for i in range(5):
        log.append(batch([b"v" * 100], ts=NOW + i), NOW)
    log.append(batch([b"v" * 100], ts=NOW + 15_000), NOW)  # the active segment's record, younger
    segments = len(log.segments)
    assert log.apply_retention(NOW + 5_000) == 0
    assert log.apply_retention(NOW + 20_000) == segments - 1
    assert log.log_start_offset == log.segments[0].base_offset == 5
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 100)
    # Once the active segment's records expire too, Kafka rolls an empty segment at the log end and
    # deletes the expired one: nothing is served, and the offsets go on where they were.
    assert log.apply_retention(NOW + 30_000) == 1
    assert log.log_start_offset == log.log_end_offset == 6
    assert [segment.base_offset for segment in log.segments] == [6]
    assert log.apply_retention(NOW + 40_000) == 0  # an empty active segment is never deleted
    log.append(batch([b"w"], ts=NOW + 40_000), NOW + 40_000)
    assert read_values(log, 6)[0][0] == 6
    sized = open_log(tmp_path / "u-0", LogConfig(segment_bytes=200, retention_bytes=400))
    for _ in range(6):
        sized.append(batch([b"v" * 100]), NOW)
    sized.apply_retention(NOW)
    assert sized.size_bytes - sized.segments[0].size < 400
    assert sized.log_start_offset > 0


def test_delete_records_moves_log_start(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=200))
    for _ in range(6):
        log.append(batch([b"v" * 100]), NOW)
    assert log.delete_records_before(3) == 3
    assert log.segments[0].base_offset <= 3
    assert read_values(log, 3)[0][0] == 3
    with pytest.raises(OffsetOutOfRange):
        log.delete_records_before(99)


def test_timestamp_lookups(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=300))
    log.append(build_batch([Record(None, b"a", (), 100), Record(None, b"b", (), 300)]), NOW)
    log.append(build_batch([Record(None, b"c", (), 200)]), NOW)
    log.append(build_batch([Record(None, b"d", (), 900), Record(None, b"e", (), 400)]), NOW)
    assert log.offset_for_timestamp(0) == (0, 100)
    assert log.offset_for_timestamp(250) == (1, 300)
    assert log.offset_for_timestamp(500) == (3, 900)
    assert log.offset_for_timestamp(901) is None
    assert log.max_timestamp_offset() == (3, 900)


def test_reopen_after_clean_close_keeps_everything(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=500, index_interval_bytes=50))
    for i in range(30):
        log.append(batch([str(i).encode()]), NOW)
    log.close()
    again = open_log(tmp_path / "t-0", LogConfig(segment_bytes=500, index_interval_bytes=50))
    assert again.log_end_offset == 30
    assert [v for _o, v in read_values(again)] == [str(i).encode() for i in range(30)]
    again.append(batch([b"next"]), NOW)
    assert again.log_end_offset == 31


def _last_log_file(directory: Path) -> Path:
    return sorted(directory.glob("*.log"))[-1]


@pytest.mark.parametrize("damage", ["torn", "crc", "garbage"])
def test_recovery_truncates_a_damaged_tail(tmp_path: Path, damage: str) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory)
    for i in range(10):
        log.append(batch([str(i).encode() * 10]), NOW)
    for segment in log.segments:
        segment.close()  # a crash: no seal, no snapshot, no marker
    path = _last_log_file(directory)
    data = bytearray(path.read_bytes())
    size_of_one = len(data) // 10
    if damage == "torn":
        data = data[: len(data) - size_of_one // 2]
    elif damage == "crc":
        data[9 * size_of_one + 70] ^= 0xFF
    else:
        data += os.urandom(37)
    path.write_bytes(bytes(data))
    recovered = open_log(directory, clean=False)
    expected = 10 if damage == "garbage" else 9
    assert recovered.log_end_offset == expected
    assert [v for _o, v in read_values(recovered)] == [str(i).encode() * 10 for i in range(expected)]
    recovered.append(batch([b"after"]), NOW)
    assert read_values(recovered)[-1] == (expected, b"after")


def test_truncated_or_missing_index_is_rebuilt(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    config = LogConfig(index_interval_bytes=10)
    log = open_log(directory, config)
    for i in range(20):
        log.append(batch([str(i).encode()]), NOW)
    log.close()
    index = directory / "00000000000000000000.index"
    good = index.read_bytes()
    index.write_bytes(good[:-3])
    reopened = open_log(directory, config)
    assert reopened.log_end_offset == 20
    assert index.read_bytes() == good
    reopened.close()
    index.unlink()
    again = open_log(directory, config)
    assert [v for _o, v in read_values(again)][-1] == b"19"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(1, 5), min_size=1, max_size=25), segment_bytes=st.integers(150, 2000),
       cut=st.floats(0, 1))
def test_property_appends_read_back_and_survive_a_cut(tmp_path_factory: pytest.TempPathFactory,
                                                       sizes: list[int], segment_bytes: int, cut: float) -> None:
    directory = tmp_path_factory.mktemp("p") / "t-0"
    config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=64)
    log = open_log(directory, config)
    expected: list[bytes] = []
    for n, size in enumerate(sizes):
        values = [f"{n}-{i}".encode() for i in range(size)]
        log.append(batch(values), NOW)
        expected.extend(values)
    assert [v for _o, v in read_values(log)] == expected
    assert [o for o, _v in read_values(log)] == list(range(len(expected)))
    for segment in log.segments:
        segment.close()
    path = _last_log_file(directory)
    data = path.read_bytes()
    keep = int(len(data) * cut)
    path.write_bytes(data[:keep])
    whole_bytes = 0
    kept_records = 0
    for _pos, header in _whole_batches(data):
        if whole_bytes + header.size > keep:
            break
        whole_bytes += header.size
        kept_records = header.next_offset
    base = int(path.name.split(".")[0])
    recovered = open_log(directory, config, clean=False)
    assert recovered.log_end_offset == (kept_records if kept_records else base)
    assert [v for _o, v in read_values(recovered)] == expected[: recovered.log_end_offset]


def test_manager_persists_topics_and_recovers(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    manager = LogManager(tmp_path, LogConfig(), clock)
    manager.load()
    meta = manager.create_topic("orders", 2, {"retention.ms": "1000"})
    log = manager.partition("orders", 1)
    assert log is not None
    log.append(batch([b"a", b"b"]), NOW)
    with pytest.raises(TopicAlreadyExists):
        manager.create_topic("orders", 1)
    with pytest.raises(InvalidTopic):
        manager.create_topic("bad/name", 1)
    with pytest.raises(InvalidPartitions):
        manager.create_topic("zero", 0)
    with pytest.raises(InvalidConfig):
        manager.create_topic("cfg", 1, {"retention.ms": "soon"})
    manager.create_partitions("orders", 3)
    manager.close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert (tmp_path / "meta.properties").read_text().count("cluster.id=") == 1
    assert (tmp_path / "orders-1" / "partition.metadata").read_text().startswith("version: 0\ntopic_id: ")

    reopened = LogManager(tmp_path, LogConfig(), clock)
    reopened.load()
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    again = reopened.topic("orders")
    assert again is not None and again.topic_id == meta.topic_id and again.partitions == 3
    assert again.configs == {"retention.ms": "1000"}
    assert reopened.partition("orders", 1).log_end_offset == 2  # type: ignore[union-attr]
    assert reopened.cluster_id == manager.cluster_id
    reopened.delete_topic("orders")
    assert not (tmp_path / "orders-0").exists()


def test_config_resolution_and_broker_precedence() -> None:
    assert resolve_log_config(LogConfig(), {"segment.bytes": "4096"}).segment_bytes == 4096
    with pytest.raises(InvalidConfig):
        resolve_log_config(LogConfig(), {"no.such": "1"})
    with pytest.raises(InvalidConfig):
        resolve_log_config(LogConfig(), {"cleanup.policy": "shred"})
    props = {"log.retention.hours": "1", "log.retention.minutes": "2"}
    assert log_config_from_broker_properties(props).retention_ms == 120_000
    props["log.retention.ms"] = "5"
    assert log_config_from_broker_properties(props).retention_ms == 5
    assert log_config_from_broker_properties({"log.roll.hours": "2"}).segment_ms == 7_200_000


def test_old_timestamps_do_not_roll_every_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(segment_ms=1000))
    old = NOW - 30 * 86_400_000
    for i in range(5):
        log.append(batch([b"x"], ts=old + i), NOW)
    assert len(log.segments) == 1


def idempotent_batch(pid: int, epoch: int, seq: int, values: list[bytes]) -> bytes:
    return build_batch([Record(None, v, (), NOW) for v in values], producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq)


def test_retried_batch_returns_the_original_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    first = log.append(idempotent_batch(7, 0, 0, [b"a", b"b"]), NOW)
    log.append(idempotent_batch(7, 0, 2, [b"c"]), NOW)
    retry = log.append(idempotent_batch(7, 0, 0, [b"a", b"b"]), NOW)
    assert retry.duplicate and (retry.base_offset, retry.last_offset) == (first.base_offset, first.last_offset)
    assert log.log_end_offset == 3


def test_sequence_gap_is_rejected_without_writing(tmp_path: Path) -> None:
    from minikafka.storage.producer_state import OutOfOrderSequence

    log = open_log(tmp_path / "t-0")
    log.append(idempotent_batch(7, 0, 0, [b"a"]), NOW)
    with pytest.raises(OutOfOrderSequence):
        log.append(idempotent_batch(7, 0, 5, [b"x"]), NOW)
    assert log.log_end_offset == 1


@pytest.mark.parametrize("clean", [True, False])
def test_producer_state_survives_reopen(tmp_path: Path, clean: bool) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory)
    for seq in range(4):
        log.append(idempotent_batch(9, 1, seq, [str(seq).encode()]), NOW)
    if clean:
        log.close()
    else:
        for segment in log.segments:
            segment.close()
    again = open_log(directory, clean=clean)
    retry = again.append(idempotent_batch(9, 1, 3, [b"3"]), NOW)
    assert retry.duplicate and retry.base_offset == 3
    again.append(idempotent_batch(9, 1, 4, [b"4"]), NOW)
    assert again.log_end_offset == 5
    assert list(directory.glob("*.snapshot"))


def test_producer_expiry(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(idempotent_batch(11, 0, 0, [b"a"]), NOW)
    assert log.remove_expired_producers(NOW + 1000, 86_400_000) == []
    assert log.remove_expired_producers(NOW + 86_400_000, 86_400_000) == [11]
    log.append(idempotent_batch(11, 0, 42, [b"b"]), NOW)  # KIP-360: no state, any sequence


def test_a_small_segment_without_index_files_reopens_without_recovery(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Below one index interval no offset index entry is ever written, so no `.index` file exists; a
    clean restart must take that as an empty index, not as damage (it re-read every such partition)."""
    from minikafka.storage.segment import LogSegment

    log = open_log(tmp_path / "t-0")
    log.append(batch([b"small"] * 3), NOW)
    log.close(clean=True)
    assert not (tmp_path / "t-0" / f"{0:020d}.index").exists()

    def no_recovery(_segment: LogSegment) -> int:
        raise AssertionError("a clean reopen recovered the segment")

    monkeypatch.setattr(LogSegment, "recover", no_recovery)
    reopened = open_log(tmp_path / "t-0")
    assert reopened.log_end_offset == 3
    assert read_values(reopened) == [(0, b"small"), (1, b"small"), (2, b"small")]
    reopened.close(clean=True)


def test_a_big_segment_missing_its_offset_index_is_recovered(tmp_path: Path) -> None:
    config = LogConfig(index_interval_bytes=256)
    log = open_log(tmp_path / "t-0", config)
    for _ in range(20):
        log.append(batch([b"v" * 100]), NOW)
    log.close(clean=True)
    index = tmp_path / "t-0" / f"{0:020d}.index"
    assert index.stat().st_size > 0
    index.unlink()
    reopened = open_log(tmp_path / "t-0", config)
    assert reopened.log_end_offset == 20
    assert index.exists() and index.stat().st_size > 0, "recovery rebuilt the offset index"
    reopened.close(clean=True)


def _open_index_descriptors() -> int:
    return sum(target.endswith((".index", ".timeindex", ".txnindex")) for target in open_descriptor_targets())


def test_index_descriptors_beyond_the_budget_are_given_back_and_still_flushed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_HELD_INDEX_DESCRIPTORS an index closes its descriptor after each write, so many active
    partitions hold one descriptor each (the log's); their entries still reach the file and the fsync."""
    from minikafka.storage import index

    monkeypatch.setattr(index, "MAX_HELD_INDEX_DESCRIPTORS", 4)
    config = LogConfig(index_interval_bytes=256)
    logs = [open_log(tmp_path / f"t-{number}", config) for number in range(10)]
    before = _open_index_descriptors()
    for _round in range(8):
        for log in logs:
            log.append(batch([b"v" * 100]), NOW)
    assert _open_index_descriptors() - before <= 5, "at most the budget (+1 while writing) stays open"
    synced: list[str] = []
    real_fsync = os.fsync

    def noting_fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", noting_fsync)
    for log in logs:
        log.flush()
    for number in range(10):
        assert str(tmp_path / f"t-{number}" / f"{0:020d}.index") in synced
    for number, log in enumerate(logs):
        log.close(clean=True)
        reopened = open_log(tmp_path / f"t-{number}", config)
        assert reopened.log_end_offset == 8
        assert len(reopened.segments[0].offset_index.offsets) > 0
        reopened.close(clean=True)


@pytest.mark.parametrize("index_interval_bytes", [100, 4096, 100_000])
def test_header_scans_agree_with_the_file_across_read_windows(tmp_path: Path, index_interval_bytes: int) -> None:
    """Headers are read a window at a time: small batches share a window, a batch bigger than a window
    is stepped over, and every offset still finds the batch that holds it."""
    log = open_log(tmp_path / "t-0", LogConfig(index_interval_bytes=index_interval_bytes))
    sizes = [10] * 300 + [50_000] + [10] * 100 + [3_000] * 20 + [10] * 50
    for i, size in enumerate(sizes):
        log.append(batch([bytes([i % 256]) * size, b"x"]), NOW)
    (segment,) = log.segments
    expected = _whole_batches((tmp_path / "t-0" / "00000000000000000000.log").read_bytes())
    assert len(expected) == len(sizes)
    scanned = list(segment.iter_headers())
    assert [(pos, h.base_offset, h.size) for pos, h in scanned] == [(pos, h.base_offset, h.size) for pos, h in expected]
    for pos, header in expected:
        for offset in (header.base_offset, header.last_offset):
            found = segment.find(offset)
            assert found is not None and found[0] == pos
    assert segment.find(expected[-1][1].last_offset + 1) is None
    assert [v for _o, v in read_values(log)][:4] == [bytes([0]) * 10, b"x", bytes([1]) * 10, b"x"]


@pytest.mark.parametrize("damage", ["none", "crc in the last batch"])
def test_recovery_across_read_windows_rebuilds_the_same_indexes(tmp_path: Path, damage: str) -> None:
    """Recovery reads the segment 1 MiB at a time and writes each rebuilt index once: batches that
    straddle a window, one bigger than a window, and a damaged tail give the indexes the appends wrote."""
    from minikafka.storage.segment import RECOVERY_READ_BYTES

    directory = tmp_path / "t-0"
    config = LogConfig(max_message_bytes=4 * RECOVERY_READ_BYTES)
    log = open_log(directory, config)
    values = [os.urandom(300_000) for _ in range(7)] + [os.urandom(RECOVERY_READ_BYTES + 5_000)]
    values += [os.urandom(50) for _ in range(40)] + [b"last" * 100]
    for i, value in enumerate(values):
        log.append(batch([value], ts=NOW + i), NOW)
    segment_path = _last_log_file(directory)
    index_path, time_index_path = segment_path.with_suffix(".index"), segment_path.with_suffix(".timeindex")
    written = (index_path.read_bytes(), time_index_path.read_bytes())
    for segment in log.segments:
        segment.close()  # a crash: no seal, no snapshot, no marker
    expected = len(values)
    if damage != "none":
        data = bytearray(segment_path.read_bytes())
        data[-10] ^= 0xFF
        segment_path.write_bytes(bytes(data))
        expected -= 1
    recovered = open_log(directory, config, clean=False)
    assert recovered.log_end_offset == expected
    assert [v for _o, v in read_values(recovered)] == values[:expected]
    offsets_written = [e for e in _entries(written[0], 8) if e[0] < expected]
    assert _entries(index_path.read_bytes(), 8) == offsets_written
    assert len(recovered.segments[-1].offset_index.offsets) == len(offsets_written)
    times_written = _entries(written[1], 12)
    assert _entries(time_index_path.read_bytes(), 12)[: len(times_written) - 1] == times_written[:-1]


def _entries(data: bytes, size: int) -> list[tuple[int, int]]:
    fmt = ">ii" if size == 8 else ">qi"
    return [(a, b) if size == 8 else (b, a) for a, b in (struct.unpack_from(fmt, data, p)
                                                         for p in range(0, len(data), size))]


@pytest.mark.parametrize("sizes", [[9000, 9000], [30_000], [20_000, 10, 20_000]], ids=["two", "one", "three"])
def test_big_appends_store_the_bytes_a_patched_copy_would(tmp_path: Path, sizes: list[int]) -> None:
    """Appends from 16 KiB up are written from the caller's bytes with only the batch headers patched in
    copies: the file must hold exactly what patching a copy of the whole append gives."""
    log = open_log(tmp_path / "t-0")
    log.leader_epoch = 7
    log.append(batch([b"first"]), NOW)
    records = b"".join(batch([bytes([65 + index]) * size]) for index, size in enumerate(sizes))
    assert len(records) >= 16 * 1024
    start = log.active.size
    given = bytearray(records)  # mutable, so patching the caller's bytes in place would show
    appended = log.append(given, NOW)
    expected = bytearray(records)
    offset = 1
    for pos, header in iter_batches(records):
        struct.pack_into(">q", expected, pos, offset)
        struct.pack_into(">i", expected, pos + 12, 7)
        offset += header.last_offset_delta + 1
    with open(log.active.log_path, "rb") as stored:
        stored.seek(start)
        assert stored.read() == bytes(expected)
    assert (appended.base_offset, appended.last_offset, log.log_end_offset) == (1, len(sizes), len(sizes) + 1)
    assert given == records, "the caller's bytes are left as they were"
    assert [value for _offset, value in read_values(log, 1)] == [bytes([65 + i]) * size for i, size in enumerate(sizes)]
    # The indexes were given the patched headers: lookups land on the batches written.
    assert [h.base_offset for _p, h in iter_batches(log.read(len(sizes), 1 << 20).records)] == [len(sizes)]
    log.close()
    assert [v for _o, v in read_values(open_log(tmp_path / "t-0"), 1)] == [
        bytes([65 + i]) * size for i, size in enumerate(sizes)]


class _ShortWritev:
    """os.writev that writes at most `most` bytes a call, as a write to a nearly full disk may."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.calls = 0

    def write(self, fd: int, data: memoryview) -> int:
        return os.write(fd, data[: self.most])

    def writev(self, fd: int, buffers: list[memoryview]) -> int:
        self.calls += 1
        kept, room = [], self.most
        for buffer in buffers:
            if room <= 0:
                break
            kept.append(buffer[:room])
            room -= len(kept[-1])
        return os.writev(fd, kept)


def _written_to_a_file(tmp_path: Path, write: Callable[[int], object]) -> bytes:
    """What `write(fd)` leaves in a new file, even if it raises."""
    fd = os.open(tmp_path / "f", os.O_CREAT | os.O_WRONLY)
    try:
        write(fd)
    finally:
        os.close(fd)
    return (tmp_path / "f").read_bytes()


def test_parts_written_across_short_writev_calls_arrive_whole_and_in_order(tmp_path: Path) -> None:
    writer = _ShortWritev(most=7)
    parts = [b"abc", b"", bytearray(b"defghij"), memoryview(b"0123456789abcdef")[2:12], b"z"]
    assert _written_to_a_file(tmp_path, lambda fd: write_parts_fully(writer, fd, parts)) == b"abcdefghij23456789abz"
    assert writer.calls >= 3


@pytest.mark.parametrize("data", [b"abcdefghijklmnopqrstu", bytearray(b"abcdefghijklmnopqrstu"),
                                  memoryview(b"__abcdefghijklmnopqrstu")[2:]])
def test_one_buffer_written_across_short_writes_arrives_whole(tmp_path: Path,
                                                              data: bytes | bytearray | memoryview) -> None:
    writer = _ShortWritev(most=7)
    assert _written_to_a_file(tmp_path, lambda fd: write_fully(writer, fd, data)) == b"abcdefghijklmnopqrstu"


def test_a_write_that_stops_making_progress_is_an_io_error(tmp_path: Path) -> None:
    class _Stalls:
        def __init__(self) -> None:
            self.calls = 0

        def write(self, fd: int, data: bytes | bytearray | memoryview) -> int:
            self.calls += 1
            return os.write(fd, data[:5]) if self.calls == 1 else 0

    with pytest.raises(OSError) as raised:
        _written_to_a_file(tmp_path, lambda fd: write_fully(_Stalls(), fd, b"0123456789"))
    assert raised.value.errno == errno.EIO
    assert (tmp_path / "f").read_bytes() == b"01234"


def test_big_appends_written_from_the_callers_bytes_roll_by_their_byte_size(tmp_path: Path) -> None:
    """The roll check counts an append's bytes, however they are handed to the segment."""
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=50_000))
    for index in range(3):
        log.append(batch([bytes([65 + index]) * 20_000]), NOW)
    assert [segment.base_offset for segment in log.segments] == [0, 2]
    assert all(segment.size <= 50_000 for segment in log.segments)
    assert [value for _offset, value in read_values(log)] == [bytes([65 + i]) * 20_000 for i in range(3)]


# --- reads left in the file: regions a Fetch sends with sendfile ------------------------------------------


def test_big_reads_can_stay_in_the_file_as_regions_small_ones_are_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(batch([b"s" * 100]), NOW)
    big = [bytes([i]) * 40_000 for i in range(3)]
    log.append(batch(big), NOW)  # one batch over REGION_MIN_BYTES
    small = log.read(0, 1 << 20, upper_bound=1, as_region=True).records
    assert type(small) is bytes and small == log.read(0, 1 << 20, upper_bound=1).records
    region = log.read(0, 1 << 20, as_region=True).records
    assert isinstance(region, FileRegion) and len(region) >= REGION_MIN_BYTES
    assert region.read() == log.read(0, 1 << 20).records
    assert [value for _offset, value in read_values(log)] == [b"s" * 100, *big]


def test_a_region_outlives_the_deletion_of_its_segment_then_its_file_is_closed(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=REGION_MIN_BYTES))
    for index in range(3):
        log.append(batch([bytes([index]) * REGION_MIN_BYTES]), NOW)  # a segment each
    expected = log.read(0, 1 << 20).records
    first_segment = str(log.segments[0].log_path)
    region = log.read(0, 1 << 20, as_region=True).records
    other = log.read(0, 1 << 20, as_region=True).records
    assert isinstance(region, FileRegion) and isinstance(other, FileRegion)
    log.delete_records_before(2)  # retention's way of deleting: the first two segments go
    assert not os.path.exists(first_segment) and log.segments[0].base_offset == 2
    assert region.read() == other.read() == expected  # what was read is still what is sent
    del region
    gc.collect()
    assert f"{first_segment} (deleted)" in open_descriptor_targets()  # `other` still reads from it
    del other
    gc.collect()
    assert f"{first_segment} (deleted)" not in open_descriptor_targets()
    log.close()


def test_a_segment_closed_or_deleted_under_live_regions_tells_their_holders_once(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=REGION_MIN_BYTES))
    for index in range(2):
        log.append(batch([bytes([index]) * REGION_MIN_BYTES]), NOW)  # a segment each
    first_segment = str(log.segments[0].log_path)
    told: list[str] = []
    watched = log.read(0, 1 << 20, as_region=True).records
    unwatched = log.read(0, 1 << 20, as_region=True).records
    ended = log.read(0, 1 << 20, as_region=True).records
    assert isinstance(watched, FileRegion) and isinstance(unwatched, FileRegion) and isinstance(ended, FileRegion)
    expected = watched.read()

    def let_go() -> None:
        nonlocal watched
        told.append("watched")
        assert watched.read() == expected  # still readable when the holder is told
        del watched

    watched.on_orphaned = let_go
    ended.on_orphaned = lambda: told.append("ended")
    del ended
    gc.collect()
    later = log.read(1, 1 << 20, as_region=True).records  # in the second segment, which stays
    assert isinstance(later, FileRegion)
    later.on_orphaned = lambda: told.append("later")
    log.delete_records_before(1)
    assert told == ["watched"]  # the region that had ended and the one of a segment that stays: not told
    assert f"{first_segment} (deleted)" in open_descriptor_targets()  # `unwatched` still reads from it
    del unwatched
    gc.collect()
    assert f"{first_segment} (deleted)" not in open_descriptor_targets()
    log.close()
    assert told == ["watched", "later"]  # closing tells too, once
    del later


def test_closing_a_log_leaves_open_regions_readable(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(batch([b"r" * REGION_MIN_BYTES]), NOW)
    expected = log.read(0, 1 << 20).records
    region = log.read(0, 1 << 20, as_region=True).records
    log.close()
    path = str(tmp_path / "t-0" / "00000000000000000000.log")
    assert isinstance(region, FileRegion) and region.read() == expected and path in open_descriptor_targets()
    del region
    gc.collect()
    assert path not in open_descriptor_targets()
