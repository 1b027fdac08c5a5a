"""Shared helpers for end-to-end tests with real clients."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from minikafka.coordinator.transaction.log import decode_key, decode_value, formatter_json


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


def states_of(records: list[tuple[bytes, bytes | None]]) -> list[str]:
    """State names of `__transaction_state` (key, value) records, "tombstone" for a null value."""
    return [value.state.display_name if value else "tombstone" for value in (decode_value(v) for _k, v in records)]


def assert_state_sequence(records: list[tuple[bytes, bytes | None]], transactional_id: str, topic: str) -> None:
    """One committed transaction on partition 0 of `topic`, as Kafka writes it to `__transaction_state`."""
    assert all(decode_key(key) == transactional_id for key, _value in records)
    assert states_of(records) == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
    data = [formatter_json(key, value)["value"]["data"] for key, value in records]  # type: ignore[index]
    assert [d["transactionStatus"] for d in data] == [0, 1, 2, 4]
    assert data[0]["transactionPartitions"] is None and data[0]["transactionStartTimestampMs"] == -1
    assert all(d["transactionPartitions"] == [{"topic": topic, "partitionIds": [0]}] for d in data[1:3])
    assert data[3]["transactionPartitions"] == [], "Complete* clears the partitions, as Kafka's prepareComplete"
    assert len({(d["producerId"], d["producerEpoch"]) for d in data}) == 1


def txn_log_lines(data_dir: Path, transactional_id: str) -> list[dict[str, object]]:
    """What `minikafka txn-log` prints for one transactional id, parsed."""
    out = subprocess.run([sys.executable, "-m", "minikafka.broker", "txn-log", "--data-dir", str(data_dir),
                          "--transactional-id", transactional_id], capture_output=True, text=True, timeout=30,
                         check=True).stdout
    return [json.loads(line) for line in out.splitlines()]
