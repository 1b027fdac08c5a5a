"""CreatePartitions: v0-3.

Behavior:
- Raises a topic's partition count to `count`; a count not above the current one is
  INVALID_PARTITIONS, an unknown topic UNKNOWN_TOPIC_OR_PARTITION. Assignments, when given, must
  list one entry per new partition (INVALID_REPLICA_ASSIGNMENT otherwise). validate_only changes nothing.
  Messages are Kafka's (ReplicationControlManager.createPartitions).
- A name given twice is answered once, INVALID_REQUEST ("Duplicate topic name."), and not grown.
- More than max.partitions.per.request new partitions in one request is POLICY_VIOLATION for every
  topic of it (Kafka's controller bounds the records of one operation at 10,000).
- The new partitions count against the client's controller_mutation_rate: from v3 a topic past the quota
  is THROTTLING_QUOTA_EXCEEDED, below v3 it grows and the response is throttled.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_fields
from minikafka.broker.wire.quotas import take_mutations
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.errors import InvalidPartitions, UnknownTopicOrPartition

API_KEY = ApiKey.CREATE_PARTITIONS
VERSIONS = VersionRange(0, 3)


async def _grow(ctx: RequestContext, topic: Any, validate_only: bool) -> None:
    logs = ctx.services.logs
    meta = logs.topic(topic.name)
    # Kafka's ReplicationControlManager.createPartitions: its checks and messages, in its order (an
    # unknown topic carries no message there).
    if meta is None:
        raise UnknownTopicOrPartition()
    if topic.count == meta.partitions:
        raise InvalidPartitions(f"Topic already has {meta.partitions} partition(s).")
    if topic.count < meta.partitions:
        raise InvalidPartitions(f"The topic {topic.name} currently has {meta.partitions} partition(s); "
                                f"{topic.count} would not be an increase.")
    additional = topic.count - meta.partitions
    if topic.assignments is not None and len(topic.assignments) != additional:
        raise KafkaError(f"Attempted to add {additional} additional partition(s), but only "
                         f"{len(topic.assignments)} assignment(s) were specified.",
                         code=ErrorCode.invalid_replica_assignment)
    take_mutations(ctx, additional)
    # Sliced: thousands of partitions are made while other connections keep being answered.
    await logs.create_partitions_async(topic.name, topic.count, validate_only=validate_only)
    if not validate_only:
        ctx.log.info("created partitions", topic=topic.name, count=topic.count)


def _new_partitions(ctx: RequestContext, topics: Any) -> int:
    total = 0
    for topic in topics:
        meta = ctx.services.logs.topic(topic.name)
        if meta is not None and topic.count > meta.partitions:
            total += topic.count - meta.partitions
    return total


async def handle(ctx: RequestContext, request: Any) -> Any:
    results = []
    # As Kafka's ControllerApis.createPartitions: a name given twice is answered once, and neither copy is grown.
    counts = Counter(topic.name for topic in request.topics)
    # As CreateTopics: bounded before any partition is made; Kafka's controller fails the whole request.
    cap = ctx.services.config.max_partitions_per_request
    requested = _new_partitions(ctx, [topic for topic in request.topics if counts[topic.name] == 1])
    too_many = KafkaError("Unable to perform excessively large batch operation.", code=ErrorCode.policy_violation)
    answered: set[str] = set()
    for topic in request.topics:
        if topic.name in answered:
            continue
        answered.add(topic.name)
        entry: dict[str, Any] = {"name": topic.name, "error_code": ErrorCode.none, "error_message": None}
        try:
            if counts[topic.name] > 1:
                raise KafkaError("Duplicate topic name.", code=ErrorCode.invalid_request)
            if requested > cap:
                raise too_many
            await _grow(ctx, topic, request.validate_only)
        except Exception as exc:
            entry.update(error_fields(ctx, exc, topic=topic.name))
        results.append(entry)
    return build(response_of(request), throttle_time=0, results=results)
