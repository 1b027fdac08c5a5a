"""ConsumerGroupHeartbeat: v0-1 (KIP-848).

Behavior (Kafka 4.1's GroupMetadataManager.consumerGroupHeartbeat, see coordinator/group/consumer.py):
join with member epoch 0, heartbeat with the current epoch, leave with -1 (-2 for a static member);
the answer carries the member epoch, the heartbeat interval (`group.consumer.heartbeat.interval.ms`)
and, when it changed or the member's view differs, the assignment by topic id. Errors:
INVALID_REQUEST (with Kafka's message), UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, GROUP_ID_NOT_FOUND
(a non-empty classic group that may not be upgraded: group.consumer.migration.policy, protocol type;
otherwise the classic group becomes a consumer group, coordinator/group/migration.py),
NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS; a share group's id is GROUP_ID_NOT_FOUND "Group X is not
a consumer group.".
Version notes: v1 (Kafka 4.0, KIP-1082) makes the client generate the member id; v0 let the
coordinator generate it, and a v0 join without one gets a fresh id here too.
"""

from __future__ import annotations

import uuid
from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.handlers._shared.group import client_host, coordinator, ownership_error
from minikafka.broker.wire.context import RequestContext
from minikafka.coordinator.group.consumer import Assignment, HeartbeatRequest
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build, ms
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.CONSUMER_GROUP_HEARTBEAT
VERSIONS = VersionRange(0, 1)


def _owned(ctx: RequestContext, topics: Any) -> Assignment | None:
    """The owned partitions by topic name; partitions of topic ids we do not know are dropped, as
    the member cannot own them (the topic is gone)."""
    if topics is None:
        return None
    groups = coordinator(ctx)
    out: dict[str, frozenset[int]] = {}
    for topic in topics:
        name = groups.topic_name(topic.topic_id)
        if name is not None and topic.partitions:
            out[name] = out.get(name, frozenset()) | frozenset(int(p) for p in topic.partitions)
    return out


async def handle(ctx: RequestContext, request: Any) -> Any:
    error = ownership_error(ctx, request.group_id)
    if error is None and not coordinator(ctx).loaded:
        error = ErrorCode.coordinator_load_in_progress
    if error is not None:
        return build(response_of(request), throttle_time=0, error_code=error, member_epoch=-1,
                     heartbeat_interval=0)
    if ctx.services.is_share_group(request.group_id):
        return build(response_of(request), throttle_time=0, error_code=ErrorCode.group_id_not_found,
                     error_message=f"Group {request.group_id} is not a consumer group.", member_epoch=-1,
                     heartbeat_interval=0)
    member_id = request.member_id
    if request.__version__ == 0 and not member_id and request.member_epoch == 0:
        member_id = str(uuid.uuid4())
    names = request.subscribed_topic_names
    result = coordinator(ctx).consumer_group_heartbeat(HeartbeatRequest(
        group_id=request.group_id,
        member_id=member_id,
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=ms(request.rebalance_timeout),
        subscribed_topic_names=None if names is None else tuple(names),
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor,
        owned=_owned(ctx, request.topic_partitions),
        client_id=ctx.client_id or "",
        client_host=client_host(ctx),
    ))
    assignment = None
    if result.assignment is not None:
        groups = coordinator(ctx)
        assignment = {"topic_partitions": [
            {"topic_id": groups.topic_id(topic), "partitions": sorted(parts)}
            for topic, parts in sorted(result.assignment.items()) if groups.topic_id(topic) is not None
        ]}
    return build(response_of(request), throttle_time=0, error_code=result.error,
                 error_message=result.error_message, member_id=result.member_id,
                 member_epoch=result.member_epoch, heartbeat_interval=result.heartbeat_interval_ms,
                 assignment=assignment)
