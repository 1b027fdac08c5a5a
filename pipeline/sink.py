"""The sink: Spark's Kafka-sink columns written in Kafka transactions, with replay markers.

A replay marker is a consumer-group offset committed inside the same Kafka transaction as the records
(sendOffsetsToTransaction): group `<prefix>-<partitionId>` (task mode) or `<prefix>-driver` (driver
mode) gets offset batchId + 1 on partition 0 of the marker topic. The marker commits or aborts
together with the records, so after initTransactions (which completes or aborts whatever a previous
writer with the same transactional.id left open) a committed marker >= batchId + 1 proves the batch
is already in Kafka and the write is skipped.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from minikafka.pipeline.faults import maybe_fail
from minikafka.pipeline.options import OptionError, SinkOptions
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, DataType, IntegerType, StringType, StructType

log = logging.getLogger(__name__)

BATCH_ID_PROPERTY = "streaming.sql.batchId"  # set by Spark's MicroBatchExecution on every task
NO_MARKER = -1
# Producer-only librdkafka keys, left out of the marker consumer's configuration (librdkafka warns).
_PRODUCER_ONLY_KEYS = {"partitioner", "linger.ms", "queue.buffering.max.ms", "acks", "request.required.acks",
                       "transaction.timeout.ms", "compression.type", "compression.codec", "batch.size",
                       "batch.num.messages", "queue.buffering.max.messages", "queue.buffering.max.kbytes",
                       "message.timeout.ms", "delivery.timeout.ms", "retries", "message.send.max.retries",
                       "max.in.flight", "max.in.flight.requests.per.connection", "sticky.partitioning.linger.ms"}
_HEADER_TYPE = ArrayType(StructType().add("key", StringType()).add("value", BinaryType()))

Row = tuple[str, bytes | None, bytes | None, list[tuple[str, bytes | None]] | None, int | None]


def validate_schema(schema: StructType, topic_option: str | None) -> None:
    """Check the input columns like Spark's Kafka sink; other columns are ignored, as there."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}

    def check(name: str, allowed: tuple[DataType, ...], required: bool) -> None:
        if name not in fields:
            if required:
                raise OptionError(f"the sink needs a column {name!r}; input columns: {', '.join(schema.names)}")
            return
        if not any(_same_type(fields[name], t) for t in allowed):
            raise OptionError(f"sink column {name!r} must be {' or '.join(t.simpleString() for t in allowed)}, "
                              f"not {fields[name].simpleString()}")

    check("value", (BinaryType(), StringType()), True)
    check("key", (BinaryType(), StringType()), False)
    check("topic", (StringType(),), topic_option is None)
    check("partition", (IntegerType(),), False)
    check("headers", (_HEADER_TYPE,), False)


def _same_type(actual: DataType, expected: DataType) -> bool:
    # Nullability differs between plans and does not matter here.
    return actual.simpleString() == expected.simpleString()


