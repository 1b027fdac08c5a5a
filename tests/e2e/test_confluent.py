"""confluent-kafka (librdkafka) against minikafka: admin, produce/consume, offsets, storage behaviour."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from tests.conftest import BrokerProcess, poll_until, unique_topic

from .helpers import consume, create_topic


def producer(bootstrap: str, **extra: object) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False, "linger.ms": 1, **extra})


def produce_all(p: Producer, topic: str, messages: list[dict[str, object]]) -> list[tuple[int, int]]:
    """Produce and wait for every delivery report; return (partition, offset) of each."""
    results: list[tuple[int, int] | KafkaError] = []

    def report(err: KafkaError | None, msg: object) -> None:
        results.append(err if err else (msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    for message in messages:
        p.produce(topic, on_delivery=report, **message)
    assert p.flush(20) == 0
    errors = [r for r in results if isinstance(r, KafkaError)]
    assert not errors, errors
    return [r for r in results if not isinstance(r, KafkaError)]


def test_admin_create_list_delete(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    name = unique_topic("admin")
    admin.create_topics([NewTopic(name, 3, 1)])[name].result(10)
    metadata = admin.list_topics(timeout=10)
    assert name in metadata.topics and len(metadata.topics[name].partitions) == 3
    assert metadata.topics[name].partitions[2].leader == 1
    with pytest.raises(KafkaException) as exists:
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(10)
    assert exists.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaException) as invalid:
        admin.create_topics([NewTopic("bad name!", 1, 1)])["bad name!"].result(10)
    assert invalid.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
    with pytest.raises(KafkaException) as replication:
        admin.create_topics([NewTopic(name + "-rf", 1, 3)])[name + "-rf"].result(10)
    assert replication.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR
    admin.create_partitions([NewPartitions(name, 5)])[name].result(10)
    assert len(admin.list_topics(name, timeout=10).topics[name].partitions) == 5
    admin.delete_topics([name])[name].result(10)
    assert name not in admin.list_topics(timeout=10).topics


def test_describe_and_alter_configs(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    name = unique_topic("cfg")
    create_topic(broker.bootstrap, name, 1, {"segment.bytes": "1048576"})
    topic_resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    configs = admin.describe_configs([topic_resource])[topic_resource].result(10)
    assert configs["retention.ms"].value == "604800000"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["segment.bytes"].value == "1048576"
    assert configs["segment.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    change = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([change])[change].result(10)
    configs = admin.describe_configs([topic_resource])[topic_resource].result(10)
    assert configs["retention.ms"].value == "3600000"
    broker_resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    broker_configs = admin.describe_configs([broker_resource])[broker_resource].result(10)
    assert broker_configs["num.partitions"].value == "1"
    assert broker_configs["log.segment.bytes"].value == "1073741824"


def test_round_trip_keys_headers_timestamps_nulls(broker: BrokerProcess) -> None:
    topic = unique_topic("rt")
    create_topic(broker.bootstrap, topic)
    messages = [
        {"key": b"k1", "value": b"v1", "headers": [("h1", b"x"), ("h2", b"")], "timestamp": 1_600_000_000_123},
        {"key": None, "value": b"no key"},
        {"key": b"tombstone", "value": None},
        {"key": b"", "value": b""},
    ]
    offsets = produce_all(producer(broker.bootstrap), topic, messages)
    assert [o for _p, o in offsets] == [0, 1, 2, 3]
    got = consume(broker.bootstrap, topic, 4)
    assert [(r.offset, r.key, r.value) for r in got] == [
        (0, b"k1", b"v1"), (1, None, b"no key"), (2, b"tombstone", None), (3, b"", b"")]
    assert got[0].headers == (("h1", b"x"), ("h2", b""))
    assert got[0].timestamp == 1_600_000_000_123


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression_codecs(broker: BrokerProcess, codec: str) -> None:
    topic = unique_topic(codec)
    create_topic(broker.bootstrap, topic)
    values = [f"{codec}-{i}".encode() * 20 for i in range(500)]
    produce_all(producer(broker.bootstrap, **{"compression.type": codec, "linger.ms": 20}), topic,
                [{"value": v} for v in values])
    got = consume(broker.bootstrap, topic, len(values))
    assert [r.value for r in got] == values
    assert [r.offset for r in got] == list(range(len(values)))


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(broker: BrokerProcess, acks: str) -> None:
    topic = unique_topic("acks")
    create_topic(broker.bootstrap, topic)
    produce_all(producer(broker.bootstrap, acks=acks), topic, [{"value": str(i).encode()} for i in range(50)])
    assert [r.value for r in consume(broker.bootstrap, topic, 50)] == [str(i).encode() for i in range(50)]


def test_large_value_and_too_large_value(broker_factory) -> None:
    broker = broker_factory(**{"message.max.bytes": "2000000"})
    topic = unique_topic("big")
    create_topic(broker.bootstrap, topic)
    big = bytes(range(256)) * 4096  # 1 MiB
    produce_all(producer(broker.bootstrap, **{"message.max.bytes": 5_000_000}), topic, [{"value": big}])
    got = consume(broker.bootstrap, topic, 1)
    assert got[0].value == big
    errors: list[KafkaError] = []
    p = producer(broker.bootstrap, **{"message.max.bytes": 5_000_000, "compression.type": "none"})
    p.produce(topic, value=b"z" * 3_000_000, on_delivery=lambda err, msg: errors.append(err))
    p.flush(20)
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE


def test_list_offsets_modes(broker: BrokerProcess) -> None:
    topic = unique_topic("lo")
    create_topic(broker.bootstrap, topic)
    base = 1_700_000_000_000
    stamps = [base + 10, base + 30, base + 20, base + 40]
    produce_all(producer(broker.bootstrap, **{"linger.ms": 0}), topic,
                [{"value": str(i).encode(), "timestamp": ts} for i, ts in enumerate(stamps)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    tp = TopicPartition(topic, 0)

    def offset_for(spec: OffsetSpec) -> tuple[int, int]:
        info = admin.list_offsets({tp: spec})[tp].result(10)
        return info.offset, info.timestamp

    assert offset_for(OffsetSpec.earliest())[0] == 0
    assert offset_for(OffsetSpec.latest())[0] == 4
    assert offset_for(OffsetSpec.max_timestamp()) == (3, base + 40)
    assert offset_for(OffsetSpec.for_timestamp(base + 25)) == (1, base + 30)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x"})
    found = consumer.offsets_for_times([TopicPartition(topic, 0, base + 15)], timeout=10)
    assert found[0].offset == 1
    beyond = consumer.offsets_for_times([TopicPartition(topic, 0, base + 99)], timeout=10)
    assert beyond[0].offset == -1
    assert consumer.get_watermark_offsets(tp, timeout=10) == (0, 4)
    consumer.close()


def test_seek(broker: BrokerProcess) -> None:
    topic = unique_topic("seek")
    create_topic(broker.bootstrap, topic)
    produce_all(producer(broker.bootstrap), topic, [{"value": str(i).encode()} for i in range(20)])
    assert [r.value for r in consume(broker.bootstrap, topic, 5, offset=15)] == [b"15", b"16", b"17", b"18", b"19"]


def test_restart_keeps_data_and_topic_ids(broker: BrokerProcess) -> None:
    topic = unique_topic("restart")
    create_topic(broker.bootstrap, topic, 2)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    before = admin.describe_topics_if_supported(topic) if hasattr(admin, "describe_topics_if_supported") else None
    produce_all(producer(broker.bootstrap), topic, [{"value": str(i).encode(), "partition": i % 2} for i in range(10)])
    assert broker.restart() is broker
    got = consume(broker.bootstrap, topic, 10, partitions=(0, 1))
    assert sorted(r.value for r in got) == sorted(str(i).encode() for i in range(10))
    produce_all(producer(broker.bootstrap), topic, [{"value": b"after", "partition": 0}])
    assert consume(broker.bootstrap, topic, 6)[-1].value == b"after"
    assert before is None or before  # topic ids are checked over the raw protocol in test_raw_protocol


def test_segment_roll(broker_factory) -> None:
    broker = broker_factory(**{"log.segment.bytes": "4096"})
    topic = unique_topic("roll")
    create_topic(broker.bootstrap, topic)
    values = [f"{i:05d}".encode() * 40 for i in range(1000)]
    produce_all(producer(broker.bootstrap, **{"linger.ms": 0, "batch.num.messages": 10}), topic,
                [{"value": v} for v in values])
    segments = sorted((broker.data_dir / f"{topic}-0").glob("*.log"))
    assert len(segments) > 5
    assert segments[0].name == "00000000000000000000.log"
    got = consume(broker.bootstrap, topic, len(values))
    assert [r.value for r in got] == values


def test_retention_deletes_old_segments(broker_factory) -> None:
    broker = broker_factory(**{"log.retention.check.interval.ms": "200", "log.initial.task.delay.ms": "0",
                                "log.segment.bytes": "2048"})
    topic = unique_topic("ret")
    create_topic(broker.bootstrap, topic, 1, {"retention.bytes": "4096"})
    produce_all(producer(broker.bootstrap, **{"linger.ms": 0, "batch.num.messages": 5}), topic,
                [{"value": b"r" * 200} for _ in range(200)])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x"})
    low = poll_until(lambda: consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[0],
                     timeout=20, message="retention to advance the low watermark")
    consumer.close()
    assert 0 < low < 200
    size = sum(p.stat().st_size for p in (broker.data_dir / f"{topic}-0").glob("*.log"))
    assert size < 4096 + 2048 + 1024
    assert consume(broker.bootstrap, topic, 1, offset=low)[0].offset == low


def test_retention_by_time(broker_factory) -> None:
    broker = broker_factory(**{"log.retention.check.interval.ms": "200", "log.initial.task.delay.ms": "0",
                                "log.segment.bytes": "1024"})
    topic = unique_topic("rett")
    create_topic(broker.bootstrap, topic, 1, {"retention.ms": "60000"})
    old = int(time.time() * 1000) - 3_600_000
    produce_all(producer(broker.bootstrap, **{"linger.ms": 0}), topic,
                [{"value": b"o" * 300, "timestamp": old} for _ in range(10)])
    produce_all(producer(broker.bootstrap, **{"linger.ms": 0}), topic, [{"value": b"new" * 100}])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x"})
    low = poll_until(lambda: consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[0] >= 10,
                     timeout=20, message="time retention")
    consumer.close()
    assert low


def test_delete_records(broker: BrokerProcess) -> None:
    topic = unique_topic("delrec")
    create_topic(broker.bootstrap, topic)
    produce_all(producer(broker.bootstrap), topic, [{"value": str(i).encode()} for i in range(10)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    tp = TopicPartition(topic, 0, 6)
    result = admin.delete_records([tp])[tp].result(10)
    assert result.low_watermark == 6
    assert [r.value for r in consume(broker.bootstrap, topic, 4, offset=6)] == [b"6", b"7", b"8", b"9"]
    tp_earliest = TopicPartition(topic, 0)
    assert admin.list_offsets({tp_earliest: OffsetSpec.earliest()})[tp_earliest].result(10).offset == 6


def test_auto_create_on_produce(broker: BrokerProcess) -> None:
    topic = unique_topic("auto")
    produce_all(producer(broker.bootstrap), topic, [{"value": b"hello"}])
    assert consume(broker.bootstrap, topic, 1)[0].value == b"hello"


def test_auto_create_disabled(broker_factory) -> None:
    broker = broker_factory(**{"auto.create.topics.enable": "false"})
    topic = unique_topic("noauto")
    errors: list[KafkaError] = []
    p = producer(broker.bootstrap, **{"message.timeout.ms": 2000})
    p.produce(topic, value=b"x", on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert errors and errors[0] is not None
    assert errors[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._MSG_TIMED_OUT,
                                KafkaError._UNKNOWN_TOPIC)
    assert topic not in AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics


def test_idempotent_producer_round_trip(broker: BrokerProcess) -> None:
    topic = unique_topic("idem")
    create_topic(broker.bootstrap, topic, 2)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 2})
    produce_all(p, topic, [{"value": str(i).encode(), "partition": i % 2} for i in range(2000)])
    got = consume(broker.bootstrap, topic, 2000, partitions=(0, 1))
    assert sorted(int(r.value) for r in got) == list(range(2000))
    assert list((broker.data_dir / f"{topic}-0").glob("*.snapshot")) == []  # taken on roll/close only
    broker.restart()
    assert list((broker.data_dir / f"{topic}-0").glob("*.snapshot"))
