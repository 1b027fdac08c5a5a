"""A broker reset without a restart (Broker.reset(), POST /reset), with real clients: what was there is
gone as on a first start, the broker works afterwards, and clients connected across the reset see what
docs/testing.md ("Reset between tests") says they see."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from minikafka.testing import Broker

pytestmark = pytest.mark.e2e

DEADLINE_S = 30.0
TOPIC = "orders"
GROUP = "billing"
TXN_ID = "order-writer"


@pytest.fixture
def started() -> Iterator[Callable[..., Broker]]:
    brokers: list[Broker] = []

    def start(config: dict[str, object] | None = None, **kwargs: Any) -> Broker:
        broker = Broker(config, **kwargs).start()
        brokers.append(broker)
        return broker

    yield start
    for broker in brokers:
        broker.close()


def _admin(broker: Broker, **extra: object) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers, **extra})


def _create_topic(admin: AdminClient, name: str = TOPIC) -> None:
    admin.create_topics([NewTopic(name, 1)])[name].result(DEADLINE_S)


def _consume(broker: Broker, group: str, topic: str, count: int) -> list[bytes]:
    """Read `count` values in `group` from the start, commit, leave."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    try:
        consumer.subscribe([topic])
        values = _poll(consumer, count)
        consumer.commit(asynchronous=False)
        return values
    finally:
        consumer.close()


def _poll(consumer: Consumer, count: int) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    return values


def _commit_in_transaction(broker: Broker, value: bytes, topic: str = TOPIC) -> Producer:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": TXN_ID})
    producer.init_transactions(DEADLINE_S)
    producer.begin_transaction()
    producer.produce(topic, value)
    producer.commit_transaction(DEADLINE_S)
    return producer


def _partition_dirs(broker: Broker) -> list[str]:
    assert broker.data_dir is not None
    return sorted(path.name for path in Path(broker.data_dir).iterdir() if path.is_dir())


def _wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {DEADLINE_S}s: {what}")
        time.sleep(0.02)


def _broker_config(admin: AdminClient, key: str) -> ConfigEntry:
    resource = ConfigResource(ResourceType.BROKER, "1")
    return admin.describe_configs([resource])[resource].result(DEADLINE_S)[key]


