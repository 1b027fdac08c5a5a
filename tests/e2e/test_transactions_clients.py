"""Transactions with aiokafka, kafka-python and kafkajs: commit, abort, offsets in the transaction,
zombie fencing. What each wrote is checked with librdkafka's read_committed/read_uncommitted. Each
client's own read_committed consumer is checked on a log of committed, aborted and open transactions."""

from __future__ import annotations

import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError as AioKafkaError
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import KafkaError as KpKafkaError
from kafka.structs import OffsetAndMetadata

from tests.conftest import BrokerProcess, unique_topic

from .helpers import consume, create_topic
from .test_kafkajs import JS_DIR, NODE, run_js


def committed_values(broker: BrokerProcess, topic: str, count: int, timeout: float = 4) -> list[bytes]:
    return sorted(r.value for r in consume(broker.bootstrap, topic, count, isolation="read_committed",  # type: ignore[misc]
                                           timeout=timeout))


def all_values(broker: BrokerProcess, topic: str, count: int) -> list[bytes]:
    return sorted(r.value for r in consume(broker.bootstrap, topic, count))  # type: ignore[misc]


def group_offset(broker: BrokerProcess, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        return consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
    finally:
        consumer.close()


async def test_aiokafka_transactions(broker: BrokerProcess) -> None:
    topic, group = unique_topic("aiotx"), unique_topic("aiogroup")
    create_topic(broker.bootstrap, topic)
    transactional_id = unique_topic("aiotid")
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=transactional_id)
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send_and_wait(topic, b"committed")
            await producer.send_offsets_to_transaction({AioTopicPartition(topic, 0): 7}, group)
        await producer.begin_transaction()
        await producer.send_and_wait(topic, b"aborted")
        await producer.send_offsets_to_transaction({AioTopicPartition(topic, 0): 99}, group)
        await producer.abort_transaction()
        successor = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=transactional_id)
        await successor.start()
        await successor.stop()
        with pytest.raises(AioKafkaError):
            async with producer.transaction():
                await producer.send_and_wait(topic, b"zombie")
    finally:
        await producer.stop()
    assert committed_values(broker, topic, 2) == [b"committed"]
    assert b"aborted" in all_values(broker, topic, 2)
    assert group_offset(broker, group, topic) == 7


def test_kafka_python_transactions(broker: BrokerProcess) -> None:
    topic, group = unique_topic("kptx"), unique_topic("kpgroup")
    create_topic(broker.bootstrap, topic)
    transactional_id = unique_topic("kptid")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=transactional_id)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(topic, b"committed")
    producer.send_offsets_to_transaction({KpTopicPartition(topic, 0): OffsetAndMetadata(5, "", -1)}, group)
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send(topic, b"aborted").get(15)
    producer.abort_transaction()
    successor = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=transactional_id)
    successor.init_transactions()
    successor.close()
    producer.begin_transaction()
    producer.send(topic, b"zombie")
    with pytest.raises(KpKafkaError):
        producer.commit_transaction()
    producer.close(timeout=5)
    assert committed_values(broker, topic, 2) == [b"committed"]
    assert b"aborted" in all_values(broker, topic, 2)
    assert group_offset(broker, group, topic) == 5


@pytest.mark.kafkajs
@pytest.mark.skipif(NODE is None or not (JS_DIR / "node_modules" / "kafkajs").exists(), reason="kafkajs missing")
def test_kafkajs_transactions(broker: BrokerProcess) -> None:
    topic, group = unique_topic("kjstx"), unique_topic("kjsgroup")
    create_topic(broker.bootstrap, topic)
    result = run_js("transactions.js", broker.bootstrap, topic, group)
    assert result == {"done": True, "zombieFenced": True}
    assert committed_values(broker, topic, 2) == [b"committed"]
    assert b"aborted" in all_values(broker, topic, 2)
    assert group_offset(broker, group, topic) == 3


# What a read_committed consumer may see of the log `mixed_log` writes, in order; the records after
# them sit behind an open transaction (the last stable offset) and must not be delivered.
READ_COMMITTED_VALUES = [b"c1", b"c2", b"p1", b"c3"]
BEYOND_WAIT_S = 3.0


@pytest.fixture
def mixed_log(broker: BrokerProcess):  # type: ignore[no-untyped-def]
    """committed, aborted, plain and committed records, then an open transaction and a plain record."""
    topic = unique_topic("mixed")
    create_topic(broker.bootstrap, topic)

    def transactional(name: str) -> Producer:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": unique_topic(name),
                             "linger.ms": 0})
        producer.init_transactions(15)
        return producer

    writer = transactional("mixed-writer")
    writer.begin_transaction()
    writer.produce(topic, b"c1", partition=0)
    writer.produce(topic, b"c2", partition=0)
    writer.commit_transaction(15)
    writer.begin_transaction()
    writer.produce(topic, b"a1", partition=0)
    writer.produce(topic, b"a2", partition=0)
    writer.flush(15)
    writer.abort_transaction(15)
    plain = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    plain.produce(topic, b"p1", partition=0)
    plain.flush(15)
    writer.begin_transaction()
    writer.produce(topic, b"c3", partition=0)
    writer.commit_transaction(15)
    holder = transactional("mixed-open")
    holder.begin_transaction()
    holder.produce(topic, b"open", partition=0)
    holder.flush(15)
    plain.produce(topic, b"after-open", partition=0)
    plain.flush(15)
    assert sorted(all_values(broker, topic, 8)) == sorted([b"c1", b"c2", b"a1", b"a2", b"p1", b"c3", b"open",
                                                            b"after-open"])
    yield topic
    holder.abort_transaction(15)


async def test_aiokafka_read_committed_drops_aborted_and_stops_at_lso(broker: BrokerProcess, mixed_log: str) -> None:
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    seen: list[bytes] = []
    try:
        consumer.assign([AioTopicPartition(mixed_log, 0)])
        deadline = time.monotonic() + BEYOND_WAIT_S
        while time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                seen.extend(r.value for r in records)
    finally:
        await consumer.stop()
    assert seen == READ_COMMITTED_VALUES


def test_kafka_python_read_committed_drops_aborted_and_stops_at_lso(broker: BrokerProcess, mixed_log: str) -> None:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=int(BEYOND_WAIT_S * 1000))
    try:
        consumer.assign([KpTopicPartition(mixed_log, 0)])
        seen = [record.value for record in consumer]  # ends after consumer_timeout_ms without records
    finally:
        consumer.close()
    assert seen == READ_COMMITTED_VALUES


@pytest.mark.kafkajs
@pytest.mark.skipif(NODE is None or not (JS_DIR / "node_modules" / "kafkajs").exists(), reason="kafkajs missing")
def test_kafkajs_read_committed_drops_aborted_and_stops_at_lso(broker: BrokerProcess, mixed_log: str) -> None:
    result = run_js("read_committed.js", broker.bootstrap, mixed_log, str(len(READ_COMMITTED_VALUES)),
                    str(int(BEYOND_WAIT_S * 1000)))
    assert [v.encode() for v in result["values"]] == READ_COMMITTED_VALUES
