"""Topic-level log configuration: Kafka's keys, defaults, broker synonyms and validation."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from minikafka.storage.errors import InvalidConfig

LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    retention_ms: int = 604800000
    retention_bytes: int = -1
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10485760
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_after_max_ms: int = 3600000
    message_timestamp_before_max_ms: int = LONG_MAX
    cleanup_policy: str = "delete"
    file_delete_delay_ms: int = 60000
    min_insync_replicas: int = 1
    compression_type: str = "producer"
    delete_retention_ms: int = 86400000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    # cleanup.policy parsed once: every append asks whether the topic is compacted
    compact: bool = field(init=False, repr=False, compare=False)
    delete: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        policies = {part.strip() for part in self.cleanup_policy.split(",")}
        object.__setattr__(self, "compact", "compact" in policies)
        object.__setattr__(self, "delete", "delete" in policies)


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: str  # Kafka ConfigDef type names: int, long, boolean, string, list, double
    default: str
    broker_synonym: str | None
    field: str | None  # LogConfig attribute it sets, if minikafka acts on it
    doc: str
    # Kafka's ConfigDef validator: given the parsed value, the offending value and why, or None if valid.
    check: Callable[[object], tuple[object, str] | None] | None = None


def _one_of(*allowed: str) -> Callable[[object], tuple[object, str] | None]:
    """Kafka's ValidString/ValidList.in: a list is checked item by item and the first bad item is named."""
    reason = f"String must be one of: {', '.join(allowed)}"

    def check(value: object) -> tuple[object, str] | None:
        items = value if isinstance(value, list) else [value]
        bad = next((item for item in items if item not in allowed), None)
        return None if bad is None else (bad, reason)
    return check


def _between(minimum: int, maximum: int | None = None) -> Callable[[object], tuple[object, str] | None]:
    """Kafka's Range.atLeast/between."""
    def check(value: object) -> tuple[object, str] | None:
        assert isinstance(value, int | float)
        if value < minimum:
            return value, f"Value must be at least {minimum}"
        if maximum is not None and value > maximum:
            return value, f"Value must be no more than {maximum}"
        return None
    return check


def _at_least(minimum: int) -> Callable[[object], tuple[object, str] | None]:
    return _between(minimum)


_DEFS = [
    ConfigDef("cleanup.policy", "list", "delete", "log.cleanup.policy", "cleanup_policy",
              "delete and/or compact (storage/cleaner.py)", _one_of("compact", "delete")),
    ConfigDef("compression.type", "string", "producer", "compression.type", "compression_type",
              "Final compression type; minikafka keeps batches as the producer sent them",
              _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    ConfigDef("delete.retention.ms", "long", "86400000", "log.cleaner.delete.retention.ms", "delete_retention_ms",
              "How long tombstones are kept by compaction", _at_least(0)),
    ConfigDef("file.delete.delay.ms", "long", "60000", "log.segment.delete.delay.ms", "file_delete_delay_ms",
              "Delay before deleting a file from the filesystem", _at_least(0)),
    ConfigDef("flush.messages", "long", str(LONG_MAX), "log.flush.interval.messages", None,
              "Messages between forced fsyncs", _at_least(1)),
    ConfigDef("flush.ms", "long", str(LONG_MAX), "log.flush.interval.ms", None,
              "Time between forced fsyncs", _at_least(0)),
    ConfigDef("index.interval.bytes", "int", "4096", "log.index.interval.bytes", "index_interval_bytes",
              "Bytes between offset index entries", _at_least(0)),
    ConfigDef("max.compaction.lag.ms", "long", str(LONG_MAX), "log.cleaner.max.compaction.lag.ms",
              "max_compaction_lag_ms",
              "Maximum time a message stays ineligible for compaction", _at_least(1)),
    ConfigDef("max.message.bytes", "int", "1048588", "message.max.bytes", "max_message_bytes",
              "Largest record batch size allowed", _at_least(0)),
    ConfigDef("message.timestamp.type", "string", "CreateTime", "log.message.timestamp.type",
              "message_timestamp_type", "CreateTime or LogAppendTime", _one_of("CreateTime", "LogAppendTime")),
    ConfigDef("message.timestamp.after.max.ms", "long", "3600000", "log.message.timestamp.after.max.ms",
              "message_timestamp_after_max_ms", "Allowed CreateTime lead over the broker clock", _at_least(0)),
    ConfigDef("message.timestamp.before.max.ms", "long", str(LONG_MAX), "log.message.timestamp.before.max.ms",
              "message_timestamp_before_max_ms", "Allowed CreateTime lag behind the broker clock", _at_least(0)),
    ConfigDef("min.cleanable.dirty.ratio", "double", "0.5", "log.cleaner.min.cleanable.ratio",
              "min_cleanable_dirty_ratio",
              "Dirty ratio that triggers compaction", _between(0, 1)),
    ConfigDef("min.compaction.lag.ms", "long", "0", "log.cleaner.min.compaction.lag.ms", "min_compaction_lag_ms",
              "Minimum time a message stays uncompacted", _at_least(0)),
    ConfigDef("min.insync.replicas", "int", "1", "min.insync.replicas", "min_insync_replicas",
              "Minimum in-sync replicas for acks=all", _at_least(1)),
    ConfigDef("preallocate", "boolean", "false", "log.preallocate", None, "Preallocate segment files"),
    ConfigDef("retention.bytes", "long", "-1", "log.retention.bytes", "retention_bytes",
              "Largest size of a partition before old segments are deleted; -1 = unlimited", _at_least(-1)),
    ConfigDef("retention.ms", "long", "604800000", "log.retention.ms", "retention_ms",
              "Age after which old segments are deleted; -1 = unlimited", _at_least(-1)),
    ConfigDef("segment.bytes", "int", "1073741824", "log.segment.bytes", "segment_bytes",
              "Segment file size before a roll", _at_least(14)),
    ConfigDef("segment.index.bytes", "int", "10485760", "log.index.size.max.bytes", "segment_index_bytes",
              "Largest offset index size", _at_least(8)),
    ConfigDef("segment.jitter.ms", "long", "0", "log.roll.jitter.ms", "segment_jitter_ms",
              "Random jitter subtracted from segment.ms", _at_least(0)),
    ConfigDef("segment.ms", "long", "604800000", "log.roll.ms", "segment_ms",
              "Time before a segment rolls even if not full", _at_least(1)),
    ConfigDef("unclean.leader.election.enable", "boolean", "false", "unclean.leader.election.enable", None,
              "Single node: no effect"),
]

TOPIC_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _DEFS}

