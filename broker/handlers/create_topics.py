"""CreateTopics: v2-7.

Behavior:
- num_partitions -1 means num.partitions; replication_factor -1 means 1. Manual assignments give the
  partition count; they are checked as Kafka's controller does (INVALID_REPLICA_ASSIGNMENT: a partition
  named twice, an empty list, a node not in the cluster or named twice, replica counts that differ,
  only offline nodes, indexes that are not 0..n-1), though replicas are then placed as without them.
- A replication factor above the number of nodes is INVALID_REPLICATION_FACTOR; an existing topic
  TOPIC_ALREADY_EXISTS; an illegal name INVALID_TOPIC_EXCEPTION; a bad config INVALID_CONFIG, as is a
  config with a null value. The checks run in Kafka's order (name, existence, configs, counts) and every
  message is Kafka's ("Topic 'orders' already exists.", "Unknown topic config name: x", ...).
- A name given twice is answered once, INVALID_REQUEST ("Duplicate topic name."), and not created;
  __cluster_metadata is INVALID_REQUEST ("Creation of internal topic __cluster_metadata is prohibited.").
- validate_only checks everything and creates nothing.
- More than max.partitions.per.request partitions in one request (10,000, Kafka's
  MAX_PARTITIONS_PER_BATCH) is POLICY_VIOLATION for every topic of it, checked before anything is made.
- v5+ responses carry the topic's id, partition count, replication factor and configs.
- The partitions count against the client's controller_mutation_rate (broker/wire/quotas.py): from v6 a
  topic past the quota is THROTTLING_QUOTA_EXCEEDED, below v6 it is created and the response throttled.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_fields
from minikafka.broker.wire.quotas import take_mutations
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import ZERO_UUID, build
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.errors import InvalidPartitions, InvalidReplicationFactor

API_KEY = ApiKey.CREATE_TOPICS
VERSIONS = VersionRange(2, 7)
# KRaft's metadata log, which Kafka refuses to create as a topic.
CLUSTER_METADATA_TOPIC = "__cluster_metadata"


def _invalid_assignment(message: str) -> KafkaError:
    return KafkaError(message, code=ErrorCode.invalid_replica_assignment)


def _check_assignments(cluster: Any, assignments: Any) -> None:
    """Kafka's checks of manual assignments (ReplicationControlManager.createTopic and
    validateManualPartitionAssignment), in its order and with its messages."""
    registered = {node.node_id for node in cluster.nodes}
    seen: set[int] = set()
    replication: int | None = None
    for assignment in assignments:
        if assignment.partition_index in seen:
            raise _invalid_assignment(
                f"Found multiple manual partition assignments for partition {assignment.partition_index}")
        seen.add(assignment.partition_index)
        replicas = sorted(assignment.broker_ids)
        if not replicas:
            raise _invalid_assignment("The manual partition assignment includes an empty replica list.")
        previous = None
        for broker_id in replicas:
            if broker_id not in registered:
                raise _invalid_assignment(f"The manual partition assignment includes broker {broker_id}, but no "
                                          "such broker is registered.")
            if broker_id == previous:
                raise _invalid_assignment(f"The manual partition assignment includes the broker {broker_id} more "
                                          "than once.")
            previous = broker_id
        if replication is not None and len(replicas) != replication:
            raise _invalid_assignment(f"The manual partition assignment includes a partition with {len(replicas)} "
                                      "replica(s), but this is not consistent with previous partitions, which have "
                                      f"{replication} replica(s).")
        replication = len(replicas)
        if not any(cluster.is_online(broker_id) for broker_id in replicas):
            raise _invalid_assignment(f"All brokers specified in the manual partition assignment for partition "
                                      f"{assignment.partition_index} are fenced or in controlled shutdown.")
    if seen != set(range(len(seen))):
        raise _invalid_assignment("partitions should be a consecutive 0-based integer sequence")


async def _create(ctx: RequestContext, topic: Any, validate_only: bool) -> dict[str, Any]:
    services = ctx.services
    # Kafka counts the brokers that are up (unfenced) when it places replicas.
    node_count = len(services.cluster.online_ids)
    services.logs.check_new_topic(topic.name, {config.name: config.value for config in topic.configs})
    partitions = topic.num_partitions
    replication = topic.replication_factor
    if topic.assignments:
        # Kafka's ReplicationControlManager.createTopic: its checks and messages, in its order.
        if replication != -1:
            raise KafkaError("A manual partition assignment was specified, but replication factor was not set "
                             "to -1.", code=ErrorCode.invalid_request)
        if partitions != -1:
            raise KafkaError("A manual partition assignment was specified, but numPartitions was not set to -1.",
                             code=ErrorCode.invalid_request)
        _check_assignments(services.cluster, topic.assignments)
        partitions = len(topic.assignments)
        replication = len(topic.assignments[0].broker_ids)
    elif replication < -1 or replication == 0:
        raise InvalidReplicationFactor("Replication factor must be larger than 0, or -1 to use the default value.")
    elif partitions < -1 or partitions == 0:
        raise InvalidPartitions("Number of partitions was set to an invalid non-positive value.")
    if partitions == -1:
        partitions = services.config.num_partitions
    if replication == -1:
        replication = 1
    if replication < 1 or replication > node_count:
        # Kafka's StripedReplicaPlacer, as the controller words it.
        raise InvalidReplicationFactor(
            f"Unable to replicate the partition {replication} time(s): The target replication factor of "
            f"{replication} cannot be reached because only {node_count} broker(s) are registered.")
    configs = {c.name: c.value for c in topic.configs if c.value is not None}
    take_mutations(ctx, partitions)  # after every check, as Kafka's controller applies the quota
    # Sliced: thousands of partitions are made while other connections keep being answered.
    meta = await services.logs.create_topic_async(topic.name, partitions, configs, validate_only=validate_only)
    if not validate_only:
        services.cluster.set_replication_factor(topic.name, replication)
    ctx.log.info("created topic" if not validate_only else "validated topic", topic=topic.name, partitions=partitions)
    return {
        "topic_id": meta.topic_id if not validate_only else ZERO_UUID,
        "num_partitions": partitions,
        "replication_factor": replication,
        # As DescribeConfigs reports them: the dynamic broker defaults count (broker/config/dynamic_config.py).
        "configs": services.dynamic_configs.topic_entries(dict(meta.configs), None, include_synonyms=False),
    }


def _requested_partitions(ctx: RequestContext, topics: Any) -> int:
    """Partitions the request would create, counted as Kafka's validateTotalNumberOfPartitions does."""
    total = 0
    for topic in topics:
        if topic.assignments:
            total += len(topic.assignments)
        elif topic.num_partitions == -1:
            total += ctx.services.config.num_partitions
        elif topic.num_partitions > 0:
            total += topic.num_partitions
    return total


