"""Producer ids are unique across restarts, crashes included."""

from __future__ import annotations

from pathlib import Path

from minikafka.coordinator.producer_ids import ProducerIdManager


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
