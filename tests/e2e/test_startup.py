"""Start-up with coordinators loaded after the listener: a consumer group and a transactional producer started
at the broker's ready line, while a large `__consumer_offsets` and `__transaction_state` are still being
replayed, retry COORDINATOR_LOAD_IN_PROGRESS and succeed."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from minikafka.coordinator.group.log import OffsetsTopic
from minikafka.coordinator.group.records import OffsetKey, OffsetValue, encode_offset_key, encode_offset_value
from minikafka.coordinator.transaction.coordinator import TransactionCoordinator, TxnConfig
from minikafka.storage.clock import SystemClock
from minikafka.storage.config import LogConfig
from minikafka.storage.manager import LogManager

from tests.support.brokers import process_broker
from tests.support.clients import create_topic, transactional_producer
from tests.support.names import unique_topic
from tests.support.waiting import poll_until

OFFSETS_PARTITIONS = 50
OLD_GROUPS = 20_000  # one offset record each, in batches of 10 over every partition
OLD_TRANSACTIONAL_IDS = 3_000
MESSAGES = 10
LOAD_DELAY_MS = 2_000


def _write_old_coordinator_state(data_dir: Path) -> None:
    """Fill both internal topics as a long-lived cluster would, through the storage and coordinator code."""
    clock = SystemClock()
    logs = LogManager(data_dir, LogConfig(), clock)
    logs.load()
    offsets = OffsetsTopic(logs, OFFSETS_PARTITIONS)
    now = clock.now_ms()
    for first in range(0, OLD_GROUPS, 10):
        records = [(encode_offset_key(OffsetKey(f"old-{index}", "gone", 0)),
                    encode_offset_value(OffsetValue(index, commit_timestamp=now)))
                   for index in range(first, first + 10)]
        offsets.append(first // 10 % OFFSETS_PARTITIONS, records, now)
    producer_ids = iter(range(1_000, 1_000 + OLD_TRANSACTIONAL_IDS))
    transactions = TransactionCoordinator(logs, lambda: next(producer_ids), clock, TxnConfig(),
                                          complete_group_transaction=lambda *_args: None, notify=lambda _tp: None,
                                          schedule=lambda _job: None)
    for index in range(OLD_TRANSACTIONAL_IDS):
        transactions.init_producer_id(f"old-txn-{index}", 60_000)
    logs.close(clean=True)


def test_clients_started_at_the_ready_line_wait_out_the_coordinator_load(tmp_path: Path, capfd) -> None:
    data_dir = tmp_path / "data"
    topic = unique_topic("startup")
    (tmp_path / "first").mkdir()
    first = process_broker(data_dir, tmp_path / "first").start()
    create_topic(first.bootstrap_servers, topic)
    first.stop()
    _write_old_coordinator_state(data_dir)

    (tmp_path / "second").mkdir()
    # The held load makes the window certain: replaying the old state alone can end before librdkafka asks.
    broker = process_broker(data_dir, tmp_path / "second",
                           {"minikafka.coordinator.load.delay.ms": str(LOAD_DELAY_MS)}).start()
    # Straight from the ready line: both clients' first coordinator requests land inside the load.
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    try:
        producer = transactional_producer(broker.bootstrap_servers, f"startup-{uuid.uuid4().hex[:8]}")
        producer.begin_transaction()
        for index in range(MESSAGES):
            producer.produce(topic, value=f"v{index}".encode())
        producer.commit_transaction(30)

        seen: list[bytes] = []
        for _ in range(300):  # bounded: at most 300 polls of 0.1 s
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                seen.append(message.value())
            if len(seen) == MESSAGES:
                break
        assert seen == [f"v{index}".encode() for index in range(MESSAGES)]
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        assert committed[0].offset >= MESSAGES
    finally:
        consumer.close()
    poll_until(lambda: '"coordinators loaded"' in broker.logs(), message="the coordinators loaded")
    loaded = next(json.loads(line) for line in broker.logs().splitlines() if '"coordinators loaded"' in line)
    assert loaded["groups"] >= OLD_GROUPS and loaded["transactional_ids"] >= OLD_TRANSACTIONAL_IDS
    # librdkafka logs each retried COORDINATOR_LOAD_IN_PROGRESS to stderr: the window was really hit.
    assert "Coordinator load in progress" in capfd.readouterr().err
    broker.stop()
