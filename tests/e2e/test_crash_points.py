"""Crash points: the broker process dies as kill -9 would at a chosen step of ending a transaction.

For each point a confluent-kafka transaction over three partitions is ended, the broker (a subprocess
started through minikafka.testing.Broker) dies at the point, and is started again on the same data.
Once the coordinator has finished what the crash interrupted, read_committed must see exactly the
records of the committed transactions, and a successor producer with the same transactional id must
work.
"""

from __future__ import annotations

import concurrent.futures
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from minikafka.coordinator.transaction.crash_points import CRASH_POINTS
from minikafka.testing import Broker
from minikafka.testing.broker import BrokerError

PARTITIONS = 3
VALUES = [b"in-doubt-0", b"in-doubt-1", b"in-doubt-2"]
# (point, whether the transaction is committed): after_first_marker is reached by both outcomes;
# committing shows that a decision half written to the partitions is finished after the restart.
CASES = [("after_prepare_commit", True), ("after_first_marker", True), ("before_complete_commit", True),
         ("after_prepare_abort", False), ("before_complete_abort", False)]


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({"num.partitions": PARTITIONS}, mode="process") as running:
        yield running


def _producer(broker: Broker, transactional_id: str) -> Producer:
    # metadata.recovery.strategy=none: see test_transactions_crash.py (librdkafka re-bootstrap issues).
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": transactional_id,
                         "linger.ms": 0, "transaction.timeout.ms": 60_000, "socket.timeout.ms": 5000,
                         "metadata.recovery.strategy": "none"})
    producer.init_transactions(30)
    return producer


def _read_committed(broker: Broker, topic: str, timeout: float = 20.0) -> list[bytes]:
    """Every record read_committed returns from all partitions, read to the end of each."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": _name("reader"),
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "enable.partition.eof": True, "fetch.wait.max.ms": 50})
    consumer.subscribe([topic])
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(at_end) < PARTITIONS and time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                    continue
                raise KafkaException(message.error())
            values.append(message.value())
    finally:
        consumer.close()
    assert len(at_end) == PARTITIONS, f"read_committed reached the end of {sorted(at_end)} only"
    return sorted(values)


def _settled(topic: str) -> Any:
    """Every partition of `topic` has its marker: no open transaction, LSO at the high watermark."""

    def check(state: dict[str, Any]) -> bool:
        partitions = state["topics"].get(topic, {}).get("partitions", {})
        return len(partitions) == PARTITIONS and all(
            p["last_stable_offset"] == p["high_watermark"] > 1
            and all(producer["open_transaction_first_offset"] is None for producer in p["producers"])
            for p in partitions.values())

    return check


def test_every_crash_point_is_tested() -> None:
    assert sorted(point for point, _commit in CASES) == sorted(CRASH_POINTS)


@pytest.mark.parametrize(("point", "commit"), CASES, ids=[point for point, _commit in CASES])
def test_transaction_hit_by_a_crash_point_ends_all_or_nothing(broker: Broker, point: str, commit: bool) -> None:
    topic, transactional_id = _name("crash"), _name("tid")
    producer = _producer(broker, transactional_id)
    producer.begin_transaction()
    for partition, value in enumerate(VALUES):
        producer.produce(topic, value, partition=partition)
    assert producer.flush(15) == 0

    broker.add_crash_point(point)
    assert broker.crash_points() == [point]
    ending = producer.commit_transaction if commit else producer.abort_transaction
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        # The client keeps retrying its EndTxn while the broker is down and after it is back.
        ended = pool.submit(ending, 60)
        exit_code = broker.wait_exited(timeout=30)
        assert exit_code == -9, f"the broker died by SIGKILL at {point}, not by {exit_code}"
        assert f'"point": "{point}"' in broker.logs() and "crash point reached" in broker.logs()
        broker.start()
        broker.wait_for(_settled(topic), timeout=30)
        try:
            ended.result(timeout=90)
        except KafkaException as exc:
            # The broker vanished under a pending EndTxn; librdkafka may give up on it. The outcome
            # on the log is decided by the coordinator either way, and checked below.
            assert exc.args[0].retriable() or exc.args[0].txn_requires_abort() or exc.args[0].fatal(), exc

    expected = sorted(VALUES) if commit else []
    assert _read_committed(broker, topic) == expected
    assert broker.crash_points() == [], "a crash point fires once and does not survive the restart"

    successor = _producer(broker, transactional_id)
    successor.begin_transaction()
    successor.produce(topic, b"successor", partition=0)
    successor.commit_transaction(30)
    assert _read_committed(broker, topic) == sorted([*expected, b"successor"])


def test_crash_points_need_a_subprocess_broker_and_a_known_name(broker: Broker) -> None:
    with pytest.raises(ValueError, match="unknown crash point"):
        broker.add_crash_point("after_lunch")
    assert broker.crash_points() == []
    with Broker() as in_process, pytest.raises(BrokerError, match="mode='process'"):
        in_process.add_crash_point("after_prepare_commit")
