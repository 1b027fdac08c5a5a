"""Dynamic broker configs (KIP-226) and group configs (KIP-848) through the config admin APIs.

confluent-kafka (IncrementalAlterConfigs, DescribeConfigs; it cannot name the cluster-default resource "",
librdkafka refuses an empty resource name) and kafka-python (AlterConfigs, the older API, and
DescribeConfigs, for this broker and the cluster default), against minikafka.testing.Broker.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from kafka.admin import ConfigResource as KPConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kio.schema.alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
)
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.incremental_alter_configs.v1.request import AlterableConfig as IncrementalConfig
from kio.schema.incremental_alter_configs.v1.request import AlterConfigsResource as IncrementalResource
from kio.schema.incremental_alter_configs.v1.request import IncrementalAlterConfigsRequest
from minikafka.protocol.codec import decode_response, encode_request
from minikafka.testing import Broker
from minikafka.testing.broker import MODES, Mode

from tests.support.wire import Wire

MANUAL = {"minikafka.clock": "manual"}
DYNAMIC_BROKER, DYNAMIC_DEFAULT_BROKER, STATIC_BROKER, DEFAULT, GROUP_SOURCE = 2, 3, 4, 5, 8


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({"message.max.bytes": "2000000"}) as running:
        yield running


def _set(resource_type: ResourceType, name: str, **values: str | None) -> ConfigResource:
    resource = ConfigResource(resource_type, name)
    for key, value in values.items():
        operation = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
        resource.add_incremental_config(ConfigEntry(key.replace("_", "."), value, incremental_operation=operation))
    return resource


def _alter(admin: AdminClient, resource: ConfigResource, validate_only: bool = False) -> None:
    admin.incremental_alter_configs([resource], validate_only=validate_only)[resource].result(15)


def _described(admin: AdminClient, resource_type: ResourceType, name: str) -> dict[str, Any]:
    resource = ConfigResource(resource_type, name)
    return admin.describe_configs([resource])[resource].result(15)


def _refused(admin: AdminClient, resource: ConfigResource) -> KafkaError:
    with pytest.raises(KafkaException) as raised:
        _alter(admin, resource)
    return raised.value.args[0]


def _raw(broker: Broker, request: Any, api_key: int, version: int) -> Any:
    wire = Wire(broker)
    try:
        wire.send(encode_request(7, request))
        correlation, body = decode_response(wire.receive(), api_key, version)
        assert correlation == 7
        return body
    finally:
        wire.close()


def test_broker_config_set_described_and_deleted_with_confluent(broker: Broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    plain, overridden = _name("dynplain"), _name("dynover")
    futures = admin.create_topics([NewTopic(plain, 1, 1), NewTopic(overridden, 1, 1, config={"retention.ms": "1000"})])
    for future in futures.values():
        future.result(15)

    _alter(admin, _set(ResourceType.BROKER, "1", log_retention_ms="60000", log_segment_bytes="1048576"))

    described = _described(admin, ResourceType.BROKER, "1")
    retention = described["log.retention.ms"]
    assert (retention.value, retention.source, retention.is_read_only) == ("60000", DYNAMIC_BROKER, False)
    assert (described["log.segment.bytes"].value, described["log.segment.bytes"].source) == ("1048576", DYNAMIC_BROKER)
    assert (described["message.max.bytes"].value, described["message.max.bytes"].source) == ("2000000", STATIC_BROKER)
    assert described["log.dirs"].is_read_only, "a static key is shown read-only"
    topic = _described(admin, ResourceType.TOPIC, plain)
    assert (topic["retention.ms"].value, topic["retention.ms"].source) == ("60000", DYNAMIC_BROKER)
    assert (topic["segment.bytes"].value, topic["segment.bytes"].source) == ("1048576", DYNAMIC_BROKER)
    own = _described(admin, ResourceType.TOPIC, overridden)["retention.ms"]
    assert (own.value, own.source) == ("1000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)

    _alter(admin, _set(ResourceType.BROKER, "1", log_retention_ms=None))
    back = _described(admin, ResourceType.BROKER, "1")["log.retention.ms"]
    assert (back.value, back.source) == ("604800000", DEFAULT)
    topic = _described(admin, ResourceType.TOPIC, plain)
    assert (topic["retention.ms"].value, topic["retention.ms"].source) == ("604800000", DEFAULT)
    assert (topic["segment.bytes"].value, topic["segment.bytes"].source) == ("1048576", DYNAMIC_BROKER)


def test_broker_config_refusals_and_validate_only_with_confluent(broker: Broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    error = _refused(admin, _set(ResourceType.BROKER, "1", log_retention_ms="60000", log_dirs="/elsewhere"))
    assert error.code() == KafkaError.INVALID_REQUEST
    assert error.str() == "Cannot update these configs dynamically: Set(log.dirs)"

    error = _refused(admin, _set(ResourceType.BROKER, "1", log_retention_ms="soon"))
    assert error.code() == KafkaError.INVALID_REQUEST
    assert "log.retention.ms" in error.str()

    # librdkafka sends a broker resource to that broker, so another node's id is asked over the raw protocol.
    other = IncrementalAlterConfigsRequest(validate_only=False, resources=(IncrementalResource(
        resource_type=4, resource_name="2", configs=(
            IncrementalConfig(name="log.retention.ms", config_operation=0, value="60000"),)),))
    [response] = _raw(broker, other, 44, 1).responses
    assert (response.error_code, response.error_message) == (42, "Unexpected broker id, expected 1, but received 2")

    _alter(admin, _set(ResourceType.BROKER, "1", log_retention_ms="60000"), validate_only=True)
    unchanged = _described(admin, ResourceType.BROKER, "1")["log.retention.ms"]
    assert (unchanged.value, unchanged.source) == ("604800000", DEFAULT), "validate_only changed nothing"
    assert not (broker.data_dir / "dynamic-configs.json").exists()

    append = ConfigResource(ResourceType.BROKER, "1")
    append.add_incremental_config(ConfigEntry("log.cleanup.policy", "compact",
                                              incremental_operation=AlterConfigOpType.APPEND))
    _alter(admin, append)
    assert _described(admin, ResourceType.BROKER, "1")["log.cleanup.policy"].value == "delete,compact"
    not_a_list = ConfigResource(ResourceType.BROKER, "1")
    not_a_list.add_incremental_config(ConfigEntry("log.retention.ms", "1",
                                                  incremental_operation=AlterConfigOpType.APPEND))
    error = _refused(admin, not_a_list)
    assert (error.code(), error.str()) == (KafkaError.INVALID_REQUEST,
                                           "Config value append is not allowed for config key: log.retention.ms")


def _set_cluster_default(broker: Broker, **values: str | None) -> Any:
    """IncrementalAlterConfigs on the cluster-default resource "" (no Python client can name it)."""
    request = IncrementalAlterConfigsRequest(validate_only=False, resources=(IncrementalResource(
        resource_type=4, resource_name="", configs=tuple(
            IncrementalConfig(name=key.replace("_", "."), config_operation=0 if value is not None else 1, value=value)
            for key, value in values.items())),))
    [response] = _raw(broker, request, 44, 1).responses
    return response


def _describe_raw(broker: Broker, name: str) -> dict[str, tuple[str | None, int, list[tuple[str, str | None, int]]]]:
    request = DescribeConfigsRequest(include_synonyms=True, include_documentation=False, resources=(
        DescribeConfigsResource(resource_type=4, resource_name=name, configuration_keys=None),))
    [result] = _raw(broker, request, 32, 4).results
    assert result.error_code == 0
    return {entry.name: (entry.value, entry.config_source, [(s.name, s.value, s.source) for s in entry.synonyms])
            for entry in result.configs}


def test_this_broker_with_kafka_python_over_a_cluster_default(broker: Broker) -> None:
    response = _set_cluster_default(broker, log_retention_ms="120000", log_segment_bytes="2097152")
    assert (response.error_code, response.error_message) == (0, None)
    assert _describe_raw(broker, "") == {
        "log.retention.ms": ("120000", DYNAMIC_DEFAULT_BROKER, [("log.retention.ms", "120000", DYNAMIC_DEFAULT_BROKER),
                                                               ("log.retention.ms", "604800000", DEFAULT)]),
        "log.segment.bytes": ("2097152", DYNAMIC_DEFAULT_BROKER, [
            ("log.segment.bytes", "2097152", DYNAMIC_DEFAULT_BROKER), ("log.segment.bytes", "1073741824", DEFAULT)])}

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        # AlterConfigs, the older API (kafka-python re-sends the per-broker keys already set, as it must).
        result = admin.alter_configs([KPConfigResource(ConfigResourceType.BROKER, "1", configs={
            "log.retention.ms": "90000"})], incremental=False)
        assert result == {"broker": {"1": "OK"}}
        result = admin.alter_configs([KPConfigResource(ConfigResourceType.BROKER, "1", configs={
            "message.max.bytes": "3000000"})], incremental=False)
        assert result == {"broker": {"1": "OK"}}
        mine = admin.describe_configs([KPConfigResource(ConfigResourceType.BROKER, "1")], include_synonyms=True,
                                      config_filter="all")["broker"]["1"]
        assert (mine["log.retention.ms"]["value"], mine["log.retention.ms"]["config_source"]) == (
            "90000", "DYNAMIC_BROKER_CONFIG")
        assert [(s["name"], s["value"], s["source"]) for s in mine["log.retention.ms"]["synonyms"]] == [
            ("log.retention.ms", "90000", "DYNAMIC_BROKER_CONFIG"),
            ("log.retention.ms", "120000", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
            ("log.retention.ms", "604800000", "DEFAULT_CONFIG")]
        assert (mine["message.max.bytes"]["value"], mine["message.max.bytes"]["config_source"]) == (
            "3000000", "DYNAMIC_BROKER_CONFIG")
        assert (mine["log.segment.bytes"]["value"], mine["log.segment.bytes"]["config_source"]) == (
            "2097152", "DYNAMIC_DEFAULT_BROKER_CONFIG")
        refused = admin.alter_configs([KPConfigResource(ConfigResourceType.BROKER, "1", configs={
            "num.partitions": "3"})], incremental=False, raise_on_unknown=False)
        assert refused == {"broker": {"1": "[Error 42] InvalidRequestError: Cannot update these configs dynamically: "
                                           "Set(num.partitions)"}}
    finally:
        admin.close()


def test_legacy_alter_configs_replaces_the_broker_set(broker: Broker) -> None:
    """AlterConfigs (API 33) sends the whole set: a key left out goes back to the level below."""
    def alter(*configs: tuple[str, str], validate_only: bool = False) -> Any:
        request = AlterConfigsRequest(validate_only=validate_only, resources=(AlterConfigsResource(
            resource_type=4, resource_name="", configs=tuple(AlterableConfig(name=k, value=v) for k, v in configs)),))
        [response] = _raw(broker, request, 33, 1).responses
        return response

    assert alter(("log.retention.ms", "120000"), ("log.roll.ms", "3600000")).error_code == 0
    assert alter(("log.roll.ms", "7200000")).error_code == 0
    refused = alter(("log.roll.ms", "7200000"), ("num.partitions", "3"))
    assert (refused.error_code, refused.error_message) == (42, "Cannot update these configs dynamically: "
                                                               "Set(num.partitions)")
    request = DescribeConfigsRequest(include_synonyms=False, include_documentation=False, resources=(
        DescribeConfigsResource(resource_type=4, resource_name="", configuration_keys=None),))
    [result] = _raw(broker, request, 32, 4).results
    assert {(entry.name, entry.value, entry.config_source) for entry in result.configs} == {
        ("log.roll.ms", "7200000", DYNAMIC_DEFAULT_BROKER)}
    saved = json.loads((broker.data_dir / "dynamic-configs.json").read_text())
    assert saved["brokers"] == {"": {"log.roll.ms": "7200000"}}


def test_cluster_wide_retention_deletes_segments_of_topics_without_override() -> None:
    topic = _name("dynretention")
    with Broker(MANUAL) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic(topic, 1, 1, config={
            "message.timestamp.type": "LogAppendTime", "segment.ms": "60000"})])[topic].result(15)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
        producer.produce(topic, b"old")
        assert producer.flush(15) == 0
        broker.advance_clock(60_001)
        producer.produce(topic, b"new")
        assert producer.flush(15) == 0
        assert broker.state()["topics"][topic]["partitions"]["0"]["segments"] == 2

        # A retention check (log.retention.check.interval.ms 300000) under the 7-day default keeps both.
        broker.advance_clock(300_000)
        partition = broker.state()["topics"][topic]["partitions"]["0"]
        assert (partition["log_start_offset"], partition["segments"]) == (0, 2)

        # Past "old" (630 s old at the next check) but not "new" (570 s): an expired active segment would go too.
        assert _set_cluster_default(broker, log_retention_ms="600000").error_code == 0
        broker.advance_clock(300_000)
        partition = broker.state()["topics"][topic]["partitions"]["0"]
        assert (partition["log_start_offset"], partition["segments"]) == (1, 1)

        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": _name("reader"),
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + 20
        try:
            while not values and time.monotonic() < deadline:
                message = consumer.poll(0.1)
                if message is not None and not message.error():
                    values.append(message.value())
        finally:
            consumer.close()
        assert values == [b"new"]


def test_group_configs_with_confluent(broker: Broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    group = _name("dyngroup")
    before = _described(admin, ResourceType.GROUP, group)
    assert {key: (entry.value, entry.source) for key, entry in before.items()} == {
        "consumer.heartbeat.interval.ms": ("5000", DEFAULT), "consumer.session.timeout.ms": ("45000", DEFAULT),
        "share.auto.offset.reset": ("latest", DEFAULT), "share.heartbeat.interval.ms": ("5000", DEFAULT),
        "share.record.lock.duration.ms": ("30000", DEFAULT), "share.session.timeout.ms": ("45000", DEFAULT),
        "share.isolation.level": ("read_uncommitted", DEFAULT)}

    _alter(admin, _set(ResourceType.GROUP, group, **{"consumer.session.timeout.ms": "50000",
                                                     "consumer.heartbeat.interval.ms": "6000"}))
    after = _described(admin, ResourceType.GROUP, group)
    assert (after["consumer.session.timeout.ms"].value, after["consumer.session.timeout.ms"].source) == (
        "50000", GROUP_SOURCE)
    assert (after["consumer.heartbeat.interval.ms"].value, after["consumer.heartbeat.interval.ms"].source) == (
        "6000", GROUP_SOURCE)

    error = _refused(admin, _set(ResourceType.GROUP, group, **{"consumer.session.timeout.ms": "40000"}))
    assert (error.code(), error.str()) == (KafkaError.INVALID_CONFIG, "consumer.session.timeout.ms must be greater "
                                           "than or equal to group.consumer.min.session.timeout.ms")
    error = _refused(admin, _set(ResourceType.GROUP, group, **{"consumer.heartbeat.interval.ms": "20000"}))
    assert (error.code(), error.str()) == (KafkaError.INVALID_CONFIG, "consumer.heartbeat.interval.ms must be less "
                                           "than or equal to group.consumer.max.heartbeat.interval.ms")
    error = _refused(admin, _set(ResourceType.GROUP, group, **{"session.timeout.ms": "50000"}))
    assert (error.code(), error.str()) == (KafkaError.INVALID_CONFIG, "Unknown group config name: session.timeout.ms")
    assert _described(admin, ResourceType.GROUP, group)["consumer.session.timeout.ms"].value == "50000"

    _alter(admin, _set(ResourceType.GROUP, group, **{"consumer.session.timeout.ms": None}))
    reset = _described(admin, ResourceType.GROUP, group)["consumer.session.timeout.ms"]
    assert (reset.value, reset.source) == ("45000", DEFAULT)


def test_group_bounds_follow_the_broker_settings() -> None:
    with Broker({"group.consumer.min.session.timeout.ms": "30000",
                 "group.consumer.session.timeout.ms": "30000"}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        group = _name("dynbounds")
        assert _described(admin, ResourceType.GROUP, group)["consumer.session.timeout.ms"].value == "30000"
        _alter(admin, _set(ResourceType.GROUP, group, **{"consumer.session.timeout.ms": "40000"}))
        assert _described(admin, ResourceType.GROUP, group)["consumer.session.timeout.ms"].value == "40000"


@pytest.mark.parametrize("mode", MODES)
def test_dynamic_configs_survive_a_restart(mode: Mode) -> None:
    group = _name("dynkept")
    with Broker(mode=mode) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        _alter(admin, _set(ResourceType.BROKER, "1", log_retention_ms="75000"))
        _alter(admin, _set(ResourceType.GROUP, group, **{"consumer.session.timeout.ms": "55000"}))
        broker.restart()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        retention = _described(admin, ResourceType.BROKER, "1")["log.retention.ms"]
        assert (retention.value, retention.source) == ("75000", DYNAMIC_BROKER)
        session = _described(admin, ResourceType.GROUP, group)["consumer.session.timeout.ms"]
        assert (session.value, session.source) == ("55000", GROUP_SOURCE)
        topic = _name("dynafter")
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
        assert _described(admin, ResourceType.TOPIC, topic)["retention.ms"].value == "75000"


def test_dynamic_message_max_bytes_refuses_larger_batches(broker: Broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    topic = _name("dynsize")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0,
                         "compression.type": "none", "message.send.max.retries": 0})
    delivered: list[KafkaError | None] = []
    producer.produce(topic, b"x" * 5000, on_delivery=lambda error, _message: delivered.append(error))
    assert producer.flush(15) == 0 and delivered == [None], "accepted under the static 2000000"

    _alter(admin, _set(ResourceType.BROKER, "1", message_max_bytes="1000"))
    producer.produce(topic, b"x" * 5000, on_delivery=lambda error, _message: delivered.append(error))
    assert producer.flush(15) == 0
    assert delivered[1] is not None and delivered[1].code() == KafkaError.MSG_SIZE_TOO_LARGE
