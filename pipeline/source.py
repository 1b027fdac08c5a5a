"""Batch and streaming readers of the "minikafka" data source.

Planning (which partitions, which offsets) runs on the driver through an AdminClient; reading runs on
the executors, one Spark task per topic-partition offset range (see reading.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from minikafka.pipeline.offsets import (
    JsonOffsets,
    OffsetClient,
    OffsetRange,
    Offsets,
    from_json,
    plan_ranges,
    rate_limit,
    to_json,
)
from minikafka.pipeline.options import SourceOptions
from minikafka.pipeline.reading import read_range
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow


class KafkaInputPartition(InputPartition):
    """One Spark task: an offset range of one topic-partition."""

    def __init__(self, rng: OffsetRange) -> None:
        super().__init__(rng)
        self.range = rng


class _Planner:
    """Driver-side state shared by both readers; the AdminClient is not pickled to executors."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._client: OffsetClient | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_client"] = None
        return state

    @property
    def client(self) -> OffsetClient:
        if self._client is None:
            self._client = OffsetClient(self.options.config, read_committed=self.options.read_committed)
        return self._client

    def current_partitions(self) -> list[tuple[str, int]]:
        return self.client.partitions(self.options.subscribe, self.options.pattern)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, KafkaInputPartition):
            # Spark runs one task with InputPartition(None) when partitions() planned none (no data).
            return iter(())
        return read_range(self.options.config, partition.range, fail_on_data_loss=self.options.fail_on_data_loss,
                          poll_timeout_s=self.options.poll_timeout_s)


class KafkaBatchReader(_Planner, DataSourceReader):
    """spark.read: startingOffsets (default earliest) to endingOffsets (default latest), fixed at planning."""

    def partitions(self) -> Sequence[InputPartition]:
        tps = self.current_partitions()
        start = self.client.resolve(self.options.starting, tps, name="startingOffsets")
        end = self.client.resolve(self.options.ending, tps, name="endingOffsets")
        ranges = plan_ranges(start, end, fail_on_data_loss=self.options.fail_on_data_loss)
        return [KafkaInputPartition(rng) for rng in ranges]


class KafkaStreamReader(_Planner, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """spark.readStream: offsets as {"topic": {"partition": offset}}; Spark checkpoints them.

    Partitions that appear while the query runs are read from their earliest offset, as Spark's Kafka
    source does. Nothing is committed to Kafka: the checkpoint is the only record of progress.
    """

    def __init__(self, options: SourceOptions) -> None:
        super().__init__(options)
        self._target: Offsets | None = None

    def initialOffset(self) -> JsonOffsets:
        tps = self.current_partitions()
        return to_json(self.client.resolve(self.options.starting, tps, name="startingOffsets"))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        # Trigger.AvailableNow: read up to what exists now, in as many batches as the read limit needs.
        self._target = self.client.latest(self.current_partitions())

    def _start_offsets(self, start: Offsets, tps: list[tuple[str, int]]) -> Offsets:
        """`start` plus the earliest offset of partitions it does not know yet (new since the last batch)."""
        return {**self.client.earliest([tp for tp in tps if tp not in start]), **start}

    def latestOffset(self, start: JsonOffsets, limit: ReadLimit) -> JsonOffsets:
        begin = from_json(start)
        tps = self.current_partitions()
        if self._target is not None:
            tps = [tp for tp in tps if tp in self._target]
        latest = self.client.latest(tps)
        if self._target is not None:
            latest = {tp: min(offset, self._target[tp]) for tp, offset in latest.items()}
        begin = self._start_offsets(begin, tps)
        # Partitions that vanished (topic deleted) keep their last offset; planning reports the loss.
        latest = {**{tp: offset for tp, offset in begin.items() if tp not in latest}, **latest}
        if isinstance(limit, ReadMaxRows):
            # Admission control counts offsets, like Spark's maxOffsetsPerTrigger (markers included).
            latest = rate_limit(begin, latest, limit.max_rows)
        return to_json(latest)

    def partitions(self, start: JsonOffsets, end: JsonOffsets) -> Sequence[InputPartition]:
        finish = from_json(end)
        begin = self._start_offsets(from_json(start), list(finish))
        ranges = plan_ranges(begin, finish, fail_on_data_loss=self.options.fail_on_data_loss)
        return [KafkaInputPartition(rng) for rng in ranges]

    def commit(self, end: JsonOffsets) -> None:
        """Nothing to do: progress lives in Spark's checkpoint, not in Kafka consumer groups."""

    def stop(self) -> None:
        self._client = None
