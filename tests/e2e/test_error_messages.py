"""The error messages admin calls carry are Kafka's own texts (issue 47): clients and their tests match them.

Each case runs one call over a real socket, through confluent-kafka's AdminClient where it passes the
broker's message on, or as a raw request (minikafka.protocol.codec) where the client checks the case itself
or drops the message, and compares the message with the text Kafka 4's controller or broker writes for the
same case (None where Kafka sends the code alone).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from minikafka.protocol.codec import decode_response, encode_request
from minikafka.testing import Broker

from tests.support.clients import create_topic
from tests.support.names import unique_topic
from tests.support.wire import Wire


def _failure(future: Any) -> KafkaError:
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=15)
    return raised.value.args[0]


def _only(futures: dict[Any, Any]) -> Any:
    [future] = futures.values()
    return future


def _create(admin: AdminClient, topic: NewTopic) -> KafkaError:
    return _failure(_only(admin.create_topics([topic], operation_timeout=10)))


def _incremental(admin: AdminClient, topic: str, name: str, value: str,
                 operation: AlterConfigOpType = AlterConfigOpType.SET) -> KafkaError:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=operation)])
    return _failure(_only(admin.incremental_alter_configs([resource])))


def _shrink(admin: AdminClient, topic: str) -> KafkaError:
    _only(admin.create_topics([NewTopic(topic, 3, 1)], operation_timeout=10)).result(timeout=15)
    return _failure(_only(admin.create_partitions([NewPartitions(topic, 2)])))


# (case, call given an admin client and an existing one-partition topic, Kafka's code, Kafka's message);
# {topic} in the message is the existing topic's name.
Case = tuple[str, Callable[[AdminClient, str], KafkaError], int, str]
CASES: list[Case] = [
    ("create: unknown config",
     lambda admin, _: _create(admin, NewTopic(unique_topic("m"), 1, 1, config={"bad_option": "1"})),
     KafkaError.INVALID_CONFIG, "Unknown topic config name: bad_option"),
    ("create: value below the minimum",
     lambda admin, _: _create(admin, NewTopic(unique_topic("m"), 1, 1, config={"retention.ms": "-5"})),
     KafkaError.INVALID_CONFIG, "Invalid value -5 for configuration retention.ms: Value must be at least -1"),
    ("create: not a number",
     lambda admin, _: _create(admin, NewTopic(unique_topic("m"), 1, 1, config={"segment.bytes": "lots"})),
     KafkaError.INVALID_CONFIG, "Invalid value lots for configuration segment.bytes: Not a number of type INT"),
    ("create: not one of the allowed strings",
     lambda admin, _: _create(admin, NewTopic(unique_topic("m"), 1, 1, config={"cleanup.policy": "delete,shred"})),
     KafkaError.INVALID_CONFIG,
     "Invalid value shred for configuration cleanup.policy: String must be one of: compact, delete"),
    ("create: not a boolean",
     lambda admin, _: _create(admin, NewTopic(unique_topic("m"), 1, 1, config={"preallocate": "maybe"})),
     KafkaError.INVALID_CONFIG,
     "Invalid value maybe for configuration preallocate: Expected value to be either true or false"),
    ("create: ratio above its range",
     lambda admin, _: _create(admin, NewTopic(unique_topic("m"), 1, 1, config={"min.cleanable.dirty.ratio": "1.5"})),
     KafkaError.INVALID_CONFIG,
     "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
    ("create: min above max compaction lag",
     lambda admin, _: _create(admin, NewTopic(unique_topic("m"), 1, 1, config={
         "min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})),
     KafkaError.INVALID_CONFIG, "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"),
    ("create: topic exists",
     lambda admin, topic: _create(admin, NewTopic(topic, 1, 1)),
     KafkaError.TOPIC_ALREADY_EXISTS, "Topic '{topic}' already exists."),
    ("create: illegal name",
     lambda admin, _: _create(admin, NewTopic("no spaces!", 1, 1)),
     KafkaError.TOPIC_EXCEPTION, "Topic name is invalid: 'no spaces!' contains one or more characters other "
                                 "than ASCII alphanumerics, '.', '_' and '-'"),
    ("create: too many replicas",
     lambda admin, _: _create(admin, NewTopic(unique_topic("m"), 1, 3)),
     KafkaError.INVALID_REPLICATION_FACTOR, "Unable to replicate the partition 3 time(s): The target replication "
                                            "factor of 3 cannot be reached because only 1 broker(s) are registered."),
    ("create: too many partitions in one request",
     lambda admin, _: _create(admin, NewTopic(unique_topic("m"), 100_000, 1)),
     KafkaError.POLICY_VIOLATION, "Excessively large number of partitions per request."),
    ("create partitions: same count",
     lambda admin, topic: _failure(_only(admin.create_partitions([NewPartitions(topic, 1)]))),
     KafkaError.INVALID_PARTITIONS, "Topic already has 1 partition(s)."),
    ("create partitions: fewer",
     lambda admin, topic: _shrink(admin, f"{topic}-3"),
     KafkaError.INVALID_PARTITIONS, "The topic {topic}-3 currently has 3 partition(s); 2 would not be an increase."),
    ("create partitions: too many",
     lambda admin, topic: _failure(_only(admin.create_partitions([NewPartitions(topic, 100_000)]))),
     KafkaError.POLICY_VIOLATION, "Unable to perform excessively large batch operation."),
    ("incremental alter: unknown config",
     lambda admin, topic: _incremental(admin, topic, "bad_option", "1"),
     KafkaError.INVALID_CONFIG, "Unknown topic config name: bad_option"),
    ("incremental alter: bad value",
     lambda admin, topic: _incremental(admin, topic, "min.insync.replicas", "0"),
     KafkaError.INVALID_CONFIG, "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"),
    ("incremental alter: append to a key that is not a list",
     lambda admin, topic: _incremental(admin, topic, "retention.ms", "1000", AlterConfigOpType.APPEND),
     KafkaError.INVALID_CONFIG, "Can't APPEND to key retention.ms because its type is not LIST."),
    ("legacy alter: bad value",
     lambda admin, topic: _failure(_only(admin.alter_configs([ConfigResource(
         ConfigResource.Type.TOPIC, topic, set_config={"message.timestamp.type": "WallClock"})]))),
     KafkaError.INVALID_CONFIG, "Invalid value WallClock for configuration message.timestamp.type: String must be "
                                "one of: CreateTime, LogAppendTime"),
    ("incremental alter: broker config not a number",
     lambda admin, _: _failure(_only(admin.incremental_alter_configs([ConfigResource(
         ConfigResource.Type.BROKER, "1", incremental_configs=[
             ConfigEntry("log.retention.ms", "abc", incremental_operation=AlterConfigOpType.SET)])]))),
     KafkaError.INVALID_REQUEST, "Invalid value abc for configuration log.retention.ms: Not a number of type LONG"),
    ("incremental alter: unknown topic, unknown config (the configs are checked first)",
     lambda admin, _: _incremental(admin, "no-such-topic-here", "bad_option", "1"),
     KafkaError.INVALID_CONFIG, "Unknown topic config name: bad_option"),
    ("incremental alter: unknown topic",
     lambda admin, _: _incremental(admin, "no-such-topic-here", "retention.ms", "1000"),
     KafkaError.UNKNOWN_TOPIC_OR_PART, "The topic 'no-such-topic-here' does not exist."),
]


@pytest.mark.parametrize(("call", "code", "message"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_admin_errors_carry_kafkas_message(broker: Broker, call: Callable[[AdminClient, str], KafkaError],
                                           code: int, message: str) -> None:
    topic = unique_topic("existing")
    create_topic(broker.bootstrap_servers, topic)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    error = call(admin, topic)
    assert (error.code(), error.str()) == (code, message.format(topic=topic))


# ------------------------------------------------------------------------------------ raw requests


def _ask(broker: Broker, request: Any) -> Any:
    wire = Wire(broker)
    try:
        wire.send(encode_request(1, request))
        return decode_response(wire.receive(), request.__api_key__, request.__version__)[1]
    finally:
        wire.close()


def _create_topic_raw(broker: Broker, topic: Any) -> tuple[int, str | None]:
    from kio.schema.create_topics.v7.request import CreateTopicsRequest

    [result] = _ask(broker, CreateTopicsRequest(timeout=timedelta(seconds=5), validate_only=False,
                                                topics=(topic,))).topics
    return result.error_code, result.error_message


def test_create_topics_with_assignments_and_a_count(broker: Broker) -> None:
    from kio.schema.create_topics.v7.request import CreatableReplicaAssignment, CreatableTopic

    assignment = (CreatableReplicaAssignment(partition_index=0, broker_ids=(1,)),)
    with_factor = CreatableTopic(name=unique_topic("m"), num_partitions=-1, replication_factor=1,
                                 assignments=assignment, configs=())
    assert _create_topic_raw(broker, with_factor) == (
        42, "A manual partition assignment was specified, but replication factor was not set to -1.")
    with_count = CreatableTopic(name=unique_topic("m"), num_partitions=1, replication_factor=-1,
                                assignments=assignment, configs=())
    assert _create_topic_raw(broker, with_count) == (
        42, "A manual partition assignment was specified, but numPartitions was not set to -1.")


@pytest.mark.parametrize(("partitions", "replication", "code", "message"), [
    (0, 1, 37, "Number of partitions was set to an invalid non-positive value."),
    (1, 0, 38, "Replication factor must be larger than 0, or -1 to use the default value."),
])
def test_create_topics_with_non_positive_counts(broker: Broker, partitions: int, replication: int,
                                                code: int, message: str) -> None:
    from kio.schema.create_topics.v7.request import CreatableTopic

    topic = CreatableTopic(name=unique_topic("m"), num_partitions=partitions, replication_factor=replication,
                           assignments=(), configs=())
    assert _create_topic_raw(broker, topic) == (code, message)


def test_describe_configs_messages(broker: Broker) -> None:
    from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource

    resources = ((2, "no-such-topic-here"), (2, "bad name"), (4, "7"), (4, "seven"), (32, ""), (8, "1"))
    results = _ask(broker, DescribeConfigsRequest(include_synonyms=False, include_documentation=False, resources=tuple(
        DescribeConfigsResource(resource_type=kind, resource_name=name, configuration_keys=None)
        for kind, name in resources))).results
    assert [(r.error_code, r.error_message) for r in results] == [
        (3, None),
        (17, "Topic name is invalid: 'bad name' contains one or more characters other than ASCII alphanumerics, "
             "'.', '_' and '-'"),
        (42, "Unexpected broker id, expected 1 or empty string, but received 7"),
        (42, "Broker id must be an integer, but it is: seven"),
        (42, "Group name must not be empty"),
        (42, "Unsupported resource type: BROKER_LOGGER"),
    ]


def test_describe_acls_without_an_authorizer(broker: Broker) -> None:
    from kio.schema.describe_acls.v3.request import DescribeAclsRequest

    response = _ask(broker, DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None,
                                                pattern_type_filter=1, principal_filter=None, host_filter=None,
                                                operation=1, permission_type=1))
    assert (response.error_code, response.error_message) == (54, "No Authorizer is configured on the broker")


def test_create_acls_messages(broker_factory: Callable[..., Broker]) -> None:
    from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest

    broker = broker_factory(**{"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                               "super.users": "User:ANONYMOUS"})
    # (resource type, name, pattern type, operation, permission): TOPIC 2, CLUSTER 4, LITERAL 3, READ 3, ALLOW 3.
    creations = [(2, "", 3, 3, 3), (4, "other", 3, 3, 3), (1, "t", 3, 3, 3), (2, "t", 1, 3, 3), (2, "t", 3, 1, 3),
                 (2, "t", 3, 3, 1), (2, "t", 3, 99, 3)]
    results = _ask(broker, CreateAclsRequest(creations=tuple(
        AclCreation(resource_type=kind, resource_name=name, resource_pattern_type=pattern, principal="User:alice",
                    host="*", operation=operation, permission_type=permission)
        for kind, name, pattern, operation, permission in creations))).results
    assert [(r.error_code, r.error_message) for r in results] == [
        (42, "Invalid empty resource name"),
        (42, "The only valid name for the CLUSTER resource is kafka-cluster"),
        (42, "Invalid resourceType ANY"),
        (42, "Invalid patternType ANY"),
        (42, "Invalid operation ANY"),
        (42, "Invalid permissionType ANY"),
        (42, "Invalid operation UNKNOWN"),
    ]


def test_delete_topics_when_deletion_is_disabled_carries_no_message(
        broker_factory: Callable[..., Broker]) -> None:
    from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState

    broker = broker_factory(**{"delete.topic.enable": "false"})
    topic = unique_topic("kept")
    create_topic(broker.bootstrap_servers, topic)
    [result] = _ask(broker, DeleteTopicsRequest(topics=(DeleteTopicState(name=topic, topic_id=None),),
                                                timeout=timedelta(seconds=5))).responses
    assert (result.error_code, result.error_message) == (73, None)


def test_scram_credential_messages(broker: Broker) -> None:
    from kio.schema.alter_user_scram_credentials.v0.request import (
        AlterUserScramCredentialsRequest,
        ScramCredentialDeletion,
    )
    from kio.schema.describe_user_scram_credentials.v0.request import DescribeUserScramCredentialsRequest, UserName

    described = _ask(broker, DescribeUserScramCredentialsRequest(users=(UserName(name="twice"), UserName(name="twice"),
                                                                        UserName(name="nobody")))).results
    assert sorted((r.user, r.error_code, r.error_message) for r in described) == [
        ("nobody", 91, "Attempt to describe a user credential that does not exist: nobody"),
        ("twice", 92, "Cannot describe SCRAM credentials for the same user twice in a single request: twice"),
    ]
    altered = _ask(broker, AlterUserScramCredentialsRequest(upsertions=(), deletions=(
        ScramCredentialDeletion(name="zed", mechanism=9), ScramCredentialDeletion(name="", mechanism=1),
        ScramCredentialDeletion(name="nobody", mechanism=1)))).results
    assert sorted((r.user, r.error_code, r.error_message) for r in altered) == [
        ("", 93, "Username must not be empty"),
        ("nobody", 91, "Attempt to delete a user credential that does not exist"),
        ("zed", 33, "Unknown SCRAM mechanism"),
    ]


def test_create_partitions_with_too_few_assignments(broker: Broker) -> None:
    from kio.schema.create_partitions.v3.request import (
        CreatePartitionsAssignment,
        CreatePartitionsRequest,
        CreatePartitionsTopic,
    )

    topic = unique_topic("grow")
    create_topic(broker.bootstrap_servers, topic)
    grow = CreatePartitionsTopic(name=topic, count=3, assignments=(CreatePartitionsAssignment(broker_ids=(1,)),))
    [result] = _ask(broker, CreatePartitionsRequest(topics=(grow,), timeout=timedelta(seconds=5),
                                                    validate_only=False)).results
    assert (result.error_code, result.error_message) == (
        39, "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.")


def test_refusals_carry_kafkas_message(broker_factory: Callable[..., Broker]) -> None:
    from kio.schema.create_topics.v7.request import CreatableTopic
    from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
    from kio.schema.incremental_alter_configs.v1.request import (
        AlterableConfig,
        AlterConfigsResource,
        IncrementalAlterConfigsRequest,
    )

    # ANONYMOUS, the principal of a PLAINTEXT connection, is allowed nothing.
    broker = broker_factory(**{"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})
    topic = CreatableTopic(name=unique_topic("m"), num_partitions=1, replication_factor=1, assignments=(),
                           configs=())
    assert _create_topic_raw(broker, topic) == (29, "Authorization failed.")
    [deleted] = _ask(broker, DeleteTopicsRequest(topics=(DeleteTopicState(name="some-topic", topic_id=None),),
                                                 timeout=timedelta(seconds=5))).responses
    assert (deleted.error_code, deleted.error_message) == (29, "Topic authorization failed.")
    change = (AlterableConfig(name="retention.ms", config_operation=0, value="1000"),)
    altered = _ask(broker, IncrementalAlterConfigsRequest(validate_only=False, resources=(
        AlterConfigsResource(resource_type=2, resource_name="some-topic", configs=change),
        AlterConfigsResource(resource_type=4, resource_name="", configs=(
            AlterableConfig(name="log.retention.ms", config_operation=0, value="1000"),)),
    ))).responses
    assert sorted((r.resource_type, r.error_code, r.error_message) for r in altered) == [
        (2, 29, "Topic authorization failed."), (4, 31, "Cluster authorization failed.")]


def test_consumer_group_describe_of_a_classic_group(broker: Broker) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest

    topic, group = unique_topic("described"), unique_topic("classic")
    create_topic(broker.bootstrap_servers, topic)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "group.protocol": "classic"})
    consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    consumer.close()
    [described] = _ask(broker, ConsumerGroupDescribeRequest(group_ids=(group,),
                                                            include_authorized_operations=False)).groups
    assert (described.error_code, described.error_message) == (69, f"Group {group} is not a consumer group")


def test_find_coordinator_messages(broker_factory: Callable[..., Broker]) -> None:
    from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest as FindV3
    from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest as FindV4

    broker = broker_factory()
    unknown_type = _ask(broker, FindV3(key="g", key_type=7))
    assert (unknown_type.error_code, unknown_type.error_message) == (
        42, "This most likely occurs because of a request being malformed by the client library or the message "
            "was sent to an incompatible broker. See the broker logs for more details.")
    [share] = _ask(broker, FindV4(key_type=2, coordinator_keys=("g",))).coordinators
    assert (share.error_code, share.error_message) == (42, None)
    secured = broker_factory(**{"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})
    denied = _ask(secured, FindV3(key="g", key_type=0))
    assert (denied.error_code, denied.error_message) == (30, "Group authorization failed.")
    [denied_v4] = _ask(secured, FindV4(key_type=0, coordinator_keys=("g",))).coordinators
    assert (denied_v4.error_code, denied_v4.error_message) == (30, None)


@pytest.mark.parametrize(("replicas", "message"), [
    ([(0, (1,)), (0, (1,))], "Found multiple manual partition assignments for partition 0"),
    ([(0, ())], "The manual partition assignment includes an empty replica list."),
    ([(0, (5,))], "The manual partition assignment includes broker 5, but no such broker is registered."),
    ([(0, (1, 1))], "The manual partition assignment includes the broker 1 more than once."),
    ([(0, (1,)), (2, (1,))], "partitions should be a consecutive 0-based integer sequence"),
], ids=["partition twice", "empty", "unknown broker", "broker twice", "gap"])
def test_create_topics_with_bad_assignments(broker: Broker, replicas: list[tuple[int, tuple[int, ...]]],
                                            message: str) -> None:
    from kio.schema.create_topics.v7.request import CreatableReplicaAssignment, CreatableTopic

    assignments = tuple(CreatableReplicaAssignment(partition_index=index, broker_ids=ids) for index, ids in replicas)
    topic = CreatableTopic(name=unique_topic("m"), num_partitions=-1, replication_factor=-1, assignments=assignments,
                           configs=())
    assert _create_topic_raw(broker, topic) == (39, message)


def test_create_topics_and_partitions_with_a_name_twice(broker: Broker) -> None:
    from kio.schema.create_partitions.v3.request import CreatePartitionsRequest, CreatePartitionsTopic
    from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest

    twice = unique_topic("twice")
    copies = tuple(CreatableTopic(name=name, num_partitions=1, replication_factor=1, assignments=(), configs=())
                   for name in (twice, twice, "__cluster_metadata"))
    created = _ask(broker, CreateTopicsRequest(timeout=timedelta(seconds=5), validate_only=False, topics=copies)).topics
    assert [(t.name, t.error_code, t.error_message) for t in created] == [
        (twice, 42, "Duplicate topic name."),
        ("__cluster_metadata", 42, "Creation of internal topic __cluster_metadata is prohibited.")]
    existing = unique_topic("grown")
    create_topic(broker.bootstrap_servers, existing)
    grown = _ask(broker, CreatePartitionsRequest(timeout=timedelta(seconds=5), validate_only=False, topics=tuple(
        CreatePartitionsTopic(name=existing, count=count, assignments=None) for count in (2, 3)))).results
    assert [(r.name, r.error_code, r.error_message) for r in grown] == [(existing, 42, "Duplicate topic name.")]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    listed = admin.list_topics(timeout=10).topics
    assert twice not in listed and len(listed[existing].partitions) == 1, "neither copy was acted on"


def test_describe_producers_messages(broker_factory: Callable[..., Broker]) -> None:
    from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest

    broker = broker_factory()
    topic = unique_topic("producers")
    create_topic(broker.bootstrap_servers, topic)
    request = DescribeProducersRequest(topics=(TopicRequest(name=topic, partition_indexes=(0, 5)),
                                               TopicRequest(name="no-such-topic-here", partition_indexes=(0,)),
                                               TopicRequest(name="bad name", partition_indexes=(0,))))
    answered = [(p.error_code, p.error_message) for t in _ask(broker, request).topics for p in t.partitions]
    assert answered == [
        (0, None), (3, None), (3, "This server does not host this topic-partition."),
        (17, "Topic name is invalid: 'bad name' contains one or more characters other than ASCII alphanumerics, "
             "'.', '_' and '-'")]
    secured = broker_factory(**{"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})
    [[denied]] = [t.partitions for t in _ask(secured, DescribeProducersRequest(topics=(
        TopicRequest(name="some-topic", partition_indexes=(0,)),))).topics]
    assert (denied.error_code, denied.error_message) == (29, "Topic authorization failed.")


def test_alter_configs_of_an_empty_or_illegal_resource_name(broker: Broker) -> None:
    from kio.schema.incremental_alter_configs.v1.request import (
        AlterableConfig,
        AlterConfigsResource,
        IncrementalAlterConfigsRequest,
    )

    change = (AlterableConfig(name="retention.ms", config_operation=0, value="1000"),)
    resources = tuple(AlterConfigsResource(resource_type=2, resource_name=name, configs=change)
                      for name in ("", "bad name"))
    group = (AlterConfigsResource(resource_type=32, resource_name="", configs=(
        AlterableConfig(name="consumer.session.timeout.ms", config_operation=0, value="45000"),)),)
    altered = _ask(broker, IncrementalAlterConfigsRequest(validate_only=False, resources=resources + group)).responses
    assert [(r.resource_name, r.error_code, r.error_message) for r in altered] == [
        ("", 42, "Default topic resources are not allowed."),
        ("bad name", 17, "Topic name is invalid: 'bad name' contains one or more characters other than ASCII "
                         "alphanumerics, '.', '_' and '-'"),
        ("", 42, "Default group resources are not allowed.")]


def test_consumer_group_heartbeat_with_an_invalid_epoch(broker: Broker) -> None:
    from kio.schema.consumer_group_heartbeat.v0.request import ConsumerGroupHeartbeatRequest

    response = _ask(broker, ConsumerGroupHeartbeatRequest(
        group_id=unique_topic("g"), member_id="m1", member_epoch=-3, instance_id=None, rack_id=None,
        rebalance_timeout=timedelta(milliseconds=-1), subscribed_topic_names=None, server_assignor=None,
        topic_partitions=None))
    assert (response.error_code, response.error_message) == (42, "MemberEpoch is invalid.")
