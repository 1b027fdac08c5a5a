"""Partition side of transactions: open transactions hold the LSO, markers close them, aborted
transactions land in `.txnindex` with Kafka's 34-byte entries and survive recovery."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from minikafka.protocol.records import ControlType, Record, build_batch, decode_batch, parse_control_record
from minikafka.storage.config import LogConfig
from minikafka.storage.index import AbortedTxn
from minikafka.storage.log import PartitionLog
from minikafka.storage.producer_state import InvalidTxnState, ProducerFenced, TransactionCoordinatorFenced

NOW = 1_700_000_000_000


def open_log(path: Path, *, clean: bool = True, config: LogConfig | None = None) -> PartitionLog:
    log = PartitionLog(path, "t", 0, config or LogConfig(), NOW)
    log.open(recovery_point=0, log_start_offset=0, clean=clean)
    return log


def txn_batch(pid: int, seq: int, values: list[bytes], epoch: int = 0) -> bytes:
    return build_batch([Record(None, v, (), NOW) for v in values], producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq, transactional=True)


def plain(values: list[bytes]) -> bytes:
    return build_batch([Record(None, v, (), NOW) for v in values])


def test_open_transaction_holds_the_last_stable_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(plain([b"before"]), NOW)
    log.append(txn_batch(1, 0, [b"a", b"b"]), NOW)
    log.append(plain([b"after"]), NOW)
    assert (log.high_watermark, log.last_stable_offset) == (4, 1)
    assert log.read(0, 1 << 20, upper_bound=log.last_stable_offset).records  # offset 0 is readable
    log.append_control(1, 0, 0, commit=True, now_ms=NOW)
    assert log.last_stable_offset == log.high_watermark == 5
    assert log.collect_aborted(0, 5) == []


def test_abort_is_indexed_with_kafka_bytes(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory)
    log.append(txn_batch(7, 0, [b"x"]), NOW)  # offset 0
    log.append(txn_batch(8, 0, [b"y"]), NOW)  # offset 1, still open when 7 aborts
    result = log.append_control(7, 0, 3, commit=False, now_ms=NOW)  # marker at offset 2
    assert result.base_offset == 2
    assert log.collect_aborted(0, 10) == [AbortedTxn(7, 0, 2, 1)]
    raw = (directory / "00000000000000000000.txnindex").read_bytes()
    assert raw == struct.pack(">hqqqq", 0, 7, 0, 2, 1)
    assert log.last_stable_offset == 1
    marker = decode_batch(log.read(2, 1 << 20).records)
    assert marker.header.is_control and marker.header.is_transactional
    assert parse_control_record(marker.records[0]) == (ControlType.ABORT, 3)


def test_collect_aborted_only_overlapping(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(txn_batch(1, 0, [b"a"]), NOW)
    log.append_control(1, 0, 0, commit=False, now_ms=NOW)  # aborted [0, 1]
    log.append(txn_batch(2, 0, [b"b"]), NOW)
    log.append_control(2, 0, 0, commit=False, now_ms=NOW)  # aborted [2, 3]
    assert [t.producer_id for t in log.collect_aborted(2, 4)] == [2]
    assert [t.producer_id for t in log.collect_aborted(0, 1)] == [1]


def test_marker_from_an_older_epoch_or_coordinator_is_fenced(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(txn_batch(1, 0, [b"a"], epoch=3), NOW)
    log.append_control(1, 3, 5, commit=True, now_ms=NOW)
    with pytest.raises(ProducerFenced):
        log.append_control(1, 2, 5, commit=True, now_ms=NOW)
    with pytest.raises(TransactionCoordinatorFenced):
        log.append_control(1, 3, 4, commit=True, now_ms=NOW)
    assert log.log_end_offset == 2


def test_plain_batch_inside_an_open_transaction_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(txn_batch(1, 0, [b"a"]), NOW)
    idempotent = build_batch([Record(None, b"b", (), NOW)], producer_id=1, producer_epoch=0, base_sequence=1)
    with pytest.raises(InvalidTxnState):
        log.append(idempotent, NOW)


@pytest.mark.parametrize("clean", [True, False])
def test_transaction_state_and_index_survive_reopen(tmp_path: Path, clean: bool) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory, config=LogConfig(segment_bytes=300))
    log.append(txn_batch(1, 0, [b"a" * 50]), NOW)
    log.append(txn_batch(2, 0, [b"b" * 50]), NOW)
    log.append_control(1, 0, 0, commit=False, now_ms=NOW)
    log.append(txn_batch(2, 1, [b"c" * 50]), NOW)  # producer 2 still open
    aborted = log.collect_aborted(0, 100)
    if clean:
        log.close()
    else:
        for segment in log.segments:
            segment.close()
        for index in directory.glob("*.txnindex"):
            index.unlink()  # lost with the crash: must be rebuilt from the markers
    again = open_log(directory, clean=clean, config=LogConfig(segment_bytes=300))
    assert again.collect_aborted(0, 100) == aborted
    assert again.last_stable_offset == 1  # producer 2's transaction is still open
    again.append_control(2, 0, 0, commit=True, now_ms=NOW)
    assert again.last_stable_offset == again.high_watermark
