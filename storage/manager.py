"""LogManager: topics, their partition logs, and the per-log-dir files Kafka keeps.

Per log dir: `meta.properties`, `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
`cleaner-offset-checkpoint` (the log cleaner's, storage/cleaner.py),
`.kafka_cleanshutdown` (present only between a clean close and the next start), and
`__cluster_metadata.json`, which stands in for Kafka's KRaft metadata log: topic ids, partition
counts and config overrides. Per partition dir: `partition.metadata` and `leader-epoch-checkpoint`.
A deleted partition's dir is renamed to `<topic>-<partition>.<id>-delete` and removed in the
background, as Kafka does; a start removes any such dir a crash left.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import structlog
from minikafka.storage.checkpoint import (
    CLEANER_CHECKPOINT_FILE,
    TopicPartition,
    read_checkpoint,
    write_atomically,
    write_checkpoint,
)
from minikafka.storage.clock import Clock
from minikafka.storage.config import LogConfig, resolve_log_config
from minikafka.storage.epochs import LEADER_EPOCH_FILE
from minikafka.storage.epochs import encode_checkpoint as encode_epochs
from minikafka.storage.epochs import read_checkpoint as read_epochs
from minikafka.storage.errors import (
    InvalidPartitions,
    InvalidTopic,
    KafkaStorageError,
    PolicyViolation,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)
from minikafka.storage.files import OS_WRITER, FileWriter, can_sync_filesystem, sync_filesystem, write_fully
from minikafka.storage.log import PartitionLog

if TYPE_CHECKING:
    from minikafka.storage.cleaner import LogCleaner

_log = structlog.get_logger("minikafka.storage")

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"
METADATA_FILE = "__cluster_metadata.json"
META_PROPERTIES = "meta.properties"
PARTITION_METADATA_FILE = "partition.metadata"
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_LENGTH = 249
DELETE_DIR_SUFFIX = "-delete"
_REMOVER_JOIN_TIMEOUT_S = 30.0
INTERNAL_TOPIC_SEGMENT_BYTES = 104857600
# Threads writing the logs' last snapshots and fsyncs at shutdown where there is no syncfs, so that they share
# journal commits.
_CLOSE_THREADS = 16
# How long partition creation runs before letting other connections be served.
_CREATION_SLICE_S = 0.005


def _close_log_files(tp: TopicPartition, log: PartitionLog) -> bool:
    """Close one log's files, its clean-close writes done or not wanted; False (logged, the rest of its
    files closed anyway) if that failed."""
    try:
        log.close(clean=False)
    except OSError as exc:
        _log.error("closing log failed", topic=tp[0], partition=tp[1], error=str(exc))
        for segment in log.segments:
            with contextlib.suppress(OSError):
                segment.close()
        return False
    return True


def kafka_uuid(value: uuid.UUID) -> str:
    """Kafka prints Uuids as URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def validate_topic_name(name: str) -> None:
    """Kafka's Topic.validate, with its messages."""
    reason = _invalid_topic_reason(name)
    if reason is not None:
        raise InvalidTopic(f"Topic name is invalid: {reason}")


def _invalid_topic_reason(name: str) -> str | None:
    if not name:
        return "the empty string is not allowed"
    if name in (".", ".."):
        return f"'{name}' is not allowed"
    if len(name) > MAX_TOPIC_LENGTH:
        return f"the length of '{name}' is longer than the max allowed length {MAX_TOPIC_LENGTH}"
    if not _LEGAL_TOPIC.match(name):
        return f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


