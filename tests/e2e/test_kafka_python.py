"""kafka-python against minikafka: admin, produce/consume with manual assignment, offsets, compression."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.errors import TopicAlreadyExistsError

from tests.conftest import BrokerProcess, unique_topic


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


def admin_for(broker: BrokerProcess) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap)


def test_admin(broker: BrokerProcess) -> None:
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


def test_round_trip(broker: BrokerProcess) -> None:
    topic = unique_topic("kprt")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", enable_idempotence=False)
    meta = producer.send(topic, value=b"v", key=b"k", headers=[("h", b"1")], timestamp_ms=1_600_000_000_000).get(20)
    producer.send(topic, value=None, key=b"k2").get(20)
    producer.close()
    assert meta.offset == 0
    records = read(broker.bootstrap, topic, 2)
    assert [(r.offset, r.key, r.value) for r in records] == [(0, b"k", b"v"), (1, b"k2", None)]
    assert list(records[0].headers) == [("h", b"1")]
    assert records[0].timestamp == 1_600_000_000_000


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression(broker: BrokerProcess, codec: str) -> None:
    topic = unique_topic(f"kp{codec}")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=20,
                             enable_idempotence=False)
    futures = [producer.send(topic, f"{codec}-{i}".encode() * 8) for i in range(300)]
    for future in futures:
        future.get(20)
    producer.close()
    assert [r.value for r in read(broker.bootstrap, topic, 300)] == [f"{codec}-{i}".encode() * 8 for i in range(300)]


def test_offsets_and_seek(broker: BrokerProcess) -> None:
    topic = unique_topic("kpoff")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False)
    base = int(time.time() * 1000) - 60_000
    for i in range(10):
        producer.send(topic, str(i).encode(), timestamp_ms=base + i * 10).get(20)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    tp = TopicPartition(topic, 0)
    assert consumer.beginning_offsets([tp])[tp] == 0
    assert consumer.end_offsets([tp])[tp] == 10
    found = consumer.offsets_for_times({tp: base + 51})
    assert found[tp].offset == 6 and found[tp].timestamp == base + 60
    consumer.close()
    assert [r.value for r in read(broker.bootstrap, topic, 2, offset=8)] == [b"8", b"9"]


def test_delete_records(broker: BrokerProcess) -> None:
    topic = unique_topic("kpdel")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False)
    for i in range(5):
        producer.send(topic, str(i).encode()).get(20)
    producer.close()
    admin = admin_for(broker)
    if not hasattr(admin, "delete_records"):
        pytest.skip("this kafka-python has no delete_records")
    result = admin.delete_records({TopicPartition(topic, 0): 3})
    assert result[TopicPartition(topic, 0)]["low_watermark"] == 3
    admin.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    assert consumer.beginning_offsets([TopicPartition(topic, 0)])[TopicPartition(topic, 0)] == 3
    consumer.close()


def test_idempotent_producer(broker: BrokerProcess) -> None:
    topic = unique_topic("kpidem")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True, acks="all")
    futures = [producer.send(topic, str(i).encode()) for i in range(500)]
    for future in futures:
        future.get(20)
    producer.close()
    assert [int(r.value) for r in read(broker.bootstrap, topic, 500)] == list(range(500))
