"""kafka-python against minikafka: admin, produce/consume with manual assignment, offsets, compression."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic, OffsetSpec
from kafka.errors import (
    InvalidPartitionsError,
    MessageSizeTooLargeError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from minikafka.testing import Broker

from tests.support.names import unique_topic


def read(bootstrap: str, topic: str, count: int, offset: int = 0, deadline: float = 20.0) -> list:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, offset)
    records: list = []
    end = time.monotonic() + deadline
    try:
        while len(records) < count and time.monotonic() < end:
            records.extend(consumer.poll(timeout_ms=200).get(tp, []))
    finally:
        consumer.close()
    return records


def admin_for(broker: Broker) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)


def test_admin(broker: Broker) -> None:
    admin = admin_for(broker)
    name = unique_topic("kpadmin")
    admin.create_topics([NewTopic(name, 2, 1, topic_configs={"cleanup.policy": "delete"})])
    assert name in admin.list_topics()
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic(name, 1, 1)])
    admin.create_partitions({name: NewPartitions(4)})
    described = admin.describe_topics([name])
    assert len(described[0]["partitions"]) == 4
    resource = ConfigResource(ConfigResourceType.TOPIC, name)
    modified = admin.describe_configs([resource])["topic"][name]  # only non-default values by default
    assert set(modified) == {"cleanup.policy"} and modified["cleanup.policy"]["value"] == "delete"
    everything = admin.describe_configs([resource], config_filter="all")["topic"][name]
    assert everything["max.message.bytes"]["value"] == "1048588"
    assert everything["retention.ms"]["value"] == "604800000"
    admin.delete_topics([name])
    assert name not in admin.list_topics()
    admin.close()


def test_round_trip(broker: Broker) -> None:
    topic = unique_topic("kprt")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all", enable_idempotence=False)
    meta = producer.send(topic, value=b"v", key=b"k", headers=[("h", b"1")], timestamp_ms=1_600_000_000_000).get(20)
    producer.send(topic, value=None, key=b"k2").get(20)
    producer.close()
    assert meta.offset == 0
    records = read(broker.bootstrap_servers, topic, 2)
    assert [(r.offset, r.key, r.value) for r in records] == [(0, b"k", b"v"), (1, b"k2", None)]
    assert list(records[0].headers) == [("h", b"1")]
    assert records[0].timestamp == 1_600_000_000_000


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression(broker: Broker, codec: str) -> None:
    topic = unique_topic(f"kp{codec}")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, compression_type=codec, linger_ms=20,
                             enable_idempotence=False)
    futures = [producer.send(topic, f"{codec}-{i}".encode() * 8) for i in range(300)]
    for future in futures:
        future.get(20)
    producer.close()
    assert [r.value for r in read(broker.bootstrap_servers, topic, 300)] == [
        f"{codec}-{i}".encode() * 8 for i in range(300)]


def test_offsets_and_seek(broker: Broker) -> None:
    topic = unique_topic("kpoff")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, enable_idempotence=False)
    base = int(time.time() * 1000) - 60_000
    for i in range(10):
        producer.send(topic, str(i).encode(), timestamp_ms=base + i * 10).get(20)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None)
    tp = TopicPartition(topic, 0)
    assert consumer.beginning_offsets([tp])[tp] == 0
    assert consumer.end_offsets([tp])[tp] == 10
    found = consumer.offsets_for_times({tp: base + 51})
    assert found[tp].offset == 6 and found[tp].timestamp == base + 60
    consumer.close()
    assert [r.value for r in read(broker.bootstrap_servers, topic, 2, offset=8)] == [b"8", b"9"]


def test_delete_records(broker: Broker) -> None:
    topic = unique_topic("kpdel")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, enable_idempotence=False)
    for i in range(5):
        producer.send(topic, str(i).encode()).get(20)
    producer.close()
    admin = admin_for(broker)
    if not hasattr(admin, "delete_records"):
        pytest.skip("this kafka-python has no delete_records")
    result = admin.delete_records({TopicPartition(topic, 0): 3})
    assert result[TopicPartition(topic, 0)]["low_watermark"] == 3
    admin.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None)
    assert consumer.beginning_offsets([TopicPartition(topic, 0)])[TopicPartition(topic, 0)] == 3
    consumer.close()


def test_idempotent_producer(broker: Broker) -> None:
    topic = unique_topic("kpidem")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, enable_idempotence=True, acks="all")
    futures = [producer.send(topic, str(i).encode()) for i in range(500)]
    for future in futures:
        future.get(20)
    producer.close()
    assert [int(r.value) for r in read(broker.bootstrap_servers, topic, 500)] == list(range(500))


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks(broker: Broker, acks: object) -> None:
    topic = unique_topic("kpacks")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks=acks, enable_idempotence=False)
    results = [producer.send(topic, key=None if i % 2 else b"k", value=str(i).encode()).get(20) for i in range(20)]
    producer.close()
    if acks != 0:  # acks=0 gets no response, so the client cannot know the offsets
        assert [m.offset for m in results] == list(range(20))
    records = read(broker.bootstrap_servers, topic, 20)
    assert [(r.offset, r.key, r.value) for r in records] == [
        (i, None if i % 2 else b"k", str(i).encode()) for i in range(20)]


def test_admin_cluster_offsets_configs_and_errors(broker: Broker) -> None:
    admin = admin_for(broker)
    try:
        cluster = admin.describe_cluster()
        assert cluster["controller_id"] == 1 and cluster["cluster_id"]
        assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [(1, "127.0.0.1", broker.port)]
        topic = unique_topic("kpadm2")
        admin.create_topics([NewTopic(topic, 2, 1)])
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({topic: NewPartitions(1)})
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.delete_topics([unique_topic("nosuch")])

        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, enable_idempotence=False)
        base = int(time.time() * 1000) - 60_000
        for i, delta in enumerate([5, 50, 20, 30]):
            producer.send(topic, str(i).encode(), partition=1, timestamp_ms=base + delta).get(20)
        producer.close()
        tp = TopicPartition(topic, 1)
        offsets = admin.list_partition_offsets({tp: OffsetSpec.EARLIEST})
        assert offsets[tp].offset == 0
        assert admin.list_partition_offsets({tp: OffsetSpec.LATEST})[tp].offset == 4
        newest = admin.list_partition_offsets({tp: OffsetSpec.MAX_TIMESTAMP})[tp]
        assert (newest.offset, newest.timestamp) == (1, base + 50)

        resource = ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "86400000"})
        admin.alter_configs([resource])
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]
        assert described["retention.ms"]["value"] == "86400000"
        broker_configs = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")],
                                                config_filter="all")["broker"]["1"]
        assert broker_configs["log.segment.bytes"]["value"] == "1073741824"
        assert broker_configs["num.partitions"]["value"] == "1"
    finally:
        admin.close()


def test_seek_to_beginning_end_and_position(broker: Broker) -> None:
    topic = unique_topic("kpseek")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, enable_idempotence=False, linger_ms=5)
    for future in [producer.send(topic, f"m{i}".encode()) for i in range(12)]:
        future.get(20)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    try:
        consumer.seek_to_end(tp)
        assert consumer.position(tp) == 12
        consumer.seek_to_beginning(tp)
        assert consumer.position(tp) == 0
        records: list = []
        end = time.monotonic() + 20
        while len(records) < 12 and time.monotonic() < end:
            records.extend(consumer.poll(timeout_ms=200).get(tp, []))
        assert [(r.offset, r.value) for r in records] == [(i, f"m{i}".encode()) for i in range(12)]
        consumer.seek(tp, 10)
        again: list = []
        end = time.monotonic() + 20
        while len(again) < 2 and time.monotonic() < end:
            again.extend(consumer.poll(timeout_ms=200).get(tp, []))
        assert [r.value for r in again] == [b"m10", b"m11"]
        assert consumer.position(tp) == 12
    finally:
        consumer.close()


def test_too_large_message_is_rejected_by_the_broker(broker: Broker) -> None:
    topic = unique_topic("kpbig")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, enable_idempotence=False,
                             max_request_size=5_000_000, retries=0)
    with pytest.raises(MessageSizeTooLargeError):
        producer.send(topic, b"x" * 1_200_000).get(20)
    assert producer.send(topic, b"small").get(20).offset == 0
    producer.close()
    assert [r.value for r in read(broker.bootstrap_servers, topic, 1)] == [b"small"]


def test_large_value_round_trip(broker_factory) -> None:
    broker = broker_factory(**{"message.max.bytes": "2000000"})
    topic = unique_topic("kpmib")
    big = bytes(range(256)) * 4096
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, enable_idempotence=False,
                             max_request_size=3_000_000, compression_type="gzip")
    assert producer.send(topic, big, key=b"big").get(20).offset == 0
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None,
                             max_partition_fetch_bytes=3_000_000,
                             fetch_max_bytes=3_000_000)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    records: list = []
    end = time.monotonic() + 20
    try:
        while not records and time.monotonic() < end:
            records.extend(consumer.poll(timeout_ms=200).get(tp, []))
    finally:
        consumer.close()
    assert [(r.key, r.value) for r in records] == [(b"big", big)]
