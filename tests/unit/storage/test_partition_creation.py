"""Creating and deleting thousands of partitions: the on-disk layout, what survives a reopen or a
crash, and the sliced (event-loop friendly) variants the request handlers use.

The cost per partition is measured by a script, not asserted here (see the storage notes)."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import pytest
from minikafka.protocol.records import Record, build_batch
from minikafka.storage.clock import ManualClock
from minikafka.storage.config import LogConfig
from minikafka.storage.errors import TopicAlreadyExists, UnknownTopicOrPartition
from minikafka.storage.manager import (
    CLEAN_SHUTDOWN_FILE,
    DELETE_DIR_SUFFIX,
    LEADER_EPOCH_FILE,
    METADATA_FILE,
    PARTITION_METADATA_FILE,
    LogManager,
    TopicMeta,
)

NOW = 1_700_000_000_000
MANY = 500
# A new partition as Kafka lays it out (its preallocated .index/.timeindex aside: minikafka writes
# index files only once they have entries): the first segment, the topic id, the leader epoch.
NEW_PARTITION_FILES = {"00000000000000000000.log", PARTITION_METADATA_FILE, LEADER_EPOCH_FILE}
LOG_DIR_FILES = {"meta.properties", METADATA_FILE, "recovery-point-offset-checkpoint",
                 "log-start-offset-checkpoint"}


def open_manager(data_dir: Path) -> LogManager:
    manager = LogManager(data_dir, LogConfig(), ManualClock(NOW))
    manager.load()
    return manager


def kafka_uuid_text(meta: TopicMeta) -> str:
    return base64.urlsafe_b64encode(meta.topic_id.bytes).decode().rstrip("=")


def assert_new_partitions(data_dir: Path, meta: TopicMeta, partitions: range) -> None:
    for partition in partitions:
        directory = data_dir / f"{meta.name}-{partition}"
        assert {p.name for p in directory.iterdir()} == NEW_PARTITION_FILES, directory
        assert (directory / "00000000000000000000.log").stat().st_size == 0
        assert (directory / PARTITION_METADATA_FILE).read_text() == \
            f"version: 0\ntopic_id: {kafka_uuid_text(meta)}\n"
        assert (directory / LEADER_EPOCH_FILE).read_text() == "0\n1\n0 0\n"


def partition_dirs(data_dir: Path) -> set[str]:
    return {p.name for p in data_dir.iterdir() if p.is_dir()}


def test_many_partitions_have_kafkas_layout_and_survive_a_clean_reopen(tmp_path: Path) -> None:
    manager = open_manager(tmp_path)
    meta = manager.create_topic("wide", MANY)
    manager.create_topic("grown", 2)
    manager.create_partitions("grown", MANY)
    grown = manager.topic("grown")
    assert grown is not None
    assert_new_partitions(tmp_path, meta, range(MANY))
    assert_new_partitions(tmp_path, grown, range(MANY))
    assert partition_dirs(tmp_path) == {f"wide-{p}" for p in range(MANY)} | {f"grown-{p}" for p in range(MANY)}
    assert not list(tmp_path.rglob("*.tmp")), "no temporary file is left behind"
    manager.close()
    assert {p.name for p in tmp_path.iterdir() if p.is_file()} == LOG_DIR_FILES | {CLEAN_SHUTDOWN_FILE}

    reopened = open_manager(tmp_path)
    again = reopened.topic("wide")
    assert again is not None and (again.topic_id, again.partitions) == (meta.topic_id, MANY)
    regrown = reopened.topic("grown")
    assert regrown is not None and (regrown.topic_id, regrown.partitions) == (grown.topic_id, MANY)
    assert all(reopened.partition("wide", p) is not None for p in range(MANY))
    assert reopened.partition("wide", MANY) is None
    # A clean stop and start of untouched partitions writes nothing into them (no snapshots,
    # no empty index files), so the layout is still that of new partitions.
    assert_new_partitions(tmp_path, meta, range(MANY))
    reopened.close()


def test_partitions_with_data_still_get_snapshots_and_indexes_on_close(tmp_path: Path) -> None:
    manager = open_manager(tmp_path)
    manager.create_topic("used", 2)
    log = manager.partition("used", 1)
    assert log is not None
    log.append(build_batch([Record(None, b"v", (), NOW)]), NOW)
    manager.close()
    used = {p.name for p in (tmp_path / "used-1").iterdir()}
    assert {"00000000000000000001.snapshot", "00000000000000000000.timeindex"} <= used
    assert {p.name for p in (tmp_path / "used-0").iterdir()} == NEW_PARTITION_FILES
    reopened = open_manager(tmp_path)
    assert reopened.partition("used", 1).log_end_offset == 1  # type: ignore[union-attr]
    reopened.close()


def test_partition_files_a_crash_lost_are_written_again_on_the_next_start(tmp_path: Path) -> None:
    manager = open_manager(tmp_path)
    meta = manager.create_topic("crashy", 4)
    # A crash before writeback: the state files were never fsynced, so they may be gone or empty.
    (tmp_path / "crashy-1" / PARTITION_METADATA_FILE).unlink()
    (tmp_path / "crashy-2" / PARTITION_METADATA_FILE).write_bytes(b"")
    (tmp_path / "crashy-3" / LEADER_EPOCH_FILE).write_bytes(b"")
    del manager  # no close: the next start is unclean
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    reopened = open_manager(tmp_path)
    assert_new_partitions(tmp_path, meta, range(4))
    reopened.close()


def test_deleting_many_partitions_frees_the_names_at_once_and_removes_the_files(tmp_path: Path) -> None:
    manager = open_manager(tmp_path)
    manager.create_topic("gone", MANY)
    manager.create_topic("kept", 1)
    manager.delete_topic("gone")
    assert manager.topic("gone") is None and manager.partition("gone", 0) is None
    assert not any(name.startswith("gone-") and not name.endswith(DELETE_DIR_SUFFIX)
                   for name in partition_dirs(tmp_path))
    again = manager.create_topic("gone", 3)
    assert_new_partitions(tmp_path, again, range(3))
    manager.close()  # waits for the background removal
    assert partition_dirs(tmp_path) == {"kept-0", "gone-0", "gone-1", "gone-2"}
    reopened = open_manager(tmp_path)
    reborn = reopened.topic("gone")
    assert reborn is not None and (reborn.topic_id, reborn.partitions) == (again.topic_id, 3)
    reopened.close()


def test_directories_left_by_an_interrupted_deletion_are_removed_at_start(tmp_path: Path) -> None:
    manager = open_manager(tmp_path)
    manager.close()
    leftover = tmp_path / f"old-0.0123abcd{DELETE_DIR_SUFFIX}"
    leftover.mkdir()
    (leftover / "00000000000000000000.log").write_bytes(b"x" * 100)
    stale = tmp_path / "reused-0"  # deleted from the metadata, crash before its files went
    stale.mkdir()
    (stale / "00000000000000000000.log").write_bytes(b"stale")
    reopened = open_manager(tmp_path)
    meta = reopened.create_topic("reused", 1)
    reopened.close()
    assert not leftover.exists()
    assert_new_partitions(tmp_path, meta, range(1))


async def test_sliced_creation_lets_others_run_and_shows_the_topic_only_when_complete(tmp_path: Path) -> None:
    manager = open_manager(tmp_path)
    seen_during: list[tuple[bool, bool]] = []
    creation = asyncio.create_task(manager.create_topic_async("sliced", MANY))
    await asyncio.sleep(0)  # the creation starts and makes its first slice
    assert not creation.done()
    with pytest.raises(TopicAlreadyExists):
        manager.create_topic("sliced", 1)  # e.g. an internal topic: the name is taken while pending
    for _turn in range(1_000_000):  # bounded; ends as soon as the creation does
        if creation.done():
            break
        seen_during.append((manager.topic("sliced") is not None, manager.partition("sliced", 0) is not None))
        await asyncio.sleep(0)
    meta = await creation
    assert len(seen_during) > 1, "other tasks ran while the partitions were made"
    assert set(seen_during) == {(False, False)}, "the topic and its partitions stayed invisible until done"
    assert manager.topic("sliced") is meta and meta.partitions == MANY
    assert_new_partitions(tmp_path, meta, range(MANY))

    growing = asyncio.create_task(manager.create_partitions_async("sliced", 2 * MANY))
    for _turn in range(1_000_000):
        if growing.done():
            break
        assert manager.partition("sliced", MANY) is None and meta.partitions == MANY
        await asyncio.sleep(0)
    await growing
    assert meta.partitions == 2 * MANY and manager.partition("sliced", 2 * MANY - 1) is not None
    manager.close()
    reopened = open_manager(tmp_path)
    assert reopened.topic("sliced").partitions == 2 * MANY  # type: ignore[union-attr]
    reopened.close()


async def test_partitions_being_added_to_a_topic_deleted_meanwhile_are_removed(tmp_path: Path) -> None:
    manager = open_manager(tmp_path)
    manager.create_topic("doomed", 1)
    growing = asyncio.create_task(manager.create_partitions_async("doomed", MANY))
    await asyncio.sleep(0)
    assert not growing.done()
    manager.delete_topic("doomed")
    with pytest.raises(UnknownTopicOrPartition):
        await growing
    manager.close()
    assert not any(name.startswith("doomed-") for name in partition_dirs(tmp_path))
