"""Rebalances that must unfold exactly as Apache Kafka 4.x's group coordinator makes them, each one a
case of librdkafka's own integration suite (tests 0113 and 0045) where minikafka differed.

Real confluent-kafka consumers over real sockets against an in-process broker. The assignment callbacks
record every step the client was handed, so a test sees the steps, not only where they end.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from minikafka.testing import Broker

from tests.support.clients import create_topic

HEARTBEAT_MS = 300
FAST = {"group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS)}
DEADLINE_S = 60.0


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker(FAST, mode="inprocess") as running:
        yield running


class Tracked:
    """A KIP-848 consumer whose assignment callbacks are kept, one list of partitions per call."""

    def __init__(self, broker: Broker, group: str, client_id: str) -> None:
        self.assigned_steps: list[set[tuple[str, int]]] = []
        self.consumer = Consumer({
            "bootstrap.servers": broker.bootstrap_servers, "group.id": group, "group.protocol": "consumer",
            "client.id": client_id, "auto.offset.reset": "earliest", "enable.auto.commit": False,
        })

    def subscribe(self, topics: list[str]) -> None:
        self.consumer.subscribe(topics, on_assign=self._on_assign)

    def _on_assign(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if partitions:
            self.assigned_steps.append({(tp.topic, tp.partition) for tp in partitions})

    def assignment(self) -> set[tuple[str, int]]:
        return {(tp.topic, tp.partition) for tp in self.consumer.assignment()}


def _poll_until(consumers: list[Tracked], done: Callable[[], Any], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        for tracked in consumers:
            message = tracked.consumer.poll(0.05)
            assert message is None or message.error() is None, message.error()


def _settled(consumers: list[Tracked], each: int) -> bool:
    return all(len(c.assignment()) == each for c in consumers)


def _partitions(topic: str, *numbers: int) -> set[tuple[str, int]]:
    return {(topic, p) for p in numbers}


def test_uniform_assignor_keeps_the_lowest_partitions_and_hands_out_the_rest(broker: Broker) -> None:
    """librdkafka 0113 x_incremental_rebalances (group.protocol=consumer): Kafka's uniform assignor
    (UniformHomogeneousAssignmentBuilder) lets each member keep its partitions up to its quota, lowest
    numbers first, and gives the partitions left over to the members below quota."""
    topic, group = _name("x"), _name("g")
    create_topic(broker.bootstrap_servers, topic, 6)
    consumers = [Tracked(broker, group, f"consumer{i}") for i in range(3)]
    try:
        consumers[0].subscribe([topic])
        _poll_until(consumers[:1], lambda: consumers[0].assignment() == _partitions(topic, *range(6)),
                    "the first member to get every partition")
        consumers[1].subscribe([topic])
        _poll_until(consumers[:2], lambda: _settled(consumers[:2], 3), "two members with 3 partitions each")
        assert [c.assignment() for c in consumers[:2]] == [_partitions(topic, 0, 1, 2), _partitions(topic, 3, 4, 5)]
        consumers[2].subscribe([topic])
        _poll_until(consumers, lambda: _settled(consumers, 2), "three members with 2 partitions each")
        assert [c.assignment() for c in consumers] == [
            _partitions(topic, 0, 1), _partitions(topic, 3, 4), _partitions(topic, 2, 5)]
    finally:
        for tracked in consumers:
            tracked.consumer.close()


def test_a_new_regex_is_resolved_after_the_heartbeat_that_brought_it(broker: Broker) -> None:
    """librdkafka 0045 do_test_resubscribe_with_regex (group.protocol=consumer): Kafka resolves a regex
    new to the group in a task of its own, after answering the heartbeat that brought it; that answer
    assigns the literal topics only, and the regex's topics follow with a later heartbeat."""
    prefix, group = _name("rx"), _name("g")
    first, second, literal = f"{prefix}-regex1", f"{prefix}-regex2", _name("lit")
    for topic, count in ((first, 4), (second, 4), (literal, 2)):
        create_topic(broker.bootstrap_servers, topic, count)
    tracked = Tracked(broker, group, "regex")
    everything = _partitions(first, *range(4)) | _partitions(second, *range(4)) | _partitions(literal, 0, 1)
    try:
        tracked.subscribe([f"^{prefix}-regex.*", literal])
        _poll_until([tracked], lambda: tracked.assignment() == everything, "every matched partition")
        assert tracked.assigned_steps == [_partitions(literal, 0, 1), everything - _partitions(literal, 0, 1)]
    finally:
        tracked.consumer.close()
