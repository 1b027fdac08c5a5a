"""ACLs with real clients: SASL users, an admin who is a super user, producers and consumers refused and
then allowed once an ACL is added, topics hidden from Metadata, ACL admin through confluent-kafka and
kafka-python (aiokafka's admin client has no ACL calls; its producer and consumer are checked instead)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from minikafka.testing import Broker

from tests.support.names import unique_topic

DEADLINE_S = 30.0
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret" '
        'user_alice="alice-secret" user_bob="bob-secret";')
SECURED = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
    "auto.create.topics.enable": "false",
}


def _config(broker: Broker, user: str) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": f"{user}-secret"}


@pytest.fixture
def secured(broker_factory: Callable[..., Broker]) -> Broker:
    return broker_factory(**SECURED)


def _allow(user: str, resource: ResourceType, name: str, operation: AclOperation,
           pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(resource, name, pattern, f"User:{user}", "*", operation, AclPermissionType.ALLOW)


def _create(admin: AdminClient, *bindings: AclBinding) -> None:
    for future in admin.create_acls(list(bindings)).values():
        future.result(DEADLINE_S)


def _produce(config: dict[str, Any], topic: str) -> str | None:
    """The delivery error's name, None when the message was written."""
    outcome: list[str | None] = []
    producer = Producer({**config, "message.timeout.ms": 5000, "retries": 0})
    producer.produce(topic, b"value", on_delivery=lambda error, _m: outcome.append(error and error.name()))
    producer.flush(DEADLINE_S)
    assert outcome, "the delivery report came"
    return outcome[0]


def test_a_producer_is_refused_until_an_acl_allows_it(secured: Broker) -> None:
    admin = AdminClient(_config(secured, "admin"))
    topic = unique_topic("orders")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(DEADLINE_S)
    alice = _config(secured, "alice")
    assert _produce(alice, topic) == "TOPIC_AUTHORIZATION_FAILED"
    _create(admin, _allow("alice", ResourceType.TOPIC, topic[:6], AclOperation.WRITE, ResourcePatternType.PREFIXED))
    assert _produce(alice, topic) is None
    assert _produce(_config(secured, "bob"), topic) == "TOPIC_AUTHORIZATION_FAILED", "bob has no ACL"


@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
def test_a_consumer_group_is_refused_until_the_group_and_topic_are_allowed(secured: Broker,
                                                                          group_protocol: str) -> None:
    """With the consumer protocol (KIP-848) the topic refusal comes from the heartbeat itself, for the whole
    subscription, as Kafka's handleConsumerGroupHeartbeat answers (librdkafka's 0109 expects it)."""
    admin = AdminClient(_config(secured, "admin"))
    topic, group = unique_topic("events"), unique_topic("readers")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(DEADLINE_S)
    producer = Producer(_config(secured, "admin"))
    producer.produce(topic, b"event-1")
    assert producer.flush(DEADLINE_S) == 0

    def first_outcome() -> tuple[str, bytes | str | None]:
        consumer = Consumer({**_config(secured, "alice"), "group.id": group, "auto.offset.reset": "earliest",
                             "group.protocol": group_protocol})
        consumer.subscribe([topic])
        try:
            deadline = time.monotonic() + DEADLINE_S
            while time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is None:
                    continue
                if message.error() is not None:
                    return message.error().name(), message.topic()
                return "OK", message.value()
            return "TIMEOUT", None
        finally:
            consumer.close()

    assert first_outcome()[0] == "GROUP_AUTHORIZATION_FAILED"
    _create(admin, _allow("alice", ResourceType.GROUP, group, AclOperation.READ))
    # Classic: the refusal is the topic's own (ListOffsets/Fetch); consumer protocol: the heartbeat's, for
    # the whole subscription, so librdkafka reports it without a topic.
    assert first_outcome() == ("TOPIC_AUTHORIZATION_FAILED", topic if group_protocol == "classic" else None)
    _create(admin, _allow("alice", ResourceType.TOPIC, topic, AclOperation.READ))
    assert first_outcome() == ("OK", b"event-1")


def test_metadata_hides_the_topics_a_principal_may_not_describe(secured: Broker) -> None:
    admin = AdminClient(_config(secured, "admin"))
    public, secret = unique_topic("public"), unique_topic("secret")
    for name in (public, secret):
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(DEADLINE_S)
    _create(admin, _allow("alice", ResourceType.TOPIC, public, AclOperation.READ))
    seen = AdminClient(_config(secured, "alice")).list_topics(timeout=DEADLINE_S).topics
    assert public in seen and secret not in seen
    named = AdminClient(_config(secured, "alice")).list_topics(secret, timeout=DEADLINE_S).topics[secret]
    assert named.error is not None and named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert set(admin.list_topics(timeout=DEADLINE_S).topics) >= {public, secret}