def _as_bytes(value: bytes | str | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def _column(batch: pa.RecordBatch, name: str) -> list[Any]:
    """A column as Python values (case-insensitive name); all None when the input has no such column."""
    for index, field_name in enumerate(batch.schema.names):
        if field_name.lower() == name:
            return batch.column(index).to_pylist()
    return [None] * batch.num_rows


def rows_of(batches: Iterable[pa.RecordBatch], topic_option: str | None) -> Iterator[Row]:
    """(topic, key, value, headers, partition) per input row; the `topic` option overrides the column."""
    for batch in batches:
        topics = [topic_option] * batch.num_rows if topic_option is not None else _column(batch, "topic")
        columns = (_column(batch, name) for name in ("key", "value", "headers", "partition"))
        for topic, key, value, headers, partition in zip(topics, *columns, strict=True):
            if topic is None:
                raise ValueError("a row has a null topic and the sink has no topic option")
            header_list = [(h["key"], _as_bytes(h["value"])) for h in headers] if headers else None
            yield topic, _as_bytes(key), _as_bytes(value), header_list, partition


class MarkedTransactions:
    """A transactional producer plus the consumer whose group holds the replay marker."""

    def __init__(self, options: SinkOptions, transactional_id: str) -> None:
        self.options = options
        self.transactional_id = transactional_id
        self.marker_tp = TopicPartition(options.marker_topic, 0)
        self.producer = Producer({**options.config, "transactional.id": transactional_id})
        # Fences any older producer with this id and aborts (or finishes committing) its open transaction,
        # so the marker read below is final.
        self.producer.init_transactions(options.timeout_s)
        consumer_config = {k: v for k, v in options.config.items() if k not in _PRODUCER_ONLY_KEYS}
        # read_committed makes librdkafka ask for stable offsets (no pending transactional commit).
        self.consumer = Consumer({**consumer_config, "group.id": transactional_id, "enable.auto.commit": False,
                                  "isolation.level": "read_committed"})
        self._delivery_error: KafkaError | None = None

    def committed_batch_end(self) -> int:
        """The marker: 1 + the last batch id committed by this transactional id, or NO_MARKER."""
        [tp] = self.consumer.committed([self.marker_tp], timeout=self.options.timeout_s)
        if tp.error is not None:
            raise KafkaException(tp.error)
        return tp.offset if tp.offset >= 0 else NO_MARKER

    def _on_delivery(self, error: KafkaError | None, _message: Message) -> None:
        if error is not None and self._delivery_error is None:
            self._delivery_error = error

    def produce(self, rows: Iterable[Row]) -> int:
        count = 0
        for topic, key, value, headers, partition in rows:
            kwargs: dict[str, Any] = {"key": key, "headers": headers, "on_delivery": self._on_delivery}
            if partition is not None:
                kwargs["partition"] = partition
            while True:
                try:
                    self.producer.produce(topic, value, **kwargs)
                    break
                except BufferError:
                    self.producer.poll(0.05)  # the local queue is full: let deliveries drain it
            count += 1
            if self._delivery_error is not None:
                raise KafkaException(self._delivery_error)
        return count

    def commit(self, batch_id: int, metadata: Mapping[str, object]) -> None:
        marker = TopicPartition(self.marker_tp.topic, 0, batch_id + 1, metadata=json.dumps(dict(metadata)))
        self.producer.send_offsets_to_transaction([marker], self.consumer.consumer_group_metadata(),
                                                  self.options.timeout_s)
        self.producer.commit_transaction(self.options.timeout_s)
        if self._delivery_error is not None:  # commit_transaction raises first; this is a second guard
            raise KafkaException(self._delivery_error)

    def abort_quietly(self) -> None:
        try:
            self.producer.abort_transaction(self.options.timeout_s)
        except Exception as exc:  # a fenced or broken producer: the next initTransactions aborts instead
            log.warning("abort of %s failed: %s", self.transactional_id, exc)

    def close(self) -> None:
        self.consumer.close()
        self.producer.flush(0)


@dataclass
class TaskCommit(WriterCommitMessage):
    partition: int
    batch_id: int
    rows: int
    skipped: bool


@dataclass
class CollectedRows(WriterCommitMessage):
    """Driver mode: a task's rows, shipped to the driver, which writes the whole batch."""

    partition: int
    table: pa.Table | None


def _peek(iterator: Iterator[pa.RecordBatch]) -> tuple[list[pa.RecordBatch], Iterator[pa.RecordBatch]]:
    """Read up to the first non-empty batch, so an empty task can return without touching Kafka."""
    head: list[pa.RecordBatch] = []
    for batch in iterator:
        head.append(batch)
        if batch.num_rows:
            break
    return head, iterator


class _Writer:
    """Shared by the batch and the streaming writer; `batch_id` is 0 for a batch write."""

    def __init__(self, options: SinkOptions, schema: StructType, streaming: bool) -> None:
        validate_schema(schema, options.topic)
        self.options = options
        self.streaming = streaming

    def _task_batch_id(self, context: TaskContext) -> int:
        if not self.streaming:
            return 0
        value = context.getLocalProperty(BATCH_ID_PROPERTY)
        if value is None:
            raise RuntimeError(f"Spark did not set {BATCH_ID_PROPERTY} on this streaming task")
        return int(value)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        context = TaskContext.get()
        assert context is not None, "write() runs in a Spark task"
        partition, batch_id = context.partitionId(), self._task_batch_id(context)
        if self.options.mode == "driver":
            batches = [batch for batch in iterator if batch.num_rows]
            maybe_fail(self.options.failpoints, "task.before_commit", partition=partition, batch=batch_id)
            return CollectedRows(partition, pa.Table.from_batches(batches) if batches else None)
        head, rest = _peek(iterator)
        if not any(batch.num_rows for batch in head):
            return TaskCommit(partition, batch_id, 0, skipped=False)
        return self._write_task(partition, batch_id, head, rest)

    def _write_task(self, partition: int, batch_id: int, head: list[pa.RecordBatch],
                    rest: Iterator[pa.RecordBatch]) -> TaskCommit:
        txn = MarkedTransactions(self.options, f"{self.options.prefix}-{partition}")
        try:
            if txn.committed_batch_end() >= batch_id + 1:
                # This task's rows of this batch are already in Kafka: a replay after the task or the
                # query failed between the Kafka commit and Spark's commit log.
                log.info("batch %s partition %s already committed; skipping", batch_id, partition)
                return TaskCommit(partition, batch_id, 0, skipped=True)
            txn.producer.begin_transaction()
            try:
                rows = txn.produce(rows_of([*head, *rest], self.options.topic))
                maybe_fail(self.options.failpoints, "task.before_commit", partition=partition, batch=batch_id)
                if any(fp.point == "task.open_transaction" for fp in self.options.failpoints):
                    txn.producer.flush(self.options.timeout_s)  # the records reach the log, uncommitted
                    maybe_fail(self.options.failpoints, "task.open_transaction", partition=partition,
                               batch=batch_id)
                txn.commit(batch_id, {"batchId": batch_id, "partition": partition, "rows": rows})
            except BaseException:
                txn.abort_quietly()
                raise
            maybe_fail(self.options.failpoints, "task.after_commit", partition=partition, batch=batch_id)
            return TaskCommit(partition, batch_id, rows, skipped=False)
        finally:
            txn.close()

    def commit_batch(self, messages: list[WriterCommitMessage | None], batch_id: int) -> None:
        """Driver side, after every task succeeded and before Spark records the batch as done."""
        if self.options.mode == "driver":
            self._write_driver(messages, batch_id)
        else:
            commits = [m for m in messages if isinstance(m, TaskCommit)]
            log.info("batch %s: %s rows written, %s task(s) skipped as replays", batch_id,
                     sum(m.rows for m in commits), sum(m.skipped for m in commits))
        maybe_fail(self.options.failpoints, "driver.after_sink_commit", batch=batch_id)

    def _write_driver(self, messages: list[WriterCommitMessage | None], batch_id: int) -> None:
        parts = sorted((m for m in messages if isinstance(m, CollectedRows) and m.table is not None),
                       key=lambda m: m.partition)
        total = sum(m.table.num_rows for m in parts if m.table is not None)
        if total == 0:
            return
        if total > self.options.driver_max_rows:
            raise RuntimeError(f"batch {batch_id} has {total} rows, more than sink.driver.maxRows="
                               f"{self.options.driver_max_rows}; use sink.mode=task or a lower maxOffsetsPerTrigger")
        txn = MarkedTransactions(self.options, f"{self.options.prefix}-driver")
        try:
            if txn.committed_batch_end() >= batch_id + 1:
                log.info("batch %s already committed; skipping", batch_id)
                return
            txn.producer.begin_transaction()
            try:
                batches = [b for m in parts if m.table is not None for b in m.table.to_batches()]
                rows = txn.produce(rows_of(batches, self.options.topic))
                txn.commit(batch_id, {"batchId": batch_id, "rows": rows})
            except BaseException:
                txn.abort_quietly()
                raise
        finally:
            txn.close()


class KafkaStreamWriter(_Writer, DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        super().__init__(options, schema, streaming=True)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self.commit_batch(messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        # Task mode: tasks that committed stay committed; the replay after a restart skips them and
        # writes the rest. Driver mode: nothing reached Kafka.
        log.warning("batch %s aborted by Spark; committed tasks: %s", batchId,
                    sorted(m.partition for m in messages if isinstance(m, TaskCommit) and m.rows))


class KafkaBatchWriter(_Writer, DataSourceArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        super().__init__(options, schema, streaming=False)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:  # type: ignore[override]
        self.commit_batch(messages, 0)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:  # type: ignore[override]
        log.warning("batch write aborted by Spark; committed tasks: %s",
                    sorted(m.partition for m in messages if isinstance(m, TaskCommit) and m.rows))