def _write_new_file(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_fully(OS_WRITER, fd, data)
    finally:
        os.close(fd)


@dataclass(slots=True)
class TopicMeta:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False


def _partition_metadata(meta: TopicMeta) -> bytes:
    return f"version: 0\ntopic_id: {kafka_uuid(meta.topic_id)}\n".encode()


def _leader_epoch_checkpoint(log: PartitionLog) -> bytes:
    return encode_epochs(log.epochs.entries)


def _remove_directories(directories: Sequence[str | Path], garbage: object = None) -> None:
    del garbage  # its last reference: freed on this thread
    for directory in directories:
        shutil.rmtree(directory, ignore_errors=True)


class LogManager:
    def __init__(self, data_dir: Path, defaults: LogConfig, clock: Clock, node_id: int = 1,
                 cluster_id: str | None = None, writer: FileWriter = OS_WRITER) -> None:
        self.data_dir = data_dir
        self.writer = writer  # the seam tests use to make log writes fail as a full disk would
        self.defaults = defaults
        self.clock = clock
        self.node_id = node_id
        self.cluster_id = cluster_id or ""
        self._topics: dict[str, TopicMeta] = {}
        self._by_id: dict[uuid.UUID, TopicMeta] = {}
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        # Topics whose partitions a request handler is making between event-loop turns.
        self._creating: set[str] = set()
        # Kafka's controller applies topic changes one at a time; so do the sliced variants.
        self._admin_lock = asyncio.Lock()
        self._removers: list[threading.Thread] = []
        # Built, and storage/cleaner.py imported, on first use (`cleaner`): its job first runs
        # log.initial.task.delay.ms after start, and a broker starting without it answers sooner.
        self._cleaner: LogCleaner | None = None
        self._cleaner_stopped = False

    @property
    def cleaner(self) -> LogCleaner:
        """Compacts cleanup.policy=compact partitions when the broker's periodic job starts it."""
        if self._cleaner is None:
            from minikafka.storage.cleaner import LogCleaner

            self._cleaner = LogCleaner(self, self.data_dir, self.clock)
            if self._cleaner_stopped:
                self._cleaner.stop()  # the logs are closed: it must never start
        return self._cleaner

    # --- start and stop ------------------------------------------------------------------

    def load(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._load_meta_properties()
        marker = self.data_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery_points = read_checkpoint(self.data_dir / RECOVERY_POINT_FILE)
        log_starts = read_checkpoint(self.data_dir / LOG_START_FILE)
        for meta in self._read_metadata():
            self._register(meta)
            for partition in range(meta.partitions):
                tp = (meta.name, partition)
                log = self._new_log(meta, partition)
                truncated = log.open(recovery_point=recovery_points.get(tp, 0), log_start_offset=log_starts.get(tp, 0),
                                     clean=clean)
                if truncated:
                    _log.warning("truncated torn log tail", topic=meta.name, partition=partition, bytes=truncated)
                if not clean:
                    self._repair_partition_files(meta, log)
                log.load_epochs(read_epochs(log.dir / LEADER_EPOCH_FILE))
                self._logs[tp] = log
        if not clean and self._logs:
            _log.info("recovered logs after unclean shutdown", partitions=len(self._logs))
        marker.unlink(missing_ok=True)
        self._remove_deleted_leftovers()

    def _load_meta_properties(self) -> None:
        path = self.data_dir / META_PROPERTIES
        props: dict[str, str] = {}
        if path.exists():
            for line in path.read_text().splitlines():
                key, sep, value = line.partition("=")
                if sep and not key.startswith("#"):
                    props[key.strip()] = value.strip()
        stored = props.get("cluster.id")
        if stored and self.cluster_id and stored != self.cluster_id:
            raise RuntimeError(f"{path} holds cluster.id {stored}, configured {self.cluster_id}")
        self.cluster_id = stored or self.cluster_id or kafka_uuid(uuid.uuid4())
        if not stored:
            text = (f"#\n#{'minikafka'}\ncluster.id={self.cluster_id}\ndirectory.id={kafka_uuid(uuid.uuid4())}\n"
                    f"node.id={self.node_id}\nversion=1\n")
            write_atomically(path, text.encode())

    def _read_metadata(self) -> list[TopicMeta]:
        path = self.data_dir / METADATA_FILE
        if not path.exists():
            return []
        document = json.loads(path.read_text())
        return [TopicMeta(t["name"], uuid.UUID(t["topic_id"]), int(t["partitions"]), dict(t["configs"]),
                          bool(t.get("internal", False))) for t in document["topics"]]

    def _write_metadata(self) -> None:
        document = {"version": 1, "topics": [
            {"name": m.name, "topic_id": str(m.topic_id), "partitions": m.partitions, "configs": m.configs,
             "internal": m.internal} for m in self._topics.values()]}
        write_atomically(self.data_dir / METADATA_FILE, json.dumps(document, indent=1).encode())

    def checkpoint(self) -> None:
        """Flush logs, then record how far they are durable (recovery points) and their starts.

        On a failing disk the old recovery points stay, so the next unclean start re-checks more."""
        try:
            for log in self._logs.values():
                log.flush()
            write_checkpoint(self.data_dir / RECOVERY_POINT_FILE,
                             {tp: log.log_end_offset for tp, log in self._logs.items()})
            self._write_log_starts()
        except OSError as exc:
            _log.error("checkpoint failed", data_dir=str(self.data_dir), error=str(exc))

    def _write_log_starts(self) -> None:
        write_checkpoint(self.data_dir / LOG_START_FILE, {tp: log.log_start_offset for tp, log in self._logs.items()})

    def close(self, clean: bool = True) -> None:
        """Close every log; the clean-shutdown marker is written only if everything reached the disk,
        so a close on a full or failing disk makes the next start recover the logs."""
        self._cleaner_stopped = True
        if self._cleaner is not None:
            self._cleaner.stop()
        for remover in self._removers:
            # Bounded: whatever is not removed by then goes at the next start.
            remover.join(timeout=_REMOVER_JOIN_TIMEOUT_S)
        failed = not self._close_logs(clean)
        if clean and not failed:
            try:
                write_checkpoint(self.data_dir / RECOVERY_POINT_FILE,
                                 {tp: log.log_end_offset for tp, log in self._logs.items()})
                self._write_log_starts()
                write_atomically(self.data_dir / CLEAN_SHUTDOWN_FILE, b"")
            except OSError as exc:
                _log.error("writing shutdown checkpoints failed; the next start recovers the logs", error=str(exc))

    def _close_logs(self, clean: bool) -> bool:
        """Close every log; False if one failed. On a clean close, what the logs still have to write (a
        producer snapshot each, the files written since the last checkpoint made durable) is done for all
        of them first (`_write_for_close`), which records each outcome; then each log only closes its
        files. A log's own clean close would retry a failed step, on files already closed."""
        closed_ok = self._write_for_close() if clean else True
        for tp, log in self._logs.items():
            closed_ok = _close_log_files(tp, log) and closed_ok
        return closed_ok

    def _write_for_close(self) -> bool:
        """The snapshots of every log with data and the durability of what was written; False if any of it
        failed. Each outcome is recorded here: an fsync retried after a failure may report success with
        the data lost, so the logs' own close cannot be trusted to see the failure again. A log's files are
        closed as soon as its own steps are done: sealing opens each time index, and holding those of 10,000
        partitions next to their logs' descriptors ran out of descriptors.

        Where the system has syncfs(2) (Linux), the snapshots are written without an fsync each and one
        syncfs of the data directory's filesystem makes them and every log file durable at once, as Kafka's
        fsync per file does, before the checkpoints and the clean-shutdown marker. Each fsync flushes the
        disk's cache on its own where there is no journal commit to share (the bench machine's disk): for
        70 partitions written since an os.sync(), 280 fsyncs on 8 threads (a log, its two indexes and a new
        snapshot each) took 11.4-12.6 ms and one syncfs 3.1-3.3 (/tmp files, 8 rounds). With 20-200 MB of
        another program's pages dirty on the same filesystem, the two ways took about as long as each other
        (3 partitions, 4-6 alternating rounds).
        Elsewhere every file written since its last fsync gets one, on a few threads at once: ext4 commits
        concurrent fsyncs together, where one after another each waits for its own journal commit. Kafka's
        LogManager closes logs on a thread pool too."""
        with_data = [(tp, log) for tp, log in self._logs.items() if log.log_end_offset > 0 or log.unflushed_files()]
        if not with_data:
            return True  # nothing was ever written: nothing to flush or snapshot
        by_syncfs = can_sync_filesystem()
        unsynced: list[PartitionLog] = []  # by syncfs: the logs with something written since their last flush

        def finish(tp: TopicPartition, log: PartitionLog) -> bool:
            try:
                steps = log.prepare_close(durable=not by_syncfs)
                if by_syncfs and (steps or log.unflushed_files()):
                    unsynced.append(log)
                for step in steps:
                    step()
            except OSError as exc:
                _log.error("closing log failed", topic=tp[0], partition=tp[1], error=str(exc))
                return False
            finally:
                for segment in log.segments:
                    with contextlib.suppress(OSError):
                        segment.close()
            return True

        if by_syncfs:
            written = all([finish(tp, log) for tp, log in with_data])
            if unsynced:
                try:
                    sync_filesystem(self.data_dir)
                except OSError as exc:
                    _log.error("syncfs of the data directory failed at close", data_dir=str(self.data_dir),
                               error=str(exc))
                    return False
                for log in unsynced:
                    log.mark_flushed()
            return written
        if len(with_data) == 1:
            return finish(*with_data[0])
        with ThreadPoolExecutor(max_workers=min(_CLOSE_THREADS, len(with_data)),
                                thread_name_prefix="minikafka-log-close") as pool:
            return all(list(pool.map(finish, *zip(*with_data, strict=True))))

    # --- topics --------------------------------------------------------------------------

    def _register(self, meta: TopicMeta) -> None:
        self._topics[meta.name] = meta
        self._by_id[meta.topic_id] = meta

    def _partition_dir(self, topic: str, partition: int) -> Path:
        return self.data_dir / f"{topic}-{partition}"

    def _new_log(self, meta: TopicMeta, partition: int) -> PartitionLog:
        config = resolve_log_config(self.defaults, meta.configs)
        return PartitionLog(self._partition_dir(meta.name, partition), meta.name, partition, config,
                            self.clock.now_ms(), self.writer)

    def _create_partition(self, meta: TopicMeta, partition: int) -> None:
        """A new partition's directory, empty first segment and its two small state files.

        The state files are written without a temporary file or an fsync each: both are derived
        from the cluster metadata (fsynced once per request), and `load` writes them again after an
        unclean start if a crash lost them. That keeps creation at a few file operations per
        partition instead of four fsyncs and renames, which stalled the event loop for seconds."""
        self._logs[(meta.name, partition)] = self._make_partition(meta, partition)

    def _make_partition(self, meta: TopicMeta, partition: int) -> PartitionLog:
        log = self._new_log(meta, partition)
        log.create()
        try:
            _write_new_file(log.dir / PARTITION_METADATA_FILE, _partition_metadata(meta))
            _write_new_file(log.dir / LEADER_EPOCH_FILE, _leader_epoch_checkpoint(log))
        except OSError:
            log.close(clean=False)
            raise
        return log

    async def _make_partitions_in_slices(self, meta: TopicMeta, partitions: range) -> dict[int, PartitionLog]:
        """Make partitions, letting the event loop run every few milliseconds so other
        connections are answered while thousands are created. They stay out of `_logs` (no request
        can see them) until the caller registers them all; on failure the ones made are removed."""
        made: dict[int, PartitionLog] = {}
        try:
            slice_end = time.monotonic() + _CREATION_SLICE_S
            for partition in partitions:
                made[partition] = self._make_partition(meta, partition)
                if time.monotonic() >= slice_end:
                    await asyncio.sleep(0)
                    slice_end = time.monotonic() + _CREATION_SLICE_S
        except BaseException:
            self._discard_logs(meta.name, made)
            raise
        return made

    def _discard_logs(self, name: str, logs: Mapping[int, PartitionLog]) -> None:
        for partition, log in logs.items():
            with contextlib.suppress(OSError):
                log.close(clean=False)
            shutil.rmtree(self._partition_dir(name, partition), ignore_errors=True)

    def _repair_partition_files(self, meta: TopicMeta, log: PartitionLog) -> None:
        """After an unclean start: rewrite partition files a crash may have lost (never fsynced)."""
        expected = _partition_metadata(meta)
        path = log.dir / PARTITION_METADATA_FILE
        try:
            current = path.read_bytes()
        except FileNotFoundError:
            current = b""
        if current != expected:
            write_atomically(path, expected)
        epochs = log.dir / LEADER_EPOCH_FILE
        if not epochs.exists() or epochs.stat().st_size == 0:
            write_atomically(epochs, _leader_epoch_checkpoint(log))

    def _new_topic(self, name: str, partitions: int, configs: Mapping[str, str] | None,
                   internal: bool) -> TopicMeta:
        validate_topic_name(name)
        if name in self._topics or name in self._creating:
            raise TopicAlreadyExists(f"Topic '{name}' already exists.")
        if partitions < 1:
            raise InvalidPartitions("Number of partitions was set to an invalid non-positive value.")
        overrides = dict(configs or {})
        resolve_log_config(self.defaults, overrides)
        return TopicMeta(name, uuid.uuid4(), partitions, overrides, internal)

    def check_new_topic(self, name: str, configs: Mapping[str, str | None]) -> None:
        """What Kafka's controller checks of a new topic before its partitions, in its order: the name,
        that it does not exist yet, then its configs."""
        validate_topic_name(name)
        if name in self._topics or name in self._creating:
            raise TopicAlreadyExists(f"Topic '{name}' already exists.")
        resolve_log_config(self.defaults, configs)

    async def create_topic_async(self, name: str, partitions: int, configs: Mapping[str, str] | None = None, *,
                                 validate_only: bool = False) -> TopicMeta:
        """`create_topic` for request handlers: the event loop keeps serving other connections
        while the partitions are made, and the topic becomes visible only once all of them exist."""
        async with self._admin_lock:
            meta = self._new_topic(name, partitions, configs, internal=False)
            if validate_only:
                return meta
            self._creating.add(name)
            try:
                try:
                    made = await self._make_partitions_in_slices(meta, range(partitions))
                except OSError as exc:
                    raise KafkaStorageError(f"cannot create topic {name!r}: {exc.strerror or exc}") from exc
                self._register(meta)
                self._logs.update({(name, partition): log for partition, log in made.items()})
                try:
                    self._write_metadata()
                except OSError as exc:
                    self._forget_topic(meta)
                    raise KafkaStorageError(f"cannot create topic {name!r}: {exc.strerror or exc}") from exc
            finally:
                self._creating.discard(name)
            return meta

    def create_topic(self, name: str, partitions: int, configs: Mapping[str, str] | None = None, *,
                     validate_only: bool = False, internal: bool = False) -> TopicMeta:
        if internal and "segment.bytes" not in (configs or {}):
            # Kafka creates __consumer_offsets and __transaction_state with segment.bytes =
            # offsets.topic.segment.bytes / transaction.state.log.segment.bytes (100 MiB), so the
            # cleaner gets to compact them long before a 1 GiB segment rolls; a smaller broker-wide
            # log.segment.bytes still applies.
            segment_bytes = min(self.defaults.segment_bytes, INTERNAL_TOPIC_SEGMENT_BYTES)
            configs = {**(configs or {}), "segment.bytes": str(segment_bytes)}
        meta = self._new_topic(name, partitions, configs, internal)
        if validate_only:
            return meta
        self._register(meta)
        try:
            for partition in range(partitions):
                self._create_partition(meta, partition)
            self._write_metadata()
        except OSError as exc:
            # All or nothing: a topic whose directories or metadata could not be written is removed.
            self._forget_topic(meta)
            raise KafkaStorageError(f"cannot create topic {name!r}: {exc.strerror or exc}") from exc
        return meta

    def _forget_topic(self, meta: TopicMeta) -> None:
        self._topics.pop(meta.name, None)
        self._by_id.pop(meta.topic_id, None)
        self._drop_partitions(meta.name, range(meta.partitions))

    def _drop_partitions(self, name: str, partitions: range) -> None:
        for partition in partitions:
            log = self._logs.pop((name, partition), None)
            if log is not None:
                log.close(clean=False)
            shutil.rmtree(self._partition_dir(name, partition), ignore_errors=True)

    @contextlib.contextmanager
    def _disk(self, what: str) -> Iterator[None]:
        try:
            yield
        except OSError as exc:
            raise KafkaStorageError(f"{what}: {exc.strerror or exc}") from exc

    def delete_topic(self, name: str) -> None:
        with self._disk(f"cannot delete topic {name!r}"):
            self._delete_topic(name)

    def _delete_topic(self, name: str) -> None:
        meta = self._topics.pop(name, None)
        if meta is None:
            raise UnknownTopicOrPartition(f"topic {name!r} does not exist")
        del self._by_id[meta.topic_id]
        self._write_metadata()
        self.cleaner.forget(name)
        # As Kafka's LogManager.asyncDelete: each directory is renamed out of the way at once (one
        # cheap rename, so the name is free for a new topic) and its files are removed in the
        # background; a start after a crash removes whatever was left.
        doomed: list[Path] = []
        for partition in range(meta.partitions):
            log = self._logs.pop((name, partition), None)
            if log is not None:
                log.close(clean=False)
            directory = self._partition_dir(name, partition)
            target = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
            try:
                directory.rename(target)
            except FileNotFoundError:
                continue
            doomed.append(target)
        self._remove_in_background(doomed)
        self._write_log_starts()

    @property
    def admin_lock(self) -> asyncio.Lock:
        """Held while topics or partitions are being made between event-loop turns; a reset waits for it."""
        return self._admin_lock

    def reset(self, defaults: LogConfig) -> int:
        """Back to an empty data directory's state (a broker reset), keeping the cluster id and
        meta.properties: every topic goes, internal ones included (the coordinators create those again
        when first used, as on a first start), with the checkpoints, the cleaner's state and the topic
        defaults dynamic configs set (`defaults`: the static ones). Each partition directory is renamed
        out of the way at once and removed in the background, as `delete_topic` does, so the cost is a
        close and a rename per partition. Returns the number of topics removed.

        The caller holds `admin_lock`, so no topic is half made."""
        if self._cleaner is not None:
            self._cleaner.stop()  # abandons a cleaning in progress; a new cleaner starts with the next job
            self._cleaner = None
        # The metadata first: a crash part way leaves directories no topic names, never a topic whose
        # directories are gone.
        for name in (METADATA_FILE, RECOVERY_POINT_FILE, LOG_START_FILE, CLEANER_CHECKPOINT_FILE):
            (self.data_dir / name).unlink(missing_ok=True)
        # One suffix for the whole reset (each directory's name is unique already), and plain strings:
        # pathlib and a uuid per directory were a third of the time for 200 partitions.
        suffix = f".{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        base = f"{self.data_dir}{os.sep}"
        doomed: list[str] = []
        for (name, partition), log in self._logs.items():
            _close_log_files((name, partition), log)
            directory = f"{base}{name}-{partition}"
            try:
                os.rename(directory, directory + suffix)
            except FileNotFoundError:
                continue
            doomed.append(directory + suffix)
        removed = len(self._topics)
        # The logs are freed on the remover's thread, after the reset has answered.
        dropped = self._logs
        self._logs = {}
        self._topics.clear()
        self._by_id.clear()
        self.defaults = defaults
        self._remove_in_background(doomed, dropped)
        return removed

    def _remove_in_background(self, directories: Sequence[str | Path], garbage: object = None) -> None:
        """`garbage`: objects to free on the remover's thread rather than here."""
        if not directories:
            return
        self._reap_finished_removers()
        remover = threading.Thread(target=_remove_directories, args=(directories, garbage),
                                   name="minikafka-log-delete", daemon=True)
        remover.start()
        self._removers.append(remover)

    def _reap_finished_removers(self) -> None:
        self._removers = [remover for remover in self._removers if remover.is_alive()]

    def _remove_deleted_leftovers(self) -> None:
        # os.scandir, not Path.glob: a glob compiles its pattern to a regular expression at every start (2 ms of
        # a forked broker's 20).
        with os.scandir(self.data_dir) as entries:
            leftovers = [Path(entry.path) for entry in entries
                         if entry.name.endswith(DELETE_DIR_SUFFIX) and entry.is_dir()]
        self._remove_in_background(leftovers)

    def _check_growth(self, name: str, total: int) -> TopicMeta:
        meta = self._topics.get(name)
        if meta is None:
            raise UnknownTopicOrPartition(f"topic {name!r} does not exist")
        if total <= meta.partitions:
            raise InvalidPartitions(f"The topic {name} currently has {meta.partitions} partition(s); "
                                    f"{total} would not be an increase.")
        return meta

    async def create_partitions_async(self, name: str, total: int, *, validate_only: bool = False) -> None:
        """`create_partitions` for request handlers: sliced as `create_topic_async`; the new
        partitions (and the new count) become visible together once all of them exist."""
        async with self._admin_lock:
            meta = self._check_growth(name, total)
            if validate_only:
                return
            old = meta.partitions
            try:
                made = await self._make_partitions_in_slices(meta, range(old, total))
            except OSError as exc:
                raise KafkaStorageError(f"cannot add partitions to {name!r}: {exc.strerror or exc}") from exc
            if self._topics.get(name) is not meta:
                # Deleted while its partitions were being made (DeleteTopics is not serialized with us).
                self._discard_logs(name, made)
                raise UnknownTopicOrPartition(f"topic {name!r} was deleted while partitions were added")
            self._logs.update({(name, partition): log for partition, log in made.items()})
            meta.partitions = total
            try:
                self._write_metadata()
            except OSError as exc:
                meta.partitions = old
                self._drop_partitions(name, range(old, total))
                raise KafkaStorageError(f"cannot add partitions to {name!r}: {exc.strerror or exc}") from exc

    def create_partitions(self, name: str, total: int, *, validate_only: bool = False) -> None:
        meta = self._check_growth(name, total)
        if validate_only:
            return
        old = meta.partitions
        try:
            for partition in range(old, total):
                self._create_partition(meta, partition)
            meta.partitions = total
            self._write_metadata()
        except OSError as exc:
            meta.partitions = old
            self._drop_partitions(name, range(old, total))
            raise KafkaStorageError(f"cannot add partitions to {name!r}: {exc.strerror or exc}") from exc

    def alter_topic_configs(self, name: str, set_: Mapping[str, str], delete: Iterable[str], *,
                            validate_only: bool = False) -> None:
        meta = self._topics.get(name)
        configs = dict(meta.configs) if meta is not None else {}
        configs.update(set_)
        for key in delete:
            configs.pop(key, None)
        # Kafka's controller validates the configs before it looks the topic up (validateAlterConfig).
        config = resolve_log_config(self.defaults, configs)
        if meta is None:
            raise UnknownTopicOrPartition(f"The topic '{name}' does not exist.")
        if validate_only:
            return
        previous, meta.configs = meta.configs, configs
        try:
            with self._disk(f"cannot alter the configs of {name!r}"):
                self._write_metadata()
        except KafkaStorageError:
            meta.configs = previous
            raise
        for partition in range(meta.partitions):
            self._logs[(name, partition)].update_config(config)

    def topic(self, name: str) -> TopicMeta | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID | None) -> TopicMeta | None:
        return self._by_id.get(topic_id) if topic_id is not None else None

    def topics(self) -> list[TopicMeta]:
        return list(self._topics.values())

    def log_config(self, name: str) -> LogConfig:
        meta = self._topics[name]
        return resolve_log_config(self.defaults, meta.configs)

    def partition(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def partition_logs(self) -> list[tuple[TopicPartition, PartitionLog]]:
        return list(self._logs.items())

    def start_cleaning(self, crash_point: str | None = None) -> None:
        """The broker's log cleaner job (log.cleaner.backoff.ms): compact what is due, in the
        background on the event loop. `crash_point` (minikafka.cleaner.crash.point) is a test hook."""
        if self._cleaner is None and not any(log.config.compact for log in self._logs.values()):
            return  # nothing to compact: the cleaner's code loads with the first compacted log
        self.cleaner.crash_point_name = crash_point
        self.cleaner.start()

    def run_retention(self) -> None:
        now = self.clock.now_ms()
        changed = False
        cleaning = self._cleaner.in_progress if self._cleaner is not None else set()
        for (topic, partition), log in self._logs.items():
            if (topic, partition) in cleaning:
                continue  # the next check gets to it
            deleted = log.apply_retention(now)
            if deleted:
                changed = True
                _log.info("retention deleted segments", topic=topic, partition=partition, segments=deleted,
                          log_start_offset=log.log_start_offset)
        if changed:
            self._write_log_starts()

    def remove_expired_producers(self, expiration_ms: int) -> None:
        now = self.clock.now_ms()
        for (topic, partition), log in self._logs.items():
            expired = log.remove_expired_producers(now, expiration_ms)
            if expired:
                _log.info("expired producer ids", topic=topic, partition=partition, producer_ids=expired)

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        log = self._logs.get((topic, partition))
        if log is None:
            raise UnknownTopicOrPartition(f"{topic}-{partition} does not exist")
        if not log.config.delete:
            # Kafka's Partition.deleteRecordsOnLeader: a compact-only log loses records only by compaction.
            raise PolicyViolation(f"Records of partition {topic}-{partition} can not be deleted due to the "
                                  "configured policy")
        low = log.delete_records_before(offset)
        with self._disk(f"cannot record the new start of {topic}-{partition}"):
            self._write_log_starts()
        return low
