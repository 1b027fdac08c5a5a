"""Time retention reaches the active segment, as in Kafka: a partition whose every record is past
retention.ms is emptied (an empty segment rolled at the log end, the expired one deleted), and the
offsets go on from where they were. The manual clock makes the hours pass."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from minikafka.testing import Broker

HOUR_MS = 3_600_000


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({"minikafka.clock": "manual"}) as running:
        yield running


def _create(bootstrap: str, topic: str, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer: its futures need it
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(timeout=10)


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    failures: list[object] = []
    for value in values:
        producer.produce(topic, value=value, on_delivery=lambda err, _msg: failures.append(err) if err else None)
    assert producer.flush(15) == 0
    assert not failures


def _watermarks(consumer: Consumer, topic: str) -> tuple[int, int]:
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    return int(low), int(high)


def _wait_for_low_watermark(consumer: Consumer, topic: str, low: int, timeout: float = 20.0) -> tuple[int, int]:
    deadline = time.monotonic() + timeout
    marks = _watermarks(consumer, topic)
    while marks[0] != low:
        assert time.monotonic() < deadline, f"{topic}: the low watermark stayed at {marks[0]}, not {low}"
        time.sleep(0.05)
        marks = _watermarks(consumer, topic)
    return marks


def _consumer(bootstrap: str, topic: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False,
                     "auto.offset.reset": "earliest"})


def test_records_hours_past_retention_are_gone_from_the_active_segment_too(broker: Broker) -> None:
    topic = f"retained-{uuid.uuid4().hex[:8]}"
    _create(broker.bootstrap_servers, topic, {"retention.ms": str(HOUR_MS)})
    _produce(broker.bootstrap_servers, topic, [b"old-%d" % i for i in range(5)])
    before = _consumer(broker.bootstrap_servers, topic)
    try:
        assert _watermarks(before, topic) == (0, 5)
    finally:
        before.close()

    # Three hours close every connection too (connections.max.idle.ms): the consumer below is a new one.
    broker.advance_clock(3 * HOUR_MS)
    consumer = _consumer(broker.bootstrap_servers, topic)
    try:
        assert _wait_for_low_watermark(consumer, topic, 5) == (5, 5)

        # The log goes on at offset 5, and a consumer from the earliest offset sees only what is new.
        _produce(broker.bootstrap_servers, topic, [b"new"])
        consumer.assign([TopicPartition(topic, 0, -2)])  # OFFSET_BEGINNING
        deadline = time.monotonic() + 15
        message = None
        while message is None:
            assert time.monotonic() < deadline, "no record after retention"
            message = consumer.poll(0.2)
        assert message.error() is None
        assert (message.offset(), message.value()) == (5, b"new")
    finally:
        consumer.close()
