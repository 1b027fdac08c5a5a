"""Moving a group between the KIP-848 consumer protocol and the classic one with librdkafka: once the
consumer group is empty, a classic consumer's JoinGroup replaces it by a classic group (Kafka's
maybeDeleteEmptyConsumerGroup) and goes on from the offsets the consumer-protocol member committed.
Conversion of non-empty groups is not implemented (README, KIP-848 consumer groups)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from minikafka.testing import Broker

PARTITIONS = 3
FIRST, SECOND = range(0, 30), range(30, 60)


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({"group.consumer.heartbeat.interval.ms": "300"}, mode="inprocess") as running:
        yield running


def _produce(broker: Broker, topic: str, values: range) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for value in values:
        producer.produce(topic, str(value).encode(), partition=value % PARTITIONS)
    assert producer.flush(15) == 0


def _consume(consumer: Consumer, expected: int, timeout: float = 30.0) -> list[int]:
    values: list[int] = []
    deadline = time.monotonic() + timeout
    while len(values) < expected:
        assert time.monotonic() < deadline, f"got {len(values)} of {expected} records"
        message = consumer.poll(0.1)
        if message is not None and not message.error():
            values.append(int(message.value()))
    return values


def _group_type(admin: AdminClient, group: str) -> Any:
    return admin.describe_consumer_groups([group])[group].result(15).type


def test_a_classic_consumer_takes_over_an_empty_consumer_group(broker: Broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(15)
    _produce(broker, topic, FIRST)
    common = {"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False}
    modern = Consumer({**common, "group.protocol": "consumer"})
    try:
        modern.subscribe([topic])
        assert sorted(_consume(modern, len(FIRST))) == list(FIRST)
        modern.commit(asynchronous=False)
        assert _group_type(admin, group).name == "CONSUMER"
    finally:
        modern.close()
    _produce(broker, topic, SECOND)
    classic = Consumer({**common, "group.protocol": "classic", "session.timeout.ms": 6000})
    try:
        classic.subscribe([topic])
        # It starts from the consumer group's committed offsets: only the second batch, no record twice.
        assert sorted(_consume(classic, len(SECOND))) == list(SECOND)
        assert _group_type(admin, group).name == "CLASSIC"
    finally:
        classic.close()