def test_confluent_admin_creates_describes_and_deletes_acls_and_they_survive_a_restart(secured: Broker) -> None:
    admin = AdminClient(_config(secured, "admin"))
    bindings = [_allow("alice", ResourceType.TOPIC, "orders", AclOperation.READ),
                _allow("alice", ResourceType.TOPIC, "pay-", AclOperation.WRITE, ResourcePatternType.PREFIXED),
                _allow("bob", ResourceType.GROUP, "*", AclOperation.READ)]
    _create(admin, *bindings)
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    assert set(admin.describe_acls(everything).result(DEADLINE_S)) == set(bindings)

    secured.restart()
    admin = AdminClient(_config(secured, "admin"))
    alices = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, "User:alice", None,
                              AclOperation.ANY, AclPermissionType.ANY)
    assert set(admin.describe_acls(alices).result(DEADLINE_S)) == set(bindings[:2])
    matching = AclBindingFilter(ResourceType.TOPIC, "pay-eu", ResourcePatternType.MATCH, None, None,
                                AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(matching).result(DEADLINE_S) == [bindings[1]]
    [deleted] = admin.delete_acls([alices]).values()
    assert set(deleted.result(DEADLINE_S)) == set(bindings[:2])
    assert admin.describe_acls(everything).result(DEADLINE_S) == [bindings[2]]


def test_only_the_cluster_alterer_may_create_acls(secured: Broker) -> None:
    alice = AdminClient(_config(secured, "alice"))
    [future] = alice.create_acls([_allow("alice", ResourceType.TOPIC, "x", AclOperation.READ)]).values()
    with pytest.raises(KafkaException, match=r"CLUSTER_AUTHORIZATION_FAILED|[Cc]luster authorization failed"):
        future.result(DEADLINE_S)
    _create(AdminClient(_config(secured, "admin")),
            _allow("alice", ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER))
    _create(alice, _allow("alice", ResourceType.TOPIC, "x", AclOperation.READ))


def test_acl_calls_without_an_authorizer_are_security_disabled(broker: Broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    [future] = admin.create_acls([_allow("alice", ResourceType.TOPIC, "x", AclOperation.READ)]).values()
    with pytest.raises(KafkaException, match=r"SECURITY_DISABLED|No Authorizer"):
        future.result(DEADLINE_S)


def test_kafka_python_admin_manages_acls(secured: Broker) -> None:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ACLResourcePatternType as Pattern
    from kafka.admin import ResourceType as KpResourceType

    admin = KafkaAdminClient(bootstrap_servers=secured.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username="admin", sasl_plain_password="admin-secret")
    try:
        acl = ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                  ResourcePattern(KpResourceType.TOPIC, "kp-orders", Pattern.LITERAL))
        created = admin.create_acls([acl])
        assert created["failed"] == [] and len(created["succeeded"]) == 1
        found = ACLFilter("User:alice", None, ACLOperation.ANY, ACLPermissionType.ANY,
                          ResourcePatternFilter(KpResourceType.TOPIC, None, Pattern.ANY))
        acls, error = admin.describe_acls(found)
        assert error.errno == 0 and [(a.resource_pattern.resource_name, a.operation) for a in acls] == [
            ("kp-orders", ACLOperation.READ)]
        [(_filter, deleted, delete_error)] = admin.delete_acls([found])
        assert delete_error.errno == 0 and len(deleted) == 1
        assert admin.describe_acls(found)[0] == []
    finally:
        admin.close()


def test_aiokafka_producer_and_consumer_are_refused_then_allowed(secured: Broker) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as AioTopicPartition
    from aiokafka.errors import TopicAuthorizationFailedError

    admin = AdminClient(_config(secured, "admin"))
    topic = unique_topic("aio-acl")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(DEADLINE_S)
    config = {"bootstrap_servers": secured.bootstrap_servers, "security_protocol": "SASL_PLAINTEXT",
              "sasl_mechanism": "PLAIN", "sasl_plain_username": "bob", "sasl_plain_password": "bob-secret"}

    async def produce() -> None:
        producer = AIOKafkaProducer(**config, request_timeout_ms=5000)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"aiokafka")
        finally:
            await producer.stop()

    async def consume() -> bytes:
        consumer = AIOKafkaConsumer(**config, auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([AioTopicPartition(topic, 0)])
            record = await asyncio.wait_for(consumer.getone(), DEADLINE_S)
        finally:
            await consumer.stop()
        return bytes(record.value)

    with pytest.raises(TopicAuthorizationFailedError):
        asyncio.run(produce())
    _create(admin, _allow("bob", ResourceType.TOPIC, topic, AclOperation.WRITE),
            _allow("bob", ResourceType.TOPIC, topic, AclOperation.READ))
    asyncio.run(produce())
    assert asyncio.run(consume()) == b"aiokafka"


def test_each_refused_group_and_config_resource_gets_its_own_error(secured: Broker) -> None:
    from confluent_kafka.admin import ConfigResource

    admin = AdminClient(_config(secured, "admin"))
    mine, theirs = unique_topic("mine"), unique_topic("theirs")
    for name in (mine, theirs):
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(DEADLINE_S)
    _create(admin, _allow("alice", ResourceType.TOPIC, mine, AclOperation.DESCRIBE_CONFIGS),
            _allow("alice", ResourceType.GROUP, "g-mine", AclOperation.DESCRIBE))
    alice = AdminClient(_config(secured, "alice"))
    futures = alice.describe_configs([ConfigResource("TOPIC", mine), ConfigResource("TOPIC", theirs)])
    by_name = {resource.name: future for resource, future in futures.items()}
    assert "retention.ms" in by_name[mine].result(DEADLINE_S)
    with pytest.raises(KafkaException, match=r"TOPIC_AUTHORIZATION_FAILED|[Aa]uthorization"):
        by_name[theirs].result(DEADLINE_S)
    groups = alice.describe_consumer_groups(["g-mine", "g-theirs"])
    assert groups["g-mine"].result(DEADLINE_S).group_id == "g-mine"
    with pytest.raises(KafkaException, match=r"GROUP_AUTHORIZATION_FAILED|[Aa]uthorization"):
        groups["g-theirs"].result(DEADLINE_S)
