"""AlterPartitionReassignments: v0-1.

Behavior: moves replicas in the `--nodes N` cluster view (broker/wire/cluster.py) as Kafka's controller
does (ReplicationControlManager.alterPartitionReassignment, PartitionReassignmentReplicas): the
replica list becomes the target followed by the replicas being removed, with adding/removing set,
and the move completes once every target replica is in the ISR. Replicas here share one copy of the
data, so a move to online nodes completes within the request; a target node that is stopped keeps the
reassignment under way (ListPartitionReassignments shows it) until it starts. On completion a leader
that was removed hands over to the first in-sync target replica, and a replica list that lost members
bumps the leader epoch even when the leader stays; Metadata shows the new replicas, ISR and epoch.
Null replicas cancel a reassignment under way (NO_REASSIGNMENT_IN_PROGRESS if none). An empty list, an
unknown node or a node named twice is INVALID_REPLICA_ASSIGNMENT; an unknown topic or partition
UNKNOWN_TOPIC_OR_PARTITION; with allow_replication_factor_change false (v1, KIP-860) a target of
another size is INVALID_REPLICATION_FACTOR, and the answer echoes the flag. Assignments that differ
from the default survive a restart (`partition-assignments.json` in the data directory).
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_fields
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.errors import UnknownTopicOrPartition

API_KEY = ApiKey.ALTER_PARTITION_REASSIGNMENTS
VERSIONS = VersionRange(0, 1)


async def handle(ctx: RequestContext, request: Any) -> Any:
    allow_change = bool(getattr(request, "allow_replication_factor_change", True))
    responses = [{"name": topic.name, "partitions": [_alter(ctx, topic.name, partition, allow_change)
                                                     for partition in topic.partitions]}
                 for topic in request.topics]
    return build(response_of(request), throttle_time=0, allow_replication_factor_change=allow_change,
                 error_code=ErrorCode.none, error_message=None, responses=responses)


def _alter(ctx: RequestContext, topic: str, target: Any, allow_change: bool) -> dict[str, Any]:
    index = target.partition_index
    try:
        _check_exists(ctx, topic, index)
        cluster = ctx.services.cluster
        if target.replicas is None:
            state = cluster.cancel_reassignment(topic, index)
        else:
            state = cluster.reassign(topic, index, [int(r) for r in target.replicas], allow_change)
        ctx.log.info("partition reassignment", topic=topic, partition=index, cancel=target.replicas is None,
                     replicas=list(state.replicas), adding=list(state.adding), removing=list(state.removing),
                     leader=state.leader, leader_epoch=state.leader_epoch)
    except KafkaError as exc:
        return {"partition_index": index, **error_fields(ctx, exc, topic=topic, partition=index)}
    return {"partition_index": index, "error_code": ErrorCode.none, "error_message": None}


def _check_exists(ctx: RequestContext, topic: str, partition: int) -> None:
    meta = ctx.services.logs.topic(topic)
    if meta is None:
        raise UnknownTopicOrPartition(f"Unable to find a topic named {topic}.")
    if not 0 <= partition < meta.partitions:
        raise UnknownTopicOrPartition(f"Unable to find partition {topic}:{partition}.")
