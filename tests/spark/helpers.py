"""Test helpers: producing inputs and reading topics back with a plain confluent-kafka consumer.

The reference reader here deliberately shares no code with minikafka.pipeline: it reads each partition
until librdkafka reports end-of-partition, which is the high watermark under read_uncommitted and the
last stable offset under read_committed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import TIMESTAMP_CREATE_TIME, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.produce import produce as produce_values


@dataclass(frozen=True, order=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int
    timestamp_type: int  # Kafka's id: 0 CreateTime, 1 LogAppendTime


def create_topics(bootstrap: str, **partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, count, 1) for name, count in partitions.items()],
                                  operation_timeout=10)
    for future in futures.values():
        future.result(timeout=15)


def produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]], *,
            partition: int | None = None, headers: list[tuple[str, bytes]] | None = None) -> None:
    """(key, value) records; the delivery reports are not checked here: the tests read the topic back."""
    produce_values(bootstrap, topic, [value for _key, value in records], keys=[key for key, _value in records],
                   partition=partition, headers=headers, **{"linger.ms": 2})


def read_topic(bootstrap: str, topic: str, isolation: str = "read_committed", timeout: float = 30.0) -> list[Record]:
    """Every record of every partition up to the partition's end, in (partition, offset) order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-tests-reference",
                         "enable.auto.commit": False, "isolation.level": isolation, "enable.partition.eof": True,
                         "fetch.wait.max.ms": 50})
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        partitions = sorted(metadata.topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        pending, records = set(partitions), []
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: partitions {sorted(pending)} did not reach their end")
            for message in consumer.consume(num_messages=1000, timeout=0.2):
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(error)
                    pending.discard(message.partition())
                    continue
                kind, millis = message.timestamp()
                records.append(Record(topic, message.partition(), message.offset(), message.key(), message.value(),
                                      tuple(message.headers() or ()), millis,
                                      0 if kind == TIMESTAMP_CREATE_TIME else 1))
        return sorted(records)
    finally:
        consumer.close()
