"""aiokafka against minikafka: admin, produce/consume with manual assignment, offsets, compression."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import TopicAlreadyExistsError

from tests.conftest import BrokerProcess, unique_topic

DEADLINE = 20.0


async def read(bootstrap: str, topic: str, count: int, offset: int = 0) -> list:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        records: list = []
        async with asyncio.timeout(DEADLINE):
            while len(records) < count:
                batch = await consumer.getmany(tp, timeout_ms=200)
                records.extend(batch.get(tp, []))
        return records
    finally:
        await consumer.stop()


async def make_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        await admin.close()


async def test_admin(broker: BrokerProcess) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:
        name = unique_topic("aioadmin")
        await admin.create_topics([NewTopic(name, 2, 1, topic_configs={"retention.ms": "123456"})])
        assert name in await admin.list_topics()
        # aiokafka's admin returns per-topic errors in the response instead of raising
        response = await admin.create_topics([NewTopic(name, 1, 1)])
        assert [(t[0], t[1]) for t in response.topic_errors] == [(name, TopicAlreadyExistsError.errno)]
        described = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
        entries = {entry[0]: entry[1] for entry in described[0].resources[0][4]}
        assert entries["retention.ms"] == "123456"
        assert entries["cleanup.policy"] == "delete"
        await admin.delete_topics([name])
        assert name not in await admin.list_topics()
    finally:
        await admin.close()


async def test_round_trip_with_headers_and_timestamps(broker: BrokerProcess) -> None:
    topic = unique_topic("aiort")
    await make_topic(broker.bootstrap, topic)
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    await producer.start()
    try:
        first = await producer.send_and_wait(topic, b"v0", key=b"k0", headers=[("h", b"1")],
                                             timestamp_ms=1_650_000_000_000)
        await producer.send_and_wait(topic, None, key=b"gone")
        await producer.send_and_wait(topic, b"nokey")
    finally:
        await producer.stop()
    assert first.offset == 0
    records = await read(broker.bootstrap, topic, 3)
    assert [(r.offset, r.key, r.value) for r in records] == [(0, b"k0", b"v0"), (1, b"gone", None), (2, None, b"nokey")]
    assert list(records[0].headers) == [("h", b"1")]
    assert records[0].timestamp == 1_650_000_000_000


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
async def test_compression(broker: BrokerProcess, codec: str) -> None:
    topic = unique_topic(f"aio{codec}")
    await make_topic(broker.bootstrap, topic)
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=20)
    await producer.start()
    try:
        futures = [await producer.send(topic, f"{codec}{i}".encode() * 10) for i in range(300)]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()
    records = await read(broker.bootstrap, topic, 300)
    assert [r.value for r in records] == [f"{codec}{i}".encode() * 10 for i in range(300)]


@pytest.mark.parametrize("acks", [0, 1, "all"])
async def test_acks(broker: BrokerProcess, acks: object) -> None:
    topic = unique_topic("aioacks")
    await make_topic(broker.bootstrap, topic)
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks=acks)
    await producer.start()
    try:
        for i in range(20):
            await producer.send_and_wait(topic, str(i).encode())
    finally:
        await producer.stop()
    assert [r.value for r in await read(broker.bootstrap, topic, 20)] == [str(i).encode() for i in range(20)]


async def test_offsets_and_seek(broker: BrokerProcess) -> None:
    topic = unique_topic("aiooff")
    await make_topic(broker.bootstrap, topic)
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
    await producer.start()
    base = 1_700_000_000_000
    try:
        for i in range(10):
            await producer.send_and_wait(topic, str(i).encode(), timestamp_ms=base + i * 10)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        assert (await consumer.beginning_offsets([tp]))[tp] == 0
        assert (await consumer.end_offsets([tp]))[tp] == 10
        found = await consumer.offsets_for_times({tp: base + 35})
        assert found[tp].offset == 4 and found[tp].timestamp == base + 40
        assert (await consumer.offsets_for_times({tp: base + 1000}))[tp] is None
    finally:
        await consumer.stop()
    assert [r.value for r in await read(broker.bootstrap, topic, 3, offset=7)] == [b"7", b"8", b"9"]


async def test_large_value(broker_factory) -> None:
    broker = broker_factory(**{"message.max.bytes": "2000000"})
    topic = unique_topic("aiobig")
    await make_topic(broker.bootstrap, topic)
    big = b"\x01\x02" * 524288
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, max_request_size=3_000_000)
    await producer.start()
    try:
        await producer.send_and_wait(topic, big)
    finally:
        await producer.stop()
    assert (await read(broker.bootstrap, topic, 1))[0].value == big
