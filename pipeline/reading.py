"""Reading one offset range on an executor into Arrow record batches with Spark's Kafka row schema."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping

import pyarrow as pa
from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)
from minikafka.pipeline.offsets import OffsetRange

# The schema of Spark's Kafka source (with its includeHeaders=true layout).
SPARK_SCHEMA = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
                "timestampType int, headers array<struct<key:string,value:binary>>")
HEADER_TYPE = pa.struct([("key", pa.string()), ("value", pa.binary())])
ARROW_SCHEMA = pa.schema([
    ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
    ("offset", pa.int64()), ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
    ("headers", pa.list_(HEADER_TYPE)),
])
# Kafka's (and Spark's) timestampType ids; librdkafka numbers them differently.
_TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: 0, TIMESTAMP_LOG_APPEND_TIME: 1}
ROWS_PER_BATCH = 8192
_MAX_PER_CONSUME = 5000


class _Columns:
    """Column lists for one Arrow record batch."""

    def __init__(self, topic: str, partition: int) -> None:
        self.topic, self.partition = topic, partition
        self.clear()

    def clear(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.timestamps: list[int | None] = []
        self.timestamp_types: list[int] = []
        self.headers: list[list[dict[str, object]]] = []

    def add(self, message: Message) -> None:
        offset = message.offset()
        assert offset is not None, "a consumed record has an offset"
        self.keys.append(message.key())  # type: ignore[arg-type]  # bytes without a deserializer
        self.values.append(message.value())  # type: ignore[arg-type]
        self.offsets.append(offset)
        kind, millis = message.timestamp()
        self.timestamps.append(millis * 1000 if kind in _TIMESTAMP_TYPES else None)
        self.timestamp_types.append(_TIMESTAMP_TYPES.get(kind, -1))
        self.headers.append([{"key": k, "value": v} for k, v in (message.headers() or ())])  # type: ignore[str-unpack,misc]

    def __len__(self) -> int:
        return len(self.offsets)

    def batch(self) -> pa.RecordBatch:
        count = len(self.offsets)
        batch = pa.RecordBatch.from_arrays([
            pa.array(self.keys, pa.binary()), pa.array(self.values, pa.binary()),
            pa.array([self.topic] * count, pa.string()), pa.array([self.partition] * count, pa.int32()),
            pa.array(self.offsets, pa.int64()), pa.array(self.timestamps, pa.timestamp("us", tz="UTC")),
            pa.array(self.timestamp_types, pa.int32()), pa.array(self.headers, pa.list_(HEADER_TYPE)),
        ], schema=ARROW_SCHEMA)
        self.clear()
        return batch


def read_range(config: Mapping[str, str], rng: OffsetRange, *, fail_on_data_loss: bool,
               poll_timeout_s: float) -> Iterator[pa.RecordBatch]:
    """Yield the records of [rng.start, rng.end) that the configured isolation level lets through.

    The read ends when the consumer's position reaches rng.end, never on a record count: transaction
    markers take offsets without being records, and read_committed skips aborted records, so a range
    of N offsets usually holds fewer than N records. librdkafka moves the position past both.
    """
    consumer = Consumer({
        **config,
        # No group membership and no commits: the group id only satisfies librdkafka.
        "group.id": config.get("group.id", f"minikafka-spark-reader-{uuid.uuid4().hex}"),
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        # A start offset below the log start means records were deleted before Spark read them.
        "auto.offset.reset": "error" if fail_on_data_loss else "earliest",
    })
    tp = TopicPartition(rng.topic, rng.partition, rng.start)
    columns = _Columns(rng.topic, rng.partition)
    consumer.assign([tp])
    last_progress = time.monotonic()
    position = rng.start
    try:
        while position < rng.end:
            # Take what is already fetched without waiting; wait (bounded) only when nothing is.
            messages = consumer.consume(num_messages=_MAX_PER_CONSUME, timeout=0)
            if not messages:
                message = consumer.poll(0.2)
                messages = [message] if message is not None else []
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(error)
                if (message.offset() or 0) >= rng.end:
                    position = rng.end
                    break
                columns.add(message)
                if len(columns) >= ROWS_PER_BATCH:
                    yield columns.batch()
            if position >= rng.end:
                break
            current = consumer.position([TopicPartition(rng.topic, rng.partition)])[0].offset
            if current > position:
                position, last_progress = current, time.monotonic()
            elif time.monotonic() - last_progress > poll_timeout_s:
                raise TimeoutError(f"{rng.topic}-{rng.partition}: no progress for {poll_timeout_s}s at offset "
                                   f"{position}, expected to read up to {rng.end}")
        if len(columns):
            yield columns.batch()
    finally:
        consumer.close()
