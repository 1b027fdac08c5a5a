"""Real clients (confluent-kafka) doing the common steps: create a topic, read records back, open a
transactional producer."""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.names import unique_topic


@dataclass(frozen=True)
class Received:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})], operation_timeout=10)
    for future in futures.values():
        future.result(timeout=15)


def consume(bootstrap: str, topic: str, count: int, *, partitions: tuple[int, ...] = (0,), offset: int = 0,
            timeout: float = 20.0, isolation: str = "read_uncommitted") -> list[Received]:
    """Read `count` records with manual assignment (no group protocol), within a deadline."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e-reader", "enable.auto.commit": False,
                         "isolation.level": isolation, "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, p, offset) for p in partitions])
    received: list[Received] = []
    deadline = time.monotonic() + timeout
    try:
        while len(received) < count and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=0.2):
                if message.error():
                    raise KafkaException(message.error())
                received.append(Received(message.partition(), message.offset(), message.key(), message.value(),
                                         tuple(message.headers() or ()), message.timestamp()[1]))
    finally:
        consumer.close()
    return received


def transactional_producer(bootstrap: str, transactional_id: str, **extra: object) -> Producer:
    """A confluent-kafka producer with its transactions initialised (linger 0: sends go out at once)."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 0,
                         **extra})
    producer.init_transactions(15)
    return producer


def new_topic(bootstrap: str, partitions: int = 1, prefix: str = "t") -> str:
    """A topic named so no other test (or xdist worker) uses it, created; returns its name."""
    name = unique_topic(prefix)
    create_topic(bootstrap, name, partitions)
    return name
