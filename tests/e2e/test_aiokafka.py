"""aiokafka against minikafka: admin, produce/consume with manual assignment, offsets, compression."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import (
    InvalidPartitionsError,
    MessageSizeTooLargeError,
    OffsetOutOfRangeError,
    TopicAlreadyExistsError,
)
from minikafka.testing import Broker

from tests.support.names import unique_topic

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


async def test_admin(broker: Broker) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
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


async def test_round_trip_with_headers_and_timestamps(broker: Broker) -> None:
    topic = unique_topic("aiort")
    await make_topic(broker.bootstrap_servers, topic)
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all")
    await producer.start()
    try:
        first = await producer.send_and_wait(topic, b"v0", key=b"k0", headers=[("h", b"1")],
                                             timestamp_ms=1_650_000_000_000)
        await producer.send_and_wait(topic, None, key=b"gone")
        await producer.send_and_wait(topic, b"nokey")
    finally:
        await producer.stop()
    assert first.offset == 0
    records = await read(broker.bootstrap_servers, topic, 3)
    assert [(r.offset, r.key, r.value) for r in records] == [(0, b"k0", b"v0"), (1, b"gone", None), (2, None, b"nokey")]
    assert list(records[0].headers) == [("h", b"1")]
    assert records[0].timestamp == 1_650_000_000_000


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
async def test_compression(broker: Broker, codec: str) -> None:
    topic = unique_topic(f"aio{codec}")
    await make_topic(broker.bootstrap_servers, topic)
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, compression_type=codec, linger_ms=20)
    await producer.start()
    try:
        futures = [await producer.send(topic, f"{codec}{i}".encode() * 10) for i in range(300)]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()
    records = await read(broker.bootstrap_servers, topic, 300)
    assert [r.value for r in records] == [f"{codec}{i}".encode() * 10 for i in range(300)]


@pytest.mark.parametrize("acks", [0, 1, "all"])
async def test_acks(broker: Broker, acks: object) -> None:
    topic = unique_topic("aioacks")
    await make_topic(broker.bootstrap_servers, topic)
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks=acks)
    await producer.start()
    try:
        for i in range(20):
            await producer.send_and_wait(topic, str(i).encode())
    finally:
        await producer.stop()
    assert [r.value for r in await read(broker.bootstrap_servers, topic, 20)] == [str(i).encode() for i in range(20)]


async def test_offsets_and_seek(broker: Broker) -> None:
    topic = unique_topic("aiooff")
    await make_topic(broker.bootstrap_servers, topic)
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    await producer.start()
    base = 1_700_000_000_000
    try:
        for i in range(10):
            await producer.send_and_wait(topic, str(i).encode(), timestamp_ms=base + i * 10)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None)
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
    assert [r.value for r in await read(broker.bootstrap_servers, topic, 3, offset=7)] == [b"7", b"8", b"9"]


async def test_large_value(broker_factory) -> None:
    broker = broker_factory(**{"message.max.bytes": "2000000"})
    topic = unique_topic("aiobig")
    await make_topic(broker.bootstrap_servers, topic)
    big = b"\x01\x02" * 524288
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, max_request_size=3_000_000)
    await producer.start()
    try:
        await producer.send_and_wait(topic, big)
    finally:
        await producer.stop()
    assert (await read(broker.bootstrap_servers, topic, 1))[0].value == big


async def test_admin_partitions_records_and_cluster(broker: Broker) -> None:
    topic = unique_topic("aiopart")
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 1, 1)])
        await admin.create_partitions({topic: NewPartitions(3)})
        [described] = await admin.describe_topics([topic])
        assert described["error_code"] == 0
        assert sorted(p["partition"] for p in described["partitions"]) == [0, 1, 2]
        with pytest.raises(InvalidPartitionsError):
            await admin.create_partitions({topic: NewPartitions(2)})
        cluster = await admin.describe_cluster()
        assert [(b["node_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [(1, "127.0.0.1", broker.port)]
        assert cluster["controller_id"] == 1

        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        await producer.start()
        try:
            for i in range(6):
                await producer.send_and_wait(topic, str(i).encode(), partition=1)
        finally:
            await producer.stop()
        tp = TopicPartition(topic, 1)
        assert await admin.delete_records({tp: RecordsToDelete(4)}) == {tp: 4}
        with pytest.raises(OffsetOutOfRangeError):
            await admin.delete_records({tp: RecordsToDelete(7)})
    finally:
        await admin.close()
    # auto_offset_reset="earliest": with the default "latest", the reset aiokafka starts on assign()
    # races seek_to_beginning() on the client side and may win.
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None, auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign([tp])
        assert await consumer.beginning_offsets([tp]) == {tp: 4}
        await consumer.seek_to_beginning(tp)
        records: list = []
        async with asyncio.timeout(DEADLINE):
            while len(records) < 2:
                records.extend((await consumer.getmany(tp, timeout_ms=200)).get(tp, []))
        assert [(r.offset, r.value) for r in records] == [(4, b"4"), (5, b"5")]
    finally:
        await consumer.stop()


async def test_seek_to_end_then_wait_for_new_records(broker: Broker) -> None:
    topic = unique_topic("aioend")
    await make_topic(broker.bootstrap_servers, topic)
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    await producer.start()
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None, fetch_max_wait_ms=5000)
    await consumer.start()
    try:
        for i in range(5):
            await producer.send_and_wait(topic, f"old{i}".encode())
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_end(tp)
        assert await consumer.position(tp) == 5
        pending = asyncio.ensure_future(consumer.getone())
        done, _ = await asyncio.wait({pending}, timeout=0.3)
        assert not done, "nothing new to read yet"
        await producer.send_and_wait(topic, b"new", key=b"k")
        async with asyncio.timeout(DEADLINE):
            record = await pending
        assert (record.offset, record.key, record.value) == (5, b"k", b"new")
        consumer.seek(tp, 2)
        async with asyncio.timeout(DEADLINE):
            assert (await consumer.getone()).value == b"old2"
    finally:
        await consumer.stop()
        await producer.stop()


async def test_too_large_message_is_rejected_by_the_broker(broker: Broker) -> None:
    topic = unique_topic("aiotoobig")
    await make_topic(broker.bootstrap_servers, topic)
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, max_request_size=5_000_000)
    await producer.start()
    try:
        with pytest.raises(MessageSizeTooLargeError):
            await producer.send_and_wait(topic, b"z" * 1_200_000)
        ok = await producer.send_and_wait(topic, b"fits")
    finally:
        await producer.stop()
    assert ok.offset == 0, "the rejected batch took no offset"
    assert [r.value for r in await read(broker.bootstrap_servers, topic, 1)] == [b"fits"]


async def test_multi_partition_round_trip_keeps_per_partition_order(broker: Broker) -> None:
    topic = unique_topic("aiomulti")
    await make_topic(broker.bootstrap_servers, topic, 3)
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks=1, linger_ms=5)
    await producer.start()
    try:
        futures = [await producer.send(topic, f"{i}".encode(), key=f"key{i % 7}".encode()) for i in range(300)]
        metadata = await asyncio.gather(*futures)
    finally:
        await producer.stop()
    placement = {i: (m.partition, m.offset) for i, m in enumerate(metadata)}
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None, auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(3)]
        consumer.assign(tps)
        got: dict[int, list] = {p: [] for p in range(3)}
        async with asyncio.timeout(DEADLINE):
            while sum(len(v) for v in got.values()) < 300:
                for tp, records in (await consumer.getmany(timeout_ms=200)).items():
                    got[tp.partition].extend(records)
    finally:
        await consumer.stop()
    for partition, records in got.items():
        assert [r.offset for r in records] == list(range(len(records)))
        assert [int(r.value) for r in records] == sorted(int(r.value) for r in records)
        for record in records:
            assert placement[int(record.value)] == (partition, record.offset)
            assert record.key == f"key{int(record.value) % 7}".encode()
    by_key = {}
    for partition, records in got.items():
        for record in records:
            by_key.setdefault(record.key, set()).add(partition)
    assert all(len(parts) == 1 for parts in by_key.values()), "one key, one partition"
