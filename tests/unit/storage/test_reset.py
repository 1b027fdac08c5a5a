"""LogManager.reset: back to an empty data directory's state, the cluster id kept, in one step."""

from __future__ import annotations

import time
from pathlib import Path

from minikafka.protocol.records import Record, build_batch
from minikafka.storage.clock import ManualClock
from minikafka.storage.config import LogConfig
from minikafka.storage.manager import META_PROPERTIES, METADATA_FILE, LogManager

NOW = 1_700_000_000_000
DEADLINE_S = 30.0


def open_manager(data_dir: Path) -> LogManager:
    manager = LogManager(data_dir, LogConfig(), ManualClock(NOW))
    manager.load()
    return manager


def _wait_until_only(data_dir: Path, names: set[str]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while {path.name for path in data_dir.iterdir()} != names:
        assert time.monotonic() < deadline, sorted(path.name for path in data_dir.iterdir())
        time.sleep(0.01)


def test_reset_removes_every_topic_and_keeps_the_cluster_id(tmp_path: Path) -> None:
    manager = open_manager(tmp_path)
    cluster_id = manager.cluster_id
    manager.create_topic("orders", 3)
    manager.create_topic("__consumer_offsets", 2, internal=True)
    log = manager.partition("orders", 0)
    assert log is not None
    log.append(build_batch([Record(None, b"v", (), NOW)]), NOW)
    manager.checkpoint()

    assert manager.reset(LogConfig(retention_ms=1234)) == 2

    assert manager.topics() == [] and manager.partition_logs() == []
    assert manager.defaults.retention_ms == 1234
    _wait_until_only(tmp_path, {META_PROPERTIES})
    manager.close()
    reopened = open_manager(tmp_path)
    assert reopened.cluster_id == cluster_id and reopened.topics() == []
    reopened.close()


def test_a_topic_made_again_after_a_reset_starts_empty(tmp_path: Path) -> None:
    manager = open_manager(tmp_path)
    first = manager.create_topic("orders", 1)
    log = manager.partition("orders", 0)
    assert log is not None
    log.append(build_batch([Record(None, b"v", (), NOW)]), NOW)
    manager.reset(LogConfig())
    again = manager.create_topic("orders", 1)
    assert again.topic_id != first.topic_id
    fresh = manager.partition("orders", 0)
    assert fresh is not None and fresh.log_end_offset == 0
    assert (tmp_path / METADATA_FILE).exists()
    manager.close()
