"""Offsets: topic discovery, earliest/latest lookups and the per-partition ranges of a read.

Offsets travel through Spark as JSON-able dicts in the layout of Spark's Kafka source,
`{"topic": {"0": 23, "1": 7}}` (JSON object keys are strings); inside this module they are
`{(topic, partition): offset}`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from minikafka.pipeline.options import EARLIEST, LATEST, OptionError
from minikafka.pipeline.options import OffsetSpec as OffsetOption

TP = tuple[str, int]
Offsets = dict[TP, int]
JsonOffsets = dict[str, dict[str, int]]


def to_json(offsets: Mapping[TP, int]) -> JsonOffsets:
    result: JsonOffsets = {}
    for (topic, partition), offset in sorted(offsets.items()):
        result.setdefault(topic, {})[str(partition)] = offset
    return result


def from_json(offsets: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {(topic, int(partition)): int(offset)
            for topic, parts in offsets.items() for partition, offset in parts.items()}


@dataclass(frozen=True)
class OffsetRange:
    """What one Spark task reads: offsets [start, end) of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int


def plan_ranges(start: Mapping[TP, int], end: Mapping[TP, int], *, fail_on_data_loss: bool) -> list[OffsetRange]:
    """One range per partition with data; sorted so a replayed batch gets the same task order."""
    ranges = []
    for (topic, partition), until in sorted(end.items()):
        since = start[(topic, partition)]
        if until < since:
            # The partition went backwards: the topic was deleted and recreated, or records were lost.
            if fail_on_data_loss:
                raise RuntimeError(f"{topic}-{partition}: end offset {until} is before start offset {since}; "
                                   "records may have been lost (set failOnDataLoss=false to skip them)")
            continue
        if until > since:
            ranges.append(OffsetRange(topic, partition, since, until))
    return ranges


def rate_limit(start: Mapping[TP, int], latest: Mapping[TP, int], max_offsets: int) -> Offsets:
    """Split `max_offsets` across partitions in proportion to their backlog, exactly (largest remainder).

    Spark's Kafka source does the same proportional split but rounds each share on its own, so its total
    can differ from the limit by a few offsets; here the total is exactly min(limit, backlog).
    """
    backlog = {tp: max(0, latest[tp] - start[tp]) for tp in latest}
    total = sum(backlog.values())
    if total <= max_offsets:
        return dict(latest)
    # Integer arithmetic: share = max_offsets * size / total as quotient and remainder, no float rounding.
    granted = {tp: max_offsets * size // total for tp, size in backlog.items()}
    remainders = {tp: max_offsets * size % total for tp, size in backlog.items()}
    missing = max_offsets - sum(granted.values())
    for tp in sorted(remainders, key=lambda tp: (-remainders[tp], tp))[:missing]:
        granted[tp] += 1
    # A partition that went backwards keeps its (lower) latest offset so that planning reports the loss.
    return {tp: latest[tp] if latest[tp] < start[tp] else start[tp] + granted[tp] for tp in latest}


class OffsetClient:
    """Metadata and ListOffsets through librdkafka's AdminClient; works with any Kafka-compatible broker."""

    def __init__(self, config: Mapping[str, str], *, read_committed: bool, timeout_s: float = 30.0) -> None:
        admin_config: dict[str, str | int | float | bool] = {
            k: v for k, v in config.items() if k not in ("isolation.level", "group.id")}
        self._admin = AdminClient(admin_config)
        # Under read_committed the readable end of a partition is its last stable offset (LSO), not its
        # high watermark: records after an open transaction's first record may still be aborted.
        self._isolation = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
        self._timeout_s = timeout_s

    def partitions(self, subscribe: Iterable[str], pattern: str | None) -> list[TP]:
        """Partitions of the subscribed topics that exist now; a missing topic has none (yet).

        The whole-cluster metadata request never auto-creates a topic, unlike a request naming it.
        """
        deadline = time.monotonic() + self._timeout_s
        while True:
            metadata = self._admin.list_topics(timeout=self._timeout_s)
            wanted = set(subscribe)
            compiled = re.compile(pattern) if pattern is not None else None
            result: list[TP] = []
            retry = False
            for name, topic in metadata.topics.items():
                if compiled is not None:
                    # Like Java's Pattern.matches and the Java consumer's exclude.internal.topics.
                    if name.startswith("__") or not compiled.fullmatch(name):
                        continue
                elif name not in wanted:
                    continue
                if topic.error is not None and topic.error.retriable():
                    retry = True
                result.extend((name, partition) for partition in topic.partitions)
            if not retry or time.monotonic() >= deadline:
                return sorted(result)
            time.sleep(0.1)

    def _list(self, tps: Iterable[TP], spec: OffsetSpec) -> Offsets:
        tps = list(tps)
        if not tps:
            return {}
        futures = self._admin.list_offsets({TopicPartition(t, p): spec for t, p in tps},
                                           isolation_level=self._isolation, request_timeout=self._timeout_s)
        result: Offsets = {}
        for tp, future in futures.items():
            try:
                result[(tp.topic, tp.partition)] = future.result(timeout=self._timeout_s).offset
            except KafkaException as exc:
                raise RuntimeError(f"ListOffsets for {tp.topic}-{tp.partition} failed: {exc}") from exc
        return result

    def earliest(self, tps: Iterable[TP]) -> Offsets:
        return self._list(tps, OffsetSpec.earliest())

    def latest(self, tps: Iterable[TP]) -> Offsets:
        return self._list(tps, OffsetSpec.latest())

    def resolve(self, option: OffsetOption, tps: list[TP], *, name: str) -> Offsets:
        """Offsets of `tps` for an earliest/latest/JSON option; partitions absent from the JSON get `default`.

        Like Spark, a JSON option must name every partition it applies to; -2 and -1 are resolved here.
        """
        if option == "earliest":
            return self.earliest(tps)
        if option == "latest":
            return self.latest(tps)
        assert isinstance(option, dict)
        given = from_json(option)
        missing = [tp for tp in tps if tp not in given]
        if missing:
            raise OptionError(f"option {name} has no offset for {', '.join(f'{t}-{p}' for t, p in missing)}")
        earliest = self.earliest([tp for tp in tps if given[tp] == EARLIEST])
        latest = self.latest([tp for tp in tps if given[tp] == LATEST])
        return {tp: earliest.get(tp, latest.get(tp, given[tp])) for tp in tps}
