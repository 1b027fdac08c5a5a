"""Producer ids are unique across restarts, crashes included."""

from __future__ import annotations

import errno
import json
import logging
import os
from pathlib import Path

import pytest
from minikafka.coordinator.producer_ids import FILE_NAME, ProducerIdBlockUnavailable, ProducerIdManager, write_durably
from minikafka.protocol.errors import ErrorCode


def test_ids_are_sequential_within_a_block(tmp_path: Path) -> None:
    manager = ProducerIdManager(tmp_path, block_size=10)
    assert [manager.allocate() for _ in range(12)] == list(range(12))


def test_restart_never_reuses_an_id(tmp_path: Path) -> None:
    first = ProducerIdManager(tmp_path, block_size=10)
    handed_out = {first.allocate() for _ in range(3)}
    # a crash: the object is dropped without any shutdown step
    second = ProducerIdManager(tmp_path, block_size=10)
    later = {second.allocate() for _ in range(25)}
    assert not handed_out & later
    assert min(later) == 10


class FullDisk:
    """The block file write of a full disk: refused until healed."""

    def __init__(self) -> None:
        self.full = False
        self.attempts = 0

    def write(self, path: Path, data: bytes) -> None:
        self.attempts += 1
        if self.full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        write_durably(path, data)


def test_block_that_cannot_be_persisted_is_a_retriable_error_and_hands_out_nothing(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="minikafka.coordinator")
    disk = FullDisk()
    manager = ProducerIdManager(tmp_path, block_size=10, write_file=disk.write)
    assert [manager.allocate() for _ in range(10)] == list(range(10))
    disk.full = True
    for _ in range(3):
        with pytest.raises(ProducerIdBlockUnavailable) as failure:
            manager.allocate()
        # Kafka's ProducerIdManager answers this while it has no block: clients retry.
        assert failure.value.error_code == ErrorCode.coordinator_load_in_progress
    assert disk.attempts == 4, "every request tries the write again"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and not warnings[0].exc_info, "logged once per failure streak, no stack trace"
    assert json.loads((tmp_path / FILE_NAME).read_text())["next_block_start"] == 10, "the old block file is intact"
    assert not list(tmp_path.glob("*.tmp"))

    disk.full = False
    assert manager.allocate() == 10, "no id was handed out or skipped while the disk was full"
    restarted = ProducerIdManager(tmp_path, block_size=10)
    assert restarted.allocate() == 20


def test_block_file_write_replaces_atomically_and_leaves_no_temporary(tmp_path: Path) -> None:
    (tmp_path / (FILE_NAME + ".tmp")).write_bytes(b'{"version": 1, "next_blo')  # torn by an earlier crash
    manager = ProducerIdManager(tmp_path, block_size=10)
    assert manager.allocate() == 0
    assert json.loads((tmp_path / FILE_NAME).read_text()) == {"version": 1, "next_block_start": 10}
    assert not (tmp_path / (FILE_NAME + ".tmp")).exists()
    assert ProducerIdManager(tmp_path, block_size=10).allocate() == 10
