"""Parsing of the data source options (Spark passes them case-insensitively, keys lower-cased).

Options follow Spark's own Kafka source where one exists (`kafka.bootstrap.servers`, `subscribe`,
`subscribePattern`, `startingOffsets`, `endingOffsets`, `maxOffsetsPerTrigger`, `failOnDataLoss`,
`kafkaConsumer.pollTimeoutMs`, `topic`); every other `kafka.*` option goes to librdkafka unchanged,
without the prefix. The sink's own options start with `sink.`.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

EARLIEST = -2
LATEST = -1

# JSON offsets as Spark's Kafka source writes them: {"topic": {"0": 23, "1": -2}}.
OffsetSpec = Literal["earliest", "latest"] | dict[str, dict[str, int]]
SinkMode = Literal["task", "driver"]

# Keys the connector sets itself: a user value would break the reads' or the sink's guarantees.
_RESERVED_CONSUMER_KEYS = {"enable.auto.commit", "enable.auto.offset.store", "auto.offset.reset"}
_RESERVED_PRODUCER_KEYS = {"transactional.id", "enable.idempotence"}
# Consumer-only keys that librdkafka would warn about on a producer.
_CONSUMER_ONLY_KEYS = {"isolation.level", "group.id", "fetch.wait.max.ms", "fetch.min.bytes", "max.poll.interval.ms",
                       "session.timeout.ms", "enable.partition.eof"}


class OptionError(ValueError):
    """A data source option is missing or invalid; the message names the option."""


def _get(options: Mapping[str, str], name: str) -> str | None:
    # Spark lower-cases option keys (CaseInsensitiveDict); plain dicts from tests may not be.
    value = options.get(name.lower())
    if value is None:
        value = options.get(name)
    return value


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = _get(options, name)
    if value is None:
        return default
    if value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise OptionError(f"option {name} must be true or false, got {value!r}")


def _positive_int(options: Mapping[str, str], name: str) -> int | None:
    value = _get(options, name)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        raise OptionError(f"option {name} must be an integer, got {value!r}") from None
    if number <= 0:
        raise OptionError(f"option {name} must be positive, got {number}")
    return number


def kafka_config(options: Mapping[str, str]) -> dict[str, str]:
    """Every `kafka.*` option without its prefix: the librdkafka configuration."""
    config = {key[len("kafka."):]: value for key, value in options.items() if key.lower().startswith("kafka.")}
    if not config.get("bootstrap.servers"):
        raise OptionError("option kafka.bootstrap.servers is required")
    return config


def parse_offsets(value: str | None, *, name: str, default: Literal["earliest", "latest"],
                  allow_earliest: bool = True) -> OffsetSpec:
    """`earliest`, `latest` or Spark's JSON form; -2 means earliest and -1 latest inside the JSON."""
    if value is None:
        return default
    text = value.strip()
    if text.lower() in ("earliest", "latest"):
        if text.lower() == "earliest" and not allow_earliest:
            raise OptionError(f"option {name} cannot be earliest")
        return "earliest" if text.lower() == "earliest" else "latest"
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option {name} must be earliest, latest or JSON like {{\"t\":{{\"0\":5}}}}: {exc}") from None
    if not isinstance(parsed, dict) or not all(isinstance(v, dict) for v in parsed.values()):
        raise OptionError(f"option {name} must map topic -> {{partition: offset}}, got {text!r}")
    result: dict[str, dict[str, int]] = {}
    for topic, partitions in parsed.items():
        result[str(topic)] = {}
        for partition, offset in partitions.items():
            if not str(partition).lstrip("-").isdigit() or not isinstance(offset, int) or isinstance(offset, bool):
                raise OptionError(f"option {name}: bad entry {topic!r}/{partition!r}: {offset!r}")
            if offset < EARLIEST or (offset == EARLIEST and not allow_earliest):
                raise OptionError(f"option {name}: offset {offset} for {topic}/{partition} is not allowed")
            result[str(topic)][str(int(partition))] = offset
    return result


@dataclass(frozen=True)
class SourceOptions:
    """What the reader needs; plain data so it pickles to executors."""

    config: dict[str, str]
    subscribe: tuple[str, ...] = ()
    pattern: str | None = None
    starting: OffsetSpec = "latest"
    ending: OffsetSpec = "latest"
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    poll_timeout_s: float = 120.0
    read_committed: bool = True

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
        config = kafka_config(options)
        for key in _RESERVED_CONSUMER_KEYS & config.keys():
            raise OptionError(f"option kafka.{key} is set by the connector and cannot be given")
        isolation = config.setdefault("isolation.level", "read_committed")
        if isolation not in ("read_committed", "read_uncommitted"):
            raise OptionError(f"option kafka.isolation.level must be read_committed or read_uncommitted, "
                              f"got {isolation!r}")
        subscribe_value, pattern = _get(options, "subscribe"), _get(options, "subscribePattern")
        if (subscribe_value is None) == (pattern is None):
            raise OptionError("exactly one of the options subscribe and subscribePattern is required")
        subscribe = tuple(t.strip() for t in (subscribe_value or "").split(",") if t.strip())
        if subscribe_value is not None and not subscribe:
            raise OptionError("option subscribe must name at least one topic")
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise OptionError(f"option subscribePattern is not a valid regular expression: {exc}") from None
        if streaming and _get(options, "endingOffsets") is not None:
            raise OptionError("option endingOffsets is for batch queries only")
        if not streaming and _get(options, "maxOffsetsPerTrigger") is not None:
            raise OptionError("option maxOffsetsPerTrigger is for streaming queries only")
        # Spark's defaults: a stream starts at the end of the topic, a batch read covers all of it.
        starting = parse_offsets(_get(options, "startingOffsets"), name="startingOffsets",
                                 default="latest" if streaming else "earliest")
        ending = parse_offsets(_get(options, "endingOffsets"), name="endingOffsets", default="latest",
                               allow_earliest=False)
        if ending != "latest" and not isinstance(ending, dict):
            raise OptionError("option endingOffsets must be latest or JSON")
        poll_timeout_ms = _positive_int(options, "kafkaConsumer.pollTimeoutMs") or 120_000
        return cls(config=config, subscribe=subscribe, pattern=pattern, starting=starting, ending=ending,
                   max_offsets_per_trigger=_positive_int(options, "maxOffsetsPerTrigger"),
                   fail_on_data_loss=_bool(options, "failOnDataLoss", True), poll_timeout_s=poll_timeout_ms / 1000,
                   read_committed=isolation == "read_committed")


@dataclass(frozen=True)
class Failpoint:
    """A fault injected for tests: fires once, the first time it is reached with a missing flag file.

    `point`: task.before_commit (raise after producing, before the commit), task.open_transaction (exit the
    Python worker with the transaction open), task.after_commit (raise after the commit),
    driver.after_sink_commit (in the driver's commit(), after the batch is in Kafka, before Spark writes
    its commit log). `action`: raise, exit (os._exit), or hang (create the flag, then sleep until killed).
    """

    point: str
    flag: str
    action: Literal["raise", "exit", "hang"] = "raise"
    partition: int | None = None
    batch: int | None = None


@dataclass(frozen=True)
class SinkOptions:
    config: dict[str, str]
    topic: str | None = None
    mode: SinkMode = "task"
    prefix: str = ""
    marker_topic: str = ""
    timeout_s: float = 60.0
    driver_max_rows: int = 1_000_000
    failpoints: tuple[Failpoint, ...] = field(default_factory=tuple)

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> SinkOptions:
        config = kafka_config(options)
        for key in _RESERVED_PRODUCER_KEYS & config.keys():
            raise OptionError(f"option kafka.{key} is set by the sink and cannot be given")
        for key in _CONSUMER_ONLY_KEYS & config.keys():
            del config[key]
        # Spark's Kafka sink partitions keyed records with Java's murmur2; librdkafka's default differs.
        config.setdefault("partitioner", "murmur2_random")
        mode = (_get(options, "sink.mode") or "task").strip().lower()
        if mode not in ("task", "driver"):
            raise OptionError(f"option sink.mode must be task or driver, got {mode!r}")
        prefix = _get(options, "sink.transactionalIdPrefix")
        if not prefix:
            if streaming:
                # The prefix names the transactional ids and the replay markers: it must survive restarts.
                raise OptionError("option sink.transactionalIdPrefix is required for streaming writes: a name "
                                  "unique to this query and kept across its restarts")
            prefix = f"minikafka-batch-{uuid.uuid4().hex}"
        topic = _get(options, "topic")
        marker_topic = _get(options, "sink.markerTopic") or topic
        if not marker_topic:
            raise OptionError("option topic or sink.markerTopic is required: the sink commits its replay markers "
                              "for partition 0 of that (existing) topic")
        failpoints = tuple(Failpoint(**spec) for spec in json.loads(_get(options, "test.failpoints") or "[]"))
        return cls(config=config, topic=topic, mode=mode,  # type: ignore[arg-type]
                   prefix=prefix, marker_topic=marker_topic,
                   timeout_s=(_positive_int(options, "sink.timeoutMs") or 60_000) / 1000,
                   driver_max_rows=_positive_int(options, "sink.driver.maxRows") or 1_000_000,
                   failpoints=failpoints)
