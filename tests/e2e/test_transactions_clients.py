"""Transactions with aiokafka, kafka-python and kafkajs: commit, abort, offsets in the transaction,
zombie fencing. What each wrote is checked with librdkafka's read_committed/read_uncommitted."""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError as AioKafkaError
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaProducer
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
