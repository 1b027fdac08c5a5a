"""confluent-kafka (librdkafka) against minikafka: admin, produce/consume, offsets, storage behaviour."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
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
from minikafka.testing import Broker

from tests.support.clients import consume, create_topic
from tests.support.names import unique_topic
from tests.support.waiting import poll_until


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


def poll_values(consumer: Consumer, count: int, *, timeout: float, message: str) -> list[bytes]:
    """Values of the next `count` records, each checked for errors, within `timeout` seconds."""
    got: list[bytes] = []

    def step() -> bool:
        record = consumer.poll(0.2)
        if record is not None:
            assert record.error() is None, record.error()
            got.append(record.value())
        return len(got) >= count

    poll_until(step, timeout=timeout, message=message)
    return got


def test_admin_create_list_delete(broker: Broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
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


def test_describe_and_alter_configs(broker: Broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    name = unique_topic("cfg")
    create_topic(broker.bootstrap_servers, name, 1, {"segment.bytes": "1048576"})
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


def test_round_trip_keys_headers_timestamps_nulls(broker: Broker) -> None:
    topic = unique_topic("rt")
    create_topic(broker.bootstrap_servers, topic)
    messages = [
        {"key": b"k1", "value": b"v1", "headers": [("h1", b"x"), ("h2", b"")], "timestamp": 1_600_000_000_123},
        {"key": None, "value": b"no key"},
        {"key": b"tombstone", "value": None},
        {"key": b"", "value": b""},
    ]
    offsets = produce_all(producer(broker.bootstrap_servers), topic, messages)
    assert [o for _p, o in offsets] == [0, 1, 2, 3]
    got = consume(broker.bootstrap_servers, topic, 4)
    assert [(r.offset, r.key, r.value) for r in got] == [
        (0, b"k1", b"v1"), (1, None, b"no key"), (2, b"tombstone", None), (3, b"", b"")]
    assert got[0].headers == (("h1", b"x"), ("h2", b""))
    assert got[0].timestamp == 1_600_000_000_123


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression_codecs(broker: Broker, codec: str) -> None:
    topic = unique_topic(codec)
    create_topic(broker.bootstrap_servers, topic)
    values = [f"{codec}-{i}".encode() * 20 for i in range(500)]
    produce_all(producer(broker.bootstrap_servers, **{"compression.type": codec, "linger.ms": 20}), topic,
                [{"value": v} for v in values])
    got = consume(broker.bootstrap_servers, topic, len(values))
    assert [r.value for r in got] == values
    assert [r.offset for r in got] == list(range(len(values)))


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(broker: Broker, acks: str) -> None:
    topic = unique_topic("acks")
    create_topic(broker.bootstrap_servers, topic)
    produce_all(producer(broker.bootstrap_servers, acks=acks), topic, [{"value": str(i).encode()} for i in range(50)])
    assert [r.value for r in consume(broker.bootstrap_servers, topic, 50)] == [str(i).encode() for i in range(50)]


def test_large_value_and_too_large_value(broker_factory) -> None:
    broker = broker_factory(**{"message.max.bytes": "2000000"})
    topic = unique_topic("big")
    create_topic(broker.bootstrap_servers, topic)
    big = bytes(range(256)) * 4096  # 1 MiB
    produce_all(producer(broker.bootstrap_servers, **{"message.max.bytes": 5_000_000}), topic, [{"value": big}])
    got = consume(broker.bootstrap_servers, topic, 1)
    assert got[0].value == big
    errors: list[KafkaError] = []
    p = producer(broker.bootstrap_servers, **{"message.max.bytes": 5_000_000, "compression.type": "none"})
    p.produce(topic, value=b"z" * 3_000_000, on_delivery=lambda err, msg: errors.append(err))
    p.flush(20)
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE


def test_list_offsets_modes(broker: Broker) -> None:
    topic = unique_topic("lo")
    create_topic(broker.bootstrap_servers, topic)
    base = 1_700_000_000_000
    stamps = [base + 10, base + 30, base + 20, base + 40]
    produce_all(producer(broker.bootstrap_servers, **{"linger.ms": 0}), topic,
                [{"value": str(i).encode(), "timestamp": ts} for i, ts in enumerate(stamps)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    tp = TopicPartition(topic, 0)

    def offset_for(spec: OffsetSpec) -> tuple[int, int]:
        info = admin.list_offsets({tp: spec})[tp].result(10)
        return info.offset, info.timestamp

    assert offset_for(OffsetSpec.earliest())[0] == 0
    assert offset_for(OffsetSpec.latest())[0] == 4
    assert offset_for(OffsetSpec.max_timestamp()) == (3, base + 40)
    assert offset_for(OffsetSpec.for_timestamp(base + 25)) == (1, base + 30)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "x"})
    found = consumer.offsets_for_times([TopicPartition(topic, 0, base + 15)], timeout=10)
    assert found[0].offset == 1
    beyond = consumer.offsets_for_times([TopicPartition(topic, 0, base + 99)], timeout=10)
    assert beyond[0].offset == -1
    assert consumer.get_watermark_offsets(tp, timeout=10) == (0, 4)
    consumer.close()


def test_seek(broker: Broker) -> None:
    topic = unique_topic("seek")
    create_topic(broker.bootstrap_servers, topic)
    produce_all(producer(broker.bootstrap_servers), topic, [{"value": str(i).encode()} for i in range(20)])
    assert [r.value for r in consume(broker.bootstrap_servers, topic, 5, offset=15)] == [
        b"15", b"16", b"17", b"18", b"19"]


def test_restart_keeps_data_and_topic_ids(broker: Broker) -> None:
    topic = unique_topic("restart")
    create_topic(broker.bootstrap_servers, topic, 2)

    def topic_id() -> str:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        description = admin.describe_topics(TopicCollection([topic]))[topic].result(10)
        assert len(description.partitions) == 2
        return str(description.topic_id)

    before = topic_id()
    assert before and before != "AAAAAAAAAAAAAAAAAAAAAA"  # the zero Uuid means "no id"
    produce_all(producer(broker.bootstrap_servers), topic, [{"value": str(i).encode(),
                                                             "partition": i % 2} for i in range(10)])
    assert broker.restart() is broker
    assert topic_id() == before, "a clean restart keeps the topic id"
    got = consume(broker.bootstrap_servers, topic, 10, partitions=(0, 1))
    assert sorted((r.partition, r.offset, r.value) for r in got) == sorted(
        (i % 2, i // 2, str(i).encode()) for i in range(10))
    produce_all(producer(broker.bootstrap_servers), topic, [{"value": b"after", "partition": 0}])
    assert [(r.offset, r.value) for r in consume(broker.bootstrap_servers, topic, 6)][-1] == (5, b"after")
    broker.restart(hard=True)
    assert topic_id() == before, "recovery after kill -9 keeps the topic id"
    assert [r.value for r in consume(broker.bootstrap_servers, topic, 6)] == [b"0", b"2", b"4", b"6", b"8", b"after"]


def test_segment_roll(broker_factory) -> None:
    broker = broker_factory(**{"log.segment.bytes": "4096"})
    topic = unique_topic("roll")
    create_topic(broker.bootstrap_servers, topic)
    values = [f"{i:05d}".encode() * 40 for i in range(1000)]
    produce_all(producer(broker.bootstrap_servers, **{"linger.ms": 0, "batch.num.messages": 10}), topic,
                [{"value": v} for v in values])
    segments = sorted((broker.data_dir / f"{topic}-0").glob("*.log"))
    assert len(segments) > 5
    assert segments[0].name == "00000000000000000000.log"
    got = consume(broker.bootstrap_servers, topic, len(values))
    assert [r.value for r in got] == values


def test_retention_deletes_old_segments(broker_factory) -> None:
    broker = broker_factory(**{"log.retention.check.interval.ms": "200", "log.initial.task.delay.ms": "0",
                                "log.segment.bytes": "2048"})
    topic = unique_topic("ret")
    create_topic(broker.bootstrap_servers, topic, 1, {"retention.bytes": "4096"})
    produce_all(producer(broker.bootstrap_servers, **{"linger.ms": 0, "batch.num.messages": 5}), topic,
                [{"value": b"r" * 200} for _ in range(200)])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "x"})
    low = poll_until(lambda: consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[0],
                     timeout=20, message="retention to advance the low watermark")
    consumer.close()
    assert 0 < low < 200
    size = sum(p.stat().st_size for p in (broker.data_dir / f"{topic}-0").glob("*.log"))
    assert size < 4096 + 2048 + 1024
    assert consume(broker.bootstrap_servers, topic, 1, offset=low)[0].offset == low


def test_retention_by_time(broker_factory) -> None:
    broker = broker_factory(**{"log.retention.check.interval.ms": "200", "log.initial.task.delay.ms": "0",
                                "log.segment.bytes": "1024"})
    topic = unique_topic("rett")
    create_topic(broker.bootstrap_servers, topic, 1, {"retention.ms": "60000"})
    old = int(time.time() * 1000) - 3_600_000
    produce_all(producer(broker.bootstrap_servers, **{"linger.ms": 0}), topic,
                [{"value": b"o" * 300, "timestamp": old} for _ in range(10)])
    produce_all(producer(broker.bootstrap_servers, **{"linger.ms": 0}), topic, [{"value": b"new" * 100}])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "x"})
    low = poll_until(lambda: consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[0] >= 10,
                     timeout=20, message="time retention")
    consumer.close()
    assert low


def test_delete_records(broker: Broker) -> None:
    topic = unique_topic("delrec")
    create_topic(broker.bootstrap_servers, topic)
    produce_all(producer(broker.bootstrap_servers), topic, [{"value": str(i).encode()} for i in range(10)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    tp = TopicPartition(topic, 0, 6)
    result = admin.delete_records([tp])[tp].result(10)
    assert result.low_watermark == 6
    assert [r.value for r in consume(broker.bootstrap_servers, topic, 4, offset=6)] == [b"6", b"7", b"8", b"9"]
    tp_earliest = TopicPartition(topic, 0)
    assert admin.list_offsets({tp_earliest: OffsetSpec.earliest()})[tp_earliest].result(10).offset == 6


def test_auto_create_on_produce(broker: Broker) -> None:
    topic = unique_topic("auto")
    produce_all(producer(broker.bootstrap_servers), topic, [{"value": b"hello"}])
    assert consume(broker.bootstrap_servers, topic, 1)[0].value == b"hello"


def test_auto_create_disabled(broker_factory) -> None:
    broker = broker_factory(**{"auto.create.topics.enable": "false"})
    topic = unique_topic("noauto")
    errors: list[KafkaError] = []
    p = producer(broker.bootstrap_servers, **{"message.timeout.ms": 2000})
    p.produce(topic, value=b"x", on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert errors and errors[0] is not None
    assert errors[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._MSG_TIMED_OUT,
                                KafkaError._UNKNOWN_TOPIC)
    assert topic not in AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=10).topics


def test_idempotent_producer_round_trip(broker: Broker) -> None:
    topic = unique_topic("idem")
    create_topic(broker.bootstrap_servers, topic, 2)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True, "linger.ms": 2})
    produce_all(p, topic, [{"value": str(i).encode(), "partition": i % 2} for i in range(2000)])
    got = consume(broker.bootstrap_servers, topic, 2000, partitions=(0, 1))
    assert sorted(int(r.value) for r in got) == list(range(2000))
    assert list((broker.data_dir / f"{topic}-0").glob("*.snapshot")) == []  # taken on roll/close only
    broker.restart()
    assert list((broker.data_dir / f"{topic}-0").glob("*.snapshot"))


def test_admin_errors(broker: Broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    name = unique_topic("adminerr")
    create_topic(broker.bootstrap_servers, name, 2)
    with pytest.raises(KafkaException) as shrink:
        admin.create_partitions([NewPartitions(name, 1)])[name].result(10)
    assert shrink.value.args[0].code() == KafkaError.INVALID_PARTITIONS
    with pytest.raises(KafkaException) as same:
        admin.create_partitions([NewPartitions(name, 2)])[name].result(10)
    assert same.value.args[0].code() == KafkaError.INVALID_PARTITIONS
    with pytest.raises(KafkaException) as zero:
        admin.create_topics([NewTopic(name + "-zero", 0, 1)])[name + "-zero"].result(10)
    assert zero.value.args[0].code() == KafkaError.INVALID_PARTITIONS
    with pytest.raises(KafkaException) as bad_config:
        admin.create_topics([NewTopic(name + "-cfg", 1, 1, config={"retention.ms": "soon"})])[name + "-cfg"].result(10)
    assert bad_config.value.args[0].code() == KafkaError.INVALID_CONFIG
    missing = unique_topic("missing")
    with pytest.raises(KafkaException) as unknown:
        admin.delete_topics([missing])[missing].result(10)
    assert unknown.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    with pytest.raises(KafkaException) as too_long:
        admin.create_topics([NewTopic("x" * 250, 1, 1)])["x" * 250].result(10)
    assert too_long.value.args[0].code() == KafkaError.TOPIC_EXCEPTION  # INVALID_TOPIC_EXCEPTION, 17
    topics = admin.list_topics(timeout=10).topics
    assert len(topics[name].partitions) == 2
    assert name + "-zero" not in topics and name + "-cfg" not in topics and "x" * 250 not in topics


def test_incremental_alter_configs_set_delete_and_errors(broker: Broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    name = unique_topic("ialter")
    create_topic(broker.bootstrap_servers, name)
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)

    def alter(*entries: ConfigEntry) -> None:
        change = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=list(entries))
        admin.incremental_alter_configs([change])[change].result(10)

    alter(ConfigEntry("retention.bytes", "123456789", incremental_operation=AlterConfigOpType.SET),
          ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET))
    configs = admin.describe_configs([resource])[resource].result(10)
    assert (configs["retention.bytes"].value, configs["retention.bytes"].source) == (
        "123456789", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert configs["cleanup.policy"].value == "compact"
    alter(ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.APPEND))
    assert set(admin.describe_configs([resource])[resource].result(10)["cleanup.policy"].value.split(",")) == {
        "compact", "delete"}
    alter(ConfigEntry("retention.bytes", None, incremental_operation=AlterConfigOpType.DELETE))
    configs = admin.describe_configs([resource])[resource].result(10)
    assert (configs["retention.bytes"].value, configs["retention.bytes"].source) == (
        "-1", ConfigSource.DEFAULT_CONFIG.value)
    with pytest.raises(KafkaException) as unknown:
        alter(ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET))
    assert unknown.value.args[0].code() == KafkaError.INVALID_CONFIG
    with pytest.raises(KafkaException) as bad_value:
        alter(ConfigEntry("retention.ms", "forever", incremental_operation=AlterConfigOpType.SET))
    assert bad_value.value.args[0].code() == KafkaError.INVALID_CONFIG
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["retention.ms"].value == "604800000", "a rejected change leaves the config alone"
    # the change survives a restart
    alter(ConfigEntry("retention.ms", "7777777", incremental_operation=AlterConfigOpType.SET))
    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    assert admin.describe_configs([resource])[resource].result(10)["retention.ms"].value == "7777777"


def test_broker_config_sources_and_synonyms(broker_factory) -> None:
    broker = broker_factory(**{"message.max.bytes": "2000000"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    broker_resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    configs = admin.describe_configs([broker_resource])[broker_resource].result(10)
    assert (configs["message.max.bytes"].value, configs["message.max.bytes"].source) == (
        "2000000", ConfigSource.STATIC_BROKER_CONFIG.value)
    assert not configs["message.max.bytes"].is_default
    assert (configs["num.partitions"].value, configs["num.partitions"].source) == (
        "1", ConfigSource.DEFAULT_CONFIG.value)
    assert configs["auto.create.topics.enable"].value == "true"
    topic = unique_topic("syn")
    create_topic(broker.bootstrap_servers, topic)
    topic_resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entry = admin.describe_configs([topic_resource])[topic_resource].result(10)["max.message.bytes"]
    assert (entry.value, entry.source) == ("2000000", ConfigSource.STATIC_BROKER_CONFIG.value)
    # (the synonym list is checked over the raw protocol: confluent-kafka keys it by name)


def test_headers_duplicates_and_null_values(broker: Broker) -> None:
    topic = unique_topic("hdr")
    create_topic(broker.bootstrap_servers, topic)
    headers = [("a", b"1"), ("a", b"2"), ("nothing", None), ("\u00e9t\u00e9", "ünïcode".encode())]
    produce_all(producer(broker.bootstrap_servers), topic, [{"key": b"k", "value": b"v", "headers": headers}])
    [got] = consume(broker.bootstrap_servers, topic, 1)
    assert list(got.headers) == headers


def test_timestamp_types(broker: Broker) -> None:
    create_time_topic = unique_topic("ct")
    append_time_topic = unique_topic("lat")
    create_topic(broker.bootstrap_servers, create_time_topic)
    create_topic(broker.bootstrap_servers, append_time_topic, config={"message.timestamp.type": "LogAppendTime"})
    sent = int(time.time() * 1000) - 600_000
    before = int(time.time() * 1000)
    for topic in (create_time_topic, append_time_topic):
        produce_all(producer(broker.bootstrap_servers), topic, [{"value": b"x", "timestamp": sent}])
    after = int(time.time() * 1000)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "ts", "enable.auto.commit": False})
    try:
        stamps = {}
        for topic in (create_time_topic, append_time_topic):
            consumer.assign([TopicPartition(topic, 0, 0)])
            message = poll_until(lambda: consumer.poll(0.2), timeout=15, message=f"a record from {topic}")
            assert message.error() is None, message.error()
            stamps[topic] = message.timestamp()
    finally:
        consumer.close()
    assert stamps[create_time_topic] == (TIMESTAMP_CREATE_TIME, sent)
    kind, appended = stamps[append_time_topic]
    assert kind == TIMESTAMP_LOG_APPEND_TIME
    assert before <= appended <= after, "LogAppendTime is the broker's clock when it appended"


def test_topic_max_message_bytes_override(broker: Broker) -> None:
    topic = unique_topic("tmax")
    create_topic(broker.bootstrap_servers, topic, config={"max.message.bytes": "1000"})
    errors: list[KafkaError | None] = []
    p = producer(broker.bootstrap_servers, **{"compression.type": "none"})
    p.produce(topic, value=b"s" * 100, on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    p.produce(topic, value=b"L" * 5000, on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert errors[0] is None
    assert errors[1] is not None and errors[1].code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert [r.value for r in consume(broker.bootstrap_servers, topic, 1)] == [b"s" * 100]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "x"})
    assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 1)
    consumer.close()


def test_too_large_for_the_default_limit(broker: Broker) -> None:
    topic = unique_topic("deflimit")
    create_topic(broker.bootstrap_servers, topic)
    errors: list[KafkaError | None] = []
    p = producer(broker.bootstrap_servers, **{"message.max.bytes": 5_000_000, "compression.type": "none"})
    p.produce(topic, value=b"q" * 1_100_000, on_delivery=lambda err, msg: errors.append(err))
    p.flush(20)
    assert len(errors) == 1 and errors[0] is not None and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    p.produce(topic, value=b"q" * 1_000_000, on_delivery=lambda err, msg: errors.append(err))
    p.flush(20)
    assert errors[1] is None, "a 1 000 000-byte value fits in the default message.max.bytes of 1048588"


def test_seek_while_consuming(broker: Broker) -> None:
    topic = unique_topic("seek2")
    create_topic(broker.bootstrap_servers, topic, 2)
    produce_all(producer(broker.bootstrap_servers), topic, [{"value": f"{p}-{i}".encode(), "partition": p}
                                                     for p in (0, 1) for i in range(10)])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "seeker",
                         "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen: list[tuple[int, bytes]] = []

    def take(n: int) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []

        def step() -> bool:
            message = consumer.poll(0.2)
            if message is not None:
                assert message.error() is None, message.error()
                out.append((message.offset(), message.value()))
            return len(out) >= n
        poll_until(step, timeout=15, message=f"{n} records")
        return out

    try:
        seen = take(4)
        assert seen == [(i, f"0-{i}".encode()) for i in range(4)]
        consumer.seek(TopicPartition(topic, 0, 8))
        assert take(2) == [(8, b"0-8"), (9, b"0-9")]
        consumer.seek(TopicPartition(topic, 0, 1))
        assert take(3) == [(1, b"0-1"), (2, b"0-2"), (3, b"0-3")]
        consumer.assign([TopicPartition(topic, 1, 7)])
        assert take(3) == [(7, b"1-7"), (8, b"1-8"), (9, b"1-9")]
        assert consumer.position([TopicPartition(topic, 1)])[0].offset == 10
    finally:
        consumer.close()


def test_consumer_waits_for_records_produced_later(broker: Broker) -> None:
    topic = unique_topic("later")
    create_topic(broker.bootstrap_servers, topic)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "later",
                         "enable.auto.commit": False,
                         "fetch.wait.max.ms": 5000})
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        assert consumer.poll(0.5) is None  # empty partition: the fetch is parked in the broker
        produce_all(producer(broker.bootstrap_servers), topic, [{"value": b"late-1"}, {"value": b"late-2"}])
        got = poll_values(consumer, 2, timeout=15, message="records produced after the fetch was parked")
        assert got == [b"late-1", b"late-2"]
    finally:
        consumer.close()


def test_delete_records_edges(broker: Broker) -> None:
    topic = unique_topic("delrec2")
    create_topic(broker.bootstrap_servers, topic, 2)
    produce_all(producer(broker.bootstrap_servers), topic, [{"value": str(i).encode(),
                                                             "partition": 0} for i in range(5)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    beyond = TopicPartition(topic, 0, 6)
    with pytest.raises(KafkaException) as out_of_range:
        admin.delete_records([beyond])[beyond].result(10)
    assert out_of_range.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE
    everything = TopicPartition(topic, 0, -1)  # -1: up to the high watermark
    assert admin.delete_records([everything])[everything].result(10).low_watermark == 5
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "x"})
    assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (5, 5)
    assert consumer.get_watermark_offsets(TopicPartition(topic, 1), timeout=10) == (0, 0)
    consumer.close()
    produce_all(producer(broker.bootstrap_servers), topic, [{"value": b"next", "partition": 0}])
    assert [(r.offset, r.value) for r in consume(broker.bootstrap_servers, topic, 1, offset=5)] == [(5, b"next")]
    broker.restart()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "x"})
    assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (5, 6), \
        "the log start offset survives a restart"
    consumer.close()


def test_auto_create_uses_num_partitions(broker_factory) -> None:
    broker = broker_factory(**{"num.partitions": "3"})
    topic = unique_topic("auto3")
    produce_all(producer(broker.bootstrap_servers), topic, [{"value": b"p2", "partition": 2}])
    metadata = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(topic, timeout=10)
    assert sorted(metadata.topics[topic].partitions) == [0, 1, 2]
    assert consume(broker.bootstrap_servers, topic, 1, partitions=(2,))[0].value == b"p2"


@pytest.mark.parametrize("codec", ["none", "gzip", "zstd"])
def test_timestamp_lookup_inside_one_batch(broker: Broker, codec: str) -> None:
    """ListOffsets by timestamp finds the first matching record, not just its batch."""
    topic = unique_topic("tsbatch")
    create_topic(broker.bootstrap_servers, topic)
    base = 1_700_000_000_000
    produce_all(producer(broker.bootstrap_servers, **{"compression.type": codec, "linger.ms": 1000,
                                              "batch.num.messages": 100}), topic,
                [{"value": str(i).encode(), "timestamp": base + i * 10} for i in range(100)])
    assert len(list((broker.data_dir / f"{topic}-0").glob("*.log"))) == 1
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    tp = TopicPartition(topic, 0)
    found = admin.list_offsets({tp: OffsetSpec.for_timestamp(base + 495)})[tp].result(10)
    assert (found.offset, found.timestamp) == (50, base + 500)
    exact = admin.list_offsets({tp: OffsetSpec.for_timestamp(base + 730)})[tp].result(10)
    assert (exact.offset, exact.timestamp) == (73, base + 730)
    newest = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(10)
    assert (newest.offset, newest.timestamp) == (99, base + 990)


def test_fetch_returns_a_batch_larger_than_the_fetch_limits(broker: Broker) -> None:
    """KIP-74: the first batch is returned even when it exceeds fetch.max.bytes / max.partition.fetch.bytes."""
    topic = unique_topic("kip74")
    create_topic(broker.bootstrap_servers, topic)
    values = [bytes([i]) * 200_000 for i in range(3)]
    uncompressed = producer(broker.bootstrap_servers, **{"compression.type": "none"})
    for value in values:  # one batch each: the broker must hand them out one oversized batch per response
        produce_all(uncompressed, topic, [{"value": value}])
    # receive.message.max.bytes below two batches: a response carrying more than the first batch fails.
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "small",
                         "enable.auto.commit": False,
                         "message.max.bytes": 1000, "fetch.max.bytes": 1024, "max.partition.fetch.bytes": 1024,
                         "receive.message.max.bytes": 300_000,
                         "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        got = poll_values(consumer, 3, timeout=20, message="three 200 kB records through 1 kB fetch limits")
    finally:
        consumer.close()
    assert got == values


def test_timestamp_too_far_in_the_future_is_rejected(broker: Broker) -> None:
    topic = unique_topic("future")
    create_topic(broker.bootstrap_servers, topic)
    errors: list[KafkaError | None] = []
    p = producer(broker.bootstrap_servers)
    p.produce(topic, value=b"later", timestamp=int(time.time() * 1000) + 2 * 3_600_000,
              on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)  # separate batches: Kafka rejects a whole batch when one of its records is out of bounds
    p.produce(topic, value=b"long ago", timestamp=1_000, on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    # message.timestamp.after.max.ms defaults to one hour (Kafka 4.0); before.max.ms is unbounded
    assert errors[0] is not None and errors[0].code() == KafkaError.INVALID_TIMESTAMP
    assert errors[1] is None
    assert [(r.offset, r.value, r.timestamp) for r in consume(broker.bootstrap_servers, topic, 1)] == [
        (0, b"long ago", 1_000)]


def test_delete_and_recreate_topic(broker: Broker) -> None:
    topic = unique_topic("recreate")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    create_topic(broker.bootstrap_servers, topic, 2)
    first_id = str(admin.describe_topics(TopicCollection([topic]))[topic].result(10).topic_id)
    produce_all(producer(broker.bootstrap_servers), topic, [{"value": b"old", "partition": 1}])
    admin.delete_topics([topic])[topic].result(10)
    poll_until(lambda: not (broker.data_dir / f"{topic}-1").exists(), timeout=15,
               message="the deleted partition's directory to go")
    create_topic(broker.bootstrap_servers, topic, 1)
    second = admin.describe_topics(TopicCollection([topic]))[topic].result(10)
    assert str(second.topic_id) != first_id
    assert len(second.partitions) == 1
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "x"})
    assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 0)
    consumer.close()
    produce_all(producer(broker.bootstrap_servers), topic, [{"value": b"new"}])
    assert [(r.offset, r.value) for r in consume(broker.bootstrap_servers, topic, 1)] == [(0, b"new")]


def test_validate_only_and_unknown_resources(broker: Broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    topic = unique_topic("validate")
    admin.create_topics([NewTopic(topic, 4, 1)], validate_only=True)[topic].result(10)
    assert topic not in admin.list_topics(timeout=10).topics, "validate_only creates nothing"
    create_topic(broker.bootstrap_servers, topic, 1)
    admin.create_partitions([NewPartitions(topic, 3)], validate_only=True)[topic].result(10)
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 1
    change = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([change], validate_only=True)[change].result(10)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    assert admin.describe_configs([resource])[resource].result(10)["retention.ms"].value == "604800000"
    missing = ConfigResource(ConfigResource.Type.TOPIC, unique_topic("nothere"))
    with pytest.raises(KafkaException) as unknown:
        admin.describe_configs([missing])[missing].result(10)
    assert unknown.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