@pytest.mark.parametrize("mode", ["inprocess", "process"])
def test_reset_leaves_what_a_first_start_has(started: Callable[..., Broker], mode: str) -> None:
    broker = started(mode=mode)
    admin = _admin(broker)
    _create_topic(admin)
    _commit_in_transaction(broker, b"order-1").flush(DEADLINE_S)
    # A second InitProducerId bumps the epoch: after the reset the id starts again from epoch 0.
    _commit_in_transaction(broker, b"order-2").flush(DEADLINE_S)
    assert broker.state()["transactions"][TXN_ID]["producer_epoch"] == 1
    assert _consume(broker, GROUP, TOPIC, 2) == [b"order-1", b"order-2"]
    broker.add_fault("Produce", "NOT_LEADER_OR_FOLLOWER", count=None, topic=TOPIC)
    resource = ConfigResource(ResourceType.BROKER, "1",
                              incremental_configs=[ConfigEntry("log.retention.ms", "12345",
                                                               incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(DEADLINE_S)
    assert _broker_config(admin, "log.retention.ms").value == "12345"
    if mode == "process":
        broker.add_crash_point("after_prepare_commit")
    assert set(admin.list_topics(timeout=DEADLINE_S).topics) == {TOPIC, "__consumer_offsets", "__transaction_state"}

    report = broker.reset()

    assert report["removed"] == {"topics": 3, "groups": 1, "transactional_ids": 1}
    assert admin.list_topics(timeout=DEADLINE_S).topics == {}
    assert admin.list_consumer_groups().result(DEADLINE_S).valid == []
    state = broker.state()
    assert (state["topics"], state["groups"], state["transactions"]) == ({}, {}, {})
    assert broker.faults() == []
    assert broker.crash_points() == []
    entry = _broker_config(admin, "log.retention.ms")
    assert entry.value != "12345" and entry.source != ConfigResource.Type.BROKER
    _wait_until(lambda: _partition_dirs(broker) == [], "the partition directories removed")

    # The broker works as a fresh one: the topic made again, the transactional id from scratch (epoch 0),
    # a new group reading from the start.
    _create_topic(admin)
    _commit_in_transaction(broker, b"order-3").flush(DEADLINE_S)
    assert broker.state()["transactions"][TXN_ID]["producer_epoch"] == 0
    assert _consume(broker, GROUP, TOPIC, 1) == [b"order-3"]


def test_clients_connected_across_a_reset(started: Callable[..., Broker]) -> None:
    """As documented: an idempotent producer goes on; a transactional one gets an abortable
    INVALID_PRODUCER_ID_MAPPING, and after abort_transaction() starts again; a consumer whose group is gone
    joins again and reads the new topic from auto.offset.reset."""
    broker = started()
    admin = _admin(broker)
    _create_topic(admin)
    transactional = _commit_in_transaction(broker, b"before")
    idempotent = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True})
    idempotent.produce(TOPIC, b"idempotent-before")
    assert idempotent.flush(DEADLINE_S) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": GROUP,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([TOPIC])
        assert _poll(consumer, 2) == [b"before", b"idempotent-before"]
        consumer.commit(asynchronous=False)

        broker.reset()
        _create_topic(admin)

        idempotent.produce(TOPIC, b"idempotent-after")
        assert idempotent.flush(DEADLINE_S) == 0
        transactional.begin_transaction()
        transactional.produce(TOPIC, b"lost")
        with pytest.raises(KafkaException) as failed:
            transactional.commit_transaction(DEADLINE_S)
        error = failed.value.args[0]
        assert error.name() == "INVALID_PRODUCER_ID_MAPPING" and error.txn_requires_abort()
        transactional.abort_transaction(DEADLINE_S)
        transactional.begin_transaction()
        transactional.produce(TOPIC, b"transactional-after")
        transactional.commit_transaction(DEADLINE_S)

        assert _poll(consumer, 2) == [b"idempotent-after", b"transactional-after"]
        broker.wait_for(lambda state: state["groups"].get(GROUP, {}).get("state") == "Stable", DEADLINE_S)
    finally:
        consumer.close()


def test_acls_are_gone_after_a_reset(started: Callable[..., Broker]) -> None:
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret" '
            'user_alice="alice-secret";')
    broker = started({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
                      "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
                      "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                      "super.users": "User:admin"})
    admin = _admin(broker, **{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                              "sasl.username": "admin", "sasl.password": "admin-secret"})
    binding = AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.WRITE, AclPermissionType.ALLOW)
    for future in admin.create_acls([binding]).values():
        future.result(DEADLINE_S)
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(everything).result(DEADLINE_S) == [binding]

    broker.reset()

    assert admin.describe_acls(everything).result(DEADLINE_S) == []
    _create_topic(admin)  # the super user, authenticated before the reset, still is


def test_post_reset_needs_the_admin_token(started: Callable[..., Broker]) -> None:
    broker = started({"admin.listener.token": "s3cret"}, mode="process")
    _create_topic(_admin(broker))

    def post(headers: dict[str, str], method: str = "POST", path: str = "/reset") -> tuple[int, dict[str, Any]]:
        request = urllib.request.Request(f"{broker.admin_url}{path}", data=b"" if method == "POST" else None,
                                         method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=DEADLINE_S) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    assert post({})[0] == 401
    assert post({"Authorization": "Bearer wrong"})[0] == 401
    token = {"Authorization": "Bearer s3cret"}
    assert list(post(token, method="GET", path="/state")[1]["topics"]) == [TOPIC]  # the refused ones did nothing
    assert post(token, method="GET")[0] == 405
    status, body = post(token)
    assert status == 200
    assert body["removed"] == {"topics": 1, "groups": 0, "transactional_ids": 0}
    assert body["took_ms"] >= 0
    assert post(token, method="GET", path="/state")[1]["topics"] == {}
    assert post(token)[1]["removed"]["topics"] == 0


def test_reset_starts_stopped_nodes_again(started: Callable[..., Broker]) -> None:
    broker = started(nodes=3)
    broker.stop_node(2)
    assert [node["online"] for node in broker.cluster()["nodes"]] == [True, False, True]
    broker.reset()
    assert [node["online"] for node in broker.cluster()["nodes"]] == [True, True, True]
    admin = _admin(broker)
    _create_topic(admin)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce(TOPIC, b"v")
    assert producer.flush(DEADLINE_S) == 0


def test_a_consumer_protocol_member_joins_again_after_a_reset(started: Callable[..., Broker]) -> None:
    """KIP-848: the member's next ConsumerGroupHeartbeat finds no group (UNKNOWN_MEMBER_ID); it joins again
    and reads the topic made after the reset."""
    broker = started({"minikafka.trace.ring.size": 1000})
    admin = _admin(broker)
    _create_topic(admin)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce(TOPIC, b"before")
    assert producer.flush(DEADLINE_S) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": GROUP,
                         "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([TOPIC])
        assert _poll(consumer, 1) == [b"before"]
        broker.reset()
        _create_topic(admin)
        producer.produce(TOPIC, b"after")
        assert producer.flush(DEADLINE_S) == 0
        assert _poll(consumer, 1) == [b"after"]
        answers = [exchange["response"]["error_code"] for exchange in broker.trace(api="ConsumerGroupHeartbeat")]
        assert "UNKNOWN_MEMBER_ID" in answers
        assert answers[answers.index("UNKNOWN_MEMBER_ID") + 1:].count("NONE") >= 1
    finally:
        consumer.close()


def test_reset_clears_quotas_telemetry_share_groups_schemas_and_moves(started: Callable[..., Broker]) -> None:
    """The subsystems issue 48 and 49 added plug into the one reset point: none of their state survives."""
    from confluent_kafka import ShareConsumer
    from minikafka.protocol.api_keys import ApiKey
    from minikafka.tools.admin_client import AdminClient as WireAdmin
    from minikafka.tools.configs import alter_quotas, describe_quotas

    broker = started({"minikafka.client.telemetry.enabled": "true"}, schema_registry=True)
    _create_topic(_admin(broker), "jobs")
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce("jobs", b"job")
    assert producer.flush(DEADLINE_S) == 0
    with WireAdmin(broker.bootstrap_servers) as wire:
        alter_quotas(wire.any_broker(), (("client-id", "slow"),), {"producer_byte_rate": 1_000_000}, [])
        wire.any_broker().request(ApiKey.INCREMENTAL_ALTER_CONFIGS, validate_only=False, resources=[{
            "resource_type": 16, "resource_name": "everything", "configs": [
                {"name": "metrics", "config_operation": 0, "value": "*"}]}])
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "workers"})
    consumer.subscribe(["jobs"])
    try:
        deadline = time.monotonic() + DEADLINE_S
        while "workers" not in broker.state().get("share_groups", {}) and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert "workers" in broker.state()["share_groups"]
    finally:
        consumer.close()
    schema = json.dumps({"type": "record", "name": "Job", "fields": [{"name": "id", "type": "int"}]})
    registered = urllib.request.Request(f"{broker.schema_registry_url}/subjects/jobs-value/versions",
                                        data=json.dumps({"schema": schema}).encode(), method="POST",
                                        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(registered, timeout=DEADLINE_S) as response:
        assert json.loads(response.read())["id"] >= 1

    broker.reset()

    state = broker.state()
    assert state["share_groups"] == {} and state["clients"] == {} and state["topics"] == {}
    with WireAdmin(broker.bootstrap_servers) as wire:
        assert describe_quotas(wire.any_broker(), [], strict=False) == []
        listed = wire.any_broker().request(ApiKey.LIST_CONFIG_RESOURCES, resource_types=[16])
        assert [r.resource_name for r in listed.config_resources] == []
    with urllib.request.urlopen(f"{broker.schema_registry_url}/subjects", timeout=DEADLINE_S) as response:
        assert json.loads(response.read()) == []
    assert not (broker.data_dir / "client-quotas.json").exists()
