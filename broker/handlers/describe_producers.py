"""DescribeProducers (KIP-664): v0.

Behavior: for each requested partition led by this node, the producers with state there: id,
epoch, last sequence, last batch timestamp, coordinator epoch and the first offset of the open
transaction (-1 when none). An illegal topic name is INVALID_TOPIC_EXCEPTION and an unknown topic
UNKNOWN_TOPIC_OR_PARTITION, with Kafka's texts; an unknown partition of a known topic is
UNKNOWN_TOPIC_OR_PARTITION and a partition led by another node NOT_LEADER_OR_FOLLOWER, both without a
message, as Kafka's ReplicaManager answers them.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import partition_log, response_of
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_fields
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.errors import UnknownTopicOrPartition
from minikafka.storage.manager import validate_topic_name

API_KEY = ApiKey.DESCRIBE_PRODUCERS
VERSIONS = VersionRange(0, 0)


def _check_topic(ctx: RequestContext, topic: str) -> None:
    """Kafka's topic-wide checks, with ApiError's texts; a partition's own errors carry none."""
    validate_topic_name(topic)
    if ctx.services.logs.topic(topic) is None:
        raise UnknownTopicOrPartition("This server does not host this topic-partition.")


def _producers(ctx: RequestContext, topic: str, partition: int) -> list[dict[str, Any]]:
    if ctx.services.logs.partition(topic, partition) is None:
        raise UnknownTopicOrPartition()
    if ctx.services.cluster.leader_of(topic, partition) != ctx.node.node_id:
        raise KafkaError(code=ErrorCode.not_leader_or_follower)
    log = partition_log(ctx, topic, partition)
    return [
        {
            "producer_id": entry.producer_id,
            "producer_epoch": entry.epoch,
            "last_sequence": entry.last_seq,
            "last_timestamp": entry.last_timestamp,
            "coordinator_epoch": entry.coordinator_epoch,
            "current_txn_start_offset": entry.current_txn_first_offset,
        }
        for entry in log.producer_state.entries.values()
    ]


async def handle(ctx: RequestContext, request: Any) -> Any:
    topics = []
    for topic in request.topics:
        partitions = []
        for index in topic.partition_indexes:
            entry: dict[str, Any] = {"partition_index": index, "error_code": ErrorCode.none, "error_message": None}
            try:
                _check_topic(ctx, topic.name)
                entry["active_producers"] = _producers(ctx, topic.name, index)
            except Exception as exc:
                entry.update(error_fields(ctx, exc, topic=topic.name, partition=index))
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return build(response_of(request), throttle_time=0, topics=topics)
