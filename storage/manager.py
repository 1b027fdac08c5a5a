"""LogManager: topics, their partition logs, and the per-log-dir files Kafka keeps.

Per log dir: `meta.properties`, `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
`.kafka_cleanshutdown` (present only between a clean close and the next start), and
`__cluster_metadata.json`, which stands in for Kafka's KRaft metadata log: topic ids, partition
counts and config overrides. Per partition dir: `partition.metadata` and `leader-epoch-checkpoint`.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import shutil
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from .checkpoint import read_checkpoint, write_atomically, write_checkpoint
from .clock import Clock
from .config import LogConfig, resolve_log_config
from .errors import InvalidPartitions, InvalidTopic, KafkaStorageError, TopicAlreadyExists, UnknownTopicOrPartition
from .files import OS_WRITER, FileWriter
from .log import PartitionLog

_log = structlog.get_logger("minikafka.storage")

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"
METADATA_FILE = "__cluster_metadata.json"
META_PROPERTIES = "meta.properties"
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_LENGTH = 249


def kafka_uuid(value: uuid.UUID) -> str:
    """Kafka prints Uuids as URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def validate_topic_name(name: str) -> None:
    if not name:
        raise InvalidTopic("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopic(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_LENGTH:
        raise InvalidTopic(f"topic name is longer than {MAX_TOPIC_LENGTH} characters")
    if not _LEGAL_TOPIC.match(name):
        raise InvalidTopic(f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_' and '-'")


@dataclass(slots=True)
class TopicMeta:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False


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
                self._logs[tp] = log
        if not clean and self._logs:
            _log.info("recovered logs after unclean shutdown", partitions=len(self._logs))
        marker.unlink(missing_ok=True)

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
        failed = False
        for (topic, partition), log in self._logs.items():
            try:
                log.close(clean)
            except OSError as exc:
                failed = True
                _log.error("closing log failed", topic=topic, partition=partition, error=str(exc))
                for segment in log.segments:
                    with contextlib.suppress(OSError):
                        segment.close()
        if clean and not failed:
            try:
                write_checkpoint(self.data_dir / RECOVERY_POINT_FILE,
                                 {tp: log.log_end_offset for tp, log in self._logs.items()})
                self._write_log_starts()
                write_atomically(self.data_dir / CLEAN_SHUTDOWN_FILE, b"")
            except OSError as exc:
                _log.error("writing shutdown checkpoints failed; the next start recovers the logs", error=str(exc))

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
        log = self._new_log(meta, partition)
        log.open(recovery_point=0, log_start_offset=0, clean=True)
        metadata = f"version: 0\ntopic_id: {kafka_uuid(meta.topic_id)}\n"
        write_atomically(log.dir / "partition.metadata", metadata.encode())
        write_atomically(log.dir / "leader-epoch-checkpoint", f"0\n1\n{log.leader_epoch} 0\n".encode())
        self._logs[(meta.name, partition)] = log

    def create_topic(self, name: str, partitions: int, configs: Mapping[str, str] | None = None, *,
                     validate_only: bool = False, internal: bool = False) -> TopicMeta:
        validate_topic_name(name)
        if name in self._topics:
            raise TopicAlreadyExists(f"topic {name!r} already exists")
        if partitions < 1:
            raise InvalidPartitions(f"number of partitions must be at least 1, got {partitions}")
        overrides = dict(configs or {})
        resolve_log_config(self.defaults, overrides)
        meta = TopicMeta(name, uuid.uuid4(), partitions, overrides, internal)
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
        for partition in range(meta.partitions):
            log = self._logs.pop((name, partition), None)
            if log is not None:
                log.delete()
            shutil.rmtree(self._partition_dir(name, partition), ignore_errors=True)
        self._write_log_starts()

    def create_partitions(self, name: str, total: int, *, validate_only: bool = False) -> None:
        meta = self._topics.get(name)
        if meta is None:
            raise UnknownTopicOrPartition(f"topic {name!r} does not exist")
        if total <= meta.partitions:
            raise InvalidPartitions(f"topic {name} has {meta.partitions} partitions; {total} is not more")
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
        if meta is None:
            raise UnknownTopicOrPartition(f"topic {name!r} does not exist")
        configs = dict(meta.configs)
        configs.update(set_)
        for key in delete:
            configs.pop(key, None)
        config = resolve_log_config(self.defaults, configs)
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

    def run_retention(self) -> None:
        now = self.clock.now_ms()
        changed = False
        for (topic, partition), log in self._logs.items():
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
        low = log.delete_records_before(offset)
        with self._disk(f"cannot record the new start of {topic}-{partition}"):
            self._write_log_starts()
        return low
