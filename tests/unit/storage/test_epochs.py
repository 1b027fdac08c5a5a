"""The leader epoch history (Kafka's LeaderEpochFileCache) and its checkpoint file."""

from __future__ import annotations

from pathlib import Path

from minikafka.storage.epochs import LeaderEpochCache, encode_checkpoint, read_checkpoint


def test_end_offsets_as_kafka_answers_them(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    assert cache.assign(2, 10) and cache.assign(5, 40)
    assert not cache.assign(5, 50), "an epoch that is not newer is ignored"
    assert cache.end_offset_for(5, 77) == (5, 77)  # the latest epoch ends at the log end
    assert cache.end_offset_for(2, 77) == (2, 40)
    assert cache.end_offset_for(3, 77) == (2, 40), "an epoch never led ends where the next one started"
    assert cache.end_offset_for(0, 77) == (0, 10)
    assert cache.end_offset_for(6, 77) == (-1, -1)
    assert cache.end_offset_for(-1, 77) == (-1, -1)


def test_the_checkpoint_round_trips_and_a_torn_one_reads_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochCache(path)
    cache.assign(3, 12)
    assert path.read_text() == "0\n2\n0 0\n3 12\n"
    assert read_checkpoint(path) == [(0, 0), (3, 12)]
    path.write_bytes(encode_checkpoint([(0, 0), (3, 12)])[:-4])
    assert read_checkpoint(path) == []
