"""DescribeTopicPartitions (KIP-966): v0.

Behavior (Kafka 4.1's DescribeTopicPartitionsRequestHandler and KRaftMetadataCache):
- Topics named, or every topic when the list is empty, answered in name order, each with its id,
  partitions (leader, epoch, replicas, ISR, empty eligible leader replicas) and, as a broker without
  an authorizer, every topic operation as authorized operations.
- Paging: at most min(response_partition_limit, 2000) partitions per response (Kafka's
  max.request.partition.size.limit default). A topic cut by the limit is answered up to it and
  `next_cursor` names its next partition; when the limit is reached exactly at a topic boundary the
  cursor names the next topic at partition 0. A request with a cursor starts at that topic (topics
  before it in name order are skipped) and at the cursor's partition of it; a named topic list must
  contain the cursor's topic, else the request fails with INVALID_REQUEST.
- A named topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an
  illegal name) with the zero id; in an all-topics request nothing is unknown.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.authorization import TOPIC_OPERATIONS
from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.handlers._shared.topics import topic_entry
from minikafka.broker.wire.context import RequestContext
from minikafka.coordinator.internal_topics import INTERNAL_TOPICS
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import ZERO_UUID, build, nested
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.manager import validate_topic_name

API_KEY = ApiKey.DESCRIBE_TOPIC_PARTITIONS
VERSIONS = VersionRange(0, 0)

# Kafka's max.request.partition.size.limit default: the most partitions one response carries.
MAX_PARTITIONS_PER_RESPONSE = 2000


def _requested_names(ctx: RequestContext, request: Any) -> list[str]:
    """The topics to answer, in name order, from the cursor's topic on."""
    start = request.cursor.topic_name if request.cursor is not None else ""
    if not request.topics:
        return sorted(meta.name for meta in ctx.services.logs.topics() if meta.name >= start)
    names = {topic.name for topic in request.topics if topic.name >= start}
    if request.cursor is not None and request.cursor.topic_name not in names:
        raise KafkaError(f"the topic list must contain the cursor topic {request.cursor.topic_name!r}",
                         code=ErrorCode.invalid_request)
    return sorted(names)


def _unknown(name: str) -> dict[str, Any]:
    try:
        validate_topic_name(name)
        code = ErrorCode.unknown_topic_or_partition
    except KafkaError:
        code = ErrorCode.invalid_topic_exception
    return {"error_code": code, "name": name, "topic_id": ZERO_UUID, "is_internal": name in INTERNAL_TOPICS,
            "partitions": ()}


async def handle(ctx: RequestContext, request: Any) -> Any:
    all_topics = not request.topics
    remaining = min(MAX_PARTITIONS_PER_RESPONSE, request.response_partition_limit)
    response_cls = response_of(request)
    topic_cls = nested(response_cls, "topics")
    topics: list[Any] = []
    next_cursor = None
    for name in _requested_names(ctx, request):
        if remaining <= 0:
            # Every partition of the topics before this one fitted: continue from its first partition.
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        meta = ctx.services.logs.topic(name)
        if meta is None:
            if not all_topics:
                topics.append(_unknown(name))
            continue
        first = request.cursor.partition_index if request.cursor is not None and request.cursor.topic_name == name \
            else 0
        upper = min(meta.partitions, first + remaining)
        topics.append(topic_entry(ctx, meta, topic_cls, range(first, upper), TOPIC_OPERATIONS))
        if upper < meta.partitions:
            next_cursor = {"topic_name": name, "partition_index": upper}
            break
        remaining -= max(upper - first, 0)
    return build(response_cls, throttle_time=0, topics=topics, next_cursor=next_cursor)
