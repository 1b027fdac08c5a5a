"""Producer state: sequence validation against a model, de-duplication, snapshots in Kafka's format."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from minikafka.storage.origin import AppendOrigin
from minikafka.storage.producer_state import (
    INT32_MAX,
    InvalidProducerEpoch,
    OutOfOrderSequence,
    ProducerStateManager,
    read_snapshot,
)

PID = 1000


def _append(manager: ProducerStateManager, epoch: int, first_seq: int, count: int, offset: int,
            transactional: bool = False) -> None:
    info = manager.prepare_update(PID)
    last_seq = (first_seq + count - 1) & INT32_MAX
    info.append_data_batch(epoch, first_seq, last_seq, 1000 + offset, offset, offset + count - 1, transactional)
    manager.update(info)


def test_in_order_batches_are_accepted(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    _append(manager, 0, 0, 3, 0)
    _append(manager, 0, 3, 2, 3)
    entry = manager.last_entry(PID)
    assert entry is not None and entry.last_seq == 4 and entry.last_offset == 4


def test_gap_is_out_of_order_and_does_not_mutate(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    _append(manager, 0, 0, 3, 0)
    with pytest.raises(OutOfOrderSequence):
        _append(manager, 0, 5, 1, 3)
    entry = manager.last_entry(PID)
    assert entry is not None and entry.last_seq == 2 and len(entry.batches) == 1


def test_older_epoch_is_fenced(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    _append(manager, 3, 0, 1, 0)
    with pytest.raises(InvalidProducerEpoch):
        _append(manager, 2, 1, 1, 1)
    with pytest.raises(InvalidProducerEpoch):  # not PRODUCER_FENCED: Kafka 2.7+ lets the client abort
        _append(manager, 2, 1, 1, 1, transactional=True)


def test_new_epoch_must_start_at_zero(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    _append(manager, 0, 0, 1, 0)
    with pytest.raises(OutOfOrderSequence):
        _append(manager, 1, 5, 1, 1)
    _append(manager, 1, 0, 1, 1)
    entry = manager.last_entry(PID)
    assert entry is not None and entry.epoch == 1 and len(entry.batches) == 1


def test_unknown_producer_accepts_any_sequence(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    _append(manager, 4, 77, 2, 0)  # KIP-360: no state, any sequence
    assert manager.last_entry(PID).last_seq == 78  # type: ignore[union-attr]


def test_sequence_wraps_at_int32_max(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    _append(manager, 0, INT32_MAX - 1, 2, 0)
    _append(manager, 0, 0, 1, 2)
    assert manager.last_entry(PID).last_seq == 0  # type: ignore[union-attr]


def test_duplicate_window_is_last_five_batches(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    for index in range(7):
        _append(manager, 0, index * 2, 2, index * 2)
    entry = manager.last_entry(PID)
    assert entry is not None
    assert entry.find_duplicate(0, 0, 1) is None  # fell out of the window
    found = entry.find_duplicate(0, 6, 7)
    assert found is not None and found.first_offset == 6 and found.last_offset == 7
    assert entry.find_duplicate(1, 6, 7) is None  # other epoch


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["next", "retry", "gap", "bump", "old"]), st.integers(1, 4)),
                min_size=1, max_size=40))
def test_against_model(tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, int]]) -> None:
    manager = ProducerStateManager(tmp_path_factory.mktemp("ps"))
    epoch, next_seq, offset = 0, 0, 0
    history: list[tuple[int, int]] = []
    for action, count in steps:
        if action == "next" or not history:
            _append(manager, epoch, next_seq, count, offset)
            history.append((next_seq, next_seq + count - 1))
            next_seq += count
            offset += count
        elif action == "retry":
            first, last = history[-1]
            assert manager.last_entry(PID).find_duplicate(epoch, first, last) is not None  # type: ignore[union-attr]
        elif action == "gap":
            with pytest.raises(OutOfOrderSequence):
                _append(manager, epoch, next_seq + count, 1, offset)
        elif action == "bump":
            epoch += 1
            with pytest.raises(OutOfOrderSequence):
                _append(manager, epoch, count, 1, offset)
            _append(manager, epoch, 0, count, offset)
            history = [(0, count - 1)]
            next_seq, offset = count, offset + count
        elif action == "old" and epoch > 0:
            with pytest.raises(InvalidProducerEpoch):
                _append(manager, epoch - 1, 0, 1, offset)
        entry = manager.last_entry(PID)
        assert entry is not None and entry.epoch == epoch and entry.last_seq == next_seq - 1


def test_snapshot_bytes_follow_kafka_format(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    _append(manager, 2, 0, 3, 10, transactional=True)
    path = manager.take_snapshot(13)
    assert path.name == "00000000000000000013.snapshot"
    data = path.read_bytes()
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count) == (1, 1)
    assert crc == crc32c.crc32c(data[6:])
    assert struct.unpack_from(">qhiqiqiq", data, 10) == (PID, 2, 2, 12, 2, 1010, -1, 10)


def test_snapshot_round_trip_keeps_last_batch(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    _append(manager, 1, 0, 2, 0)
    _append(manager, 1, 2, 2, 2)
    manager.take_snapshot(4)
    loaded = ProducerStateManager(tmp_path)
    assert loaded.load_latest_snapshot(4) == 4
    entry = loaded.last_entry(PID)
    assert entry is not None and entry.epoch == 1 and len(entry.batches) == 1
    assert entry.find_duplicate(1, 2, 3) is not None
    _append(loaded, 1, 4, 1, 4)


def test_corrupt_snapshot_is_skipped(tmp_path: Path) -> None:
    manager = ProducerStateManager(tmp_path)
    _append(manager, 0, 0, 1, 0)
    manager.take_snapshot(1)
    _append(manager, 0, 1, 1, 1)
    newest = manager.take_snapshot(2)
    raw = bytearray(newest.read_bytes())
    raw[-1] ^= 0xFF
    newest.write_bytes(bytes(raw))
    with pytest.raises(Exception, match="CRC"):
        read_snapshot(newest)
    loaded = ProducerStateManager(tmp_path)
    assert loaded.load_latest_snapshot(10) == 1
    assert not newest.exists()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["data", "txn", "commit", "abort", "undo", "truncate", "reload"]),
                          st.integers(0, 5)), min_size=1, max_size=60))
def test_first_unstable_offset_is_the_oldest_open_transaction(tmp_path_factory: pytest.TempPathFactory,
                                                              steps: list[tuple[str, int]]) -> None:
    """The kept index of open transactions agrees with a walk over every producer after each step."""
    manager = ProducerStateManager(tmp_path_factory.mktemp("ps"))
    for offset, (action, pid) in enumerate(steps):
        before = manager.last_entry(pid)
        if action in ("data", "txn"):
            transactional = action == "txn"
            info = manager.prepare_update(pid, AppendOrigin.REPLICATION)
            info.append_data_batch(0, 0, 0, offset, offset, offset, transactional)
            manager.update(info)
        elif action in ("commit", "abort"):
            info = manager.prepare_update(pid, AppendOrigin.REPLICATION)
            info.append_end_txn_marker(0, 0, offset, action == "commit", offset)
            manager.update(info)
        elif action == "undo":
            info = manager.prepare_update(pid, AppendOrigin.REPLICATION)
            info.append_data_batch(0, 0, 0, offset, offset, offset, True)
            manager.update(info)
            manager.restore(pid, before)  # a write that failed on disk is taken back
        elif action == "truncate":
            manager.truncate_and_reload(offset // 2, offset)
        elif action == "reload":
            manager.take_snapshot(offset)
            manager.load_latest_snapshot(offset)
        open_firsts = [entry.current_txn_first_offset for entry in manager.entries.values()
                       if entry.current_txn_first_offset >= 0]
        assert manager.first_unstable_offset() == (min(open_firsts) if open_firsts else None)