# Broker keys that set topic defaults, beyond each topic config's own synonym.
_EXTRA_BROKER_KEYS = {
    "log.retention.hours", "log.retention.minutes", "log.roll.hours", "log.roll.jitter.hours",
    "log.retention.check.interval.ms", "log.dirs", "log.dir", "log.flush.offset.checkpoint.interval.ms",
}
BROKER_LOG_KEYS = frozenset({d.broker_synonym for d in _DEFS if d.broker_synonym} | _EXTRA_BROKER_KEYS)


_JAVA_TYPE_NAMES = {"int": "INT", "long": "LONG", "double": "DOUBLE"}
_INT_BOUNDS = {"int": 2**31, "long": 2**63}


def _parse(definition: ConfigDef, value: str) -> object:
    """The value as Kafka's ConfigDef.parseType reads it; a bad one raises with Kafka's message."""
    trimmed = value.strip()
    kind = definition.type
    try:
        if kind in _INT_BOUNDS:
            number = int(trimmed)
            if not -_INT_BOUNDS[kind] <= number < _INT_BOUNDS[kind]:
                raise ValueError(trimmed)
            return number
        if kind == "double":
            return float(trimmed)
    except ValueError:
        raise _invalid_value(definition.name, value, f"Not a number of type {_JAVA_TYPE_NAMES[kind]}") from None
    if kind == "boolean":
        if trimmed.lower() not in ("true", "false"):
            raise _invalid_value(definition.name, value, "Expected value to be either true or false")
        return trimmed.lower() == "true"
    if kind == "list":
        return [item.strip() for item in trimmed.split(",") if item.strip()]
    return trimmed


def _invalid_value(name: str, value: object, reason: str) -> InvalidConfig:
    """Kafka's ConfigException(name, value, message)."""
    return InvalidConfig(f"Invalid value {value} for configuration {name}: {reason}")


def _convert(definition: ConfigDef, value: str) -> object:
    parsed = _parse(definition, value)
    problem = definition.check(parsed) if definition.check is not None else None
    if problem is not None:
        raise _invalid_value(definition.name, *problem)
    return value.strip() if definition.type in ("list", "string") else parsed


def resolve_log_config(defaults: LogConfig, overrides: Mapping[str, str | None]) -> LogConfig:
    """Apply topic-level overrides to the broker defaults; unknown keys and bad values raise."""
    # CreateTopics carries configs as nullable strings on the wire; Kafka refuses all null ones at
    # once (ReplicationControlManager.computeConfigChanges) before looking at any value.
    null_keys = [key for key, value in overrides.items() if value is None]
    if null_keys:
        raise InvalidConfig(f"Null value not supported for topic configs: {','.join(null_keys)}")
    present = {key: value for key, value in overrides.items() if value is not None}
    # Kafka's LogConfig.validate: every name is checked before any value.
    unknown = next((key for key in present if key not in TOPIC_CONFIGS), None)
    if unknown is not None:
        raise InvalidConfig(f"Unknown topic config name: {unknown}")
    changes: dict[str, Any] = {}
    for key, value in present.items():
        definition = TOPIC_CONFIGS[key]
        converted = _convert(definition, value)
        if definition.field is not None:
            changes[definition.field] = converted
    config = replace(defaults, **changes) if changes else defaults
    if config.min_compaction_lag_ms > config.max_compaction_lag_ms:
        # Kafka's LogConfig.validateValues
        raise InvalidConfig(f"conflict topic config setting min.compaction.lag.ms ({config.min_compaction_lag_ms}) "
                            f"> max.compaction.lag.ms ({config.max_compaction_lag_ms})")
    return config


def log_config_from_broker_properties(props: Mapping[str, str]) -> LogConfig:
    """Broker defaults for topics from server.properties keys, with Kafka's precedence rules."""
    changes: dict[str, Any] = {}
    for definition in _DEFS:
        key = definition.broker_synonym
        if key and key in props and definition.field is not None:
            changes[definition.field] = _convert(replace(definition, name=key), props[key])

    def first(*candidates: tuple[str, int]) -> int | None:
        for key, scale in candidates:
            if key in props:
                try:
                    return int(props[key]) * scale
                except ValueError:
                    kind = "LONG" if key.endswith(".ms") else "INT"
                    raise _invalid_value(key, props[key], f"Not a number of type {kind}") from None
        return None

    retention = first(("log.retention.ms", 1), ("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000))
    if retention is not None:
        changes["retention_ms"] = -1 if retention < 0 else retention
    roll = first(("log.roll.ms", 1), ("log.roll.hours", 3_600_000))
    if roll is not None:
        changes["segment_ms"] = roll
    known = {f.name for f in fields(LogConfig) if f.init}
    return replace(LogConfig(), **{k: v for k, v in changes.items() if k in known})