async def handle(ctx: RequestContext, request: Any) -> Any:
    results = []
    # As Kafka's ControllerApis.createTopics: a name given twice is answered once, and neither copy is made.
    counts = Counter(topic.name for topic in request.topics)
    unique = [topic for topic in request.topics if counts[topic.name] == 1]
    # Checked before anything is created or allocated per partition: one request asking for 2**31-1
    # partitions must not take the machine's memory and disk. Kafka fails the whole request.
    cap = ctx.services.config.max_partitions_per_request
    requested = _requested_partitions(ctx, unique)
    too_many = KafkaError("Excessively large number of partitions per request.", code=ErrorCode.policy_violation)
    answered: set[str] = set()
    for topic in request.topics:
        if topic.name in answered:
            continue
        answered.add(topic.name)
        entry: dict[str, Any] = {"name": topic.name, "error_code": ErrorCode.none, "error_message": None}
        try:
            if counts[topic.name] > 1:
                raise KafkaError("Duplicate topic name.", code=ErrorCode.invalid_request)
            if topic.name == CLUSTER_METADATA_TOPIC:
                raise KafkaError(f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited.",
                                 code=ErrorCode.invalid_request)
            if requested > cap:
                raise too_many
            entry.update(await _create(ctx, topic, request.validate_only))
        except Exception as exc:
            entry.update(error_fields(ctx, exc, topic=topic.name))
        results.append(entry)
    return build(response_of(request), throttle_time=0, topics=results)
