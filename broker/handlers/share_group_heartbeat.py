"""ShareGroupHeartbeat: v1 (KIP-932, Kafka 4.2).

Behavior (Kafka 4.2's GroupMetadataManager.shareGroupHeartbeat, see coordinator/share/group.py): a
member joins with epoch 0 and its subscribed topic names, heartbeats with its epoch, leaves with -1.
The answer carries the member epoch, the heartbeat interval (`share.heartbeat.interval.ms` of the
group, else `group.share.heartbeat.interval.ms`) and, on joining or when it changed, the assignment by
topic id. Errors: INVALID_REQUEST (Kafka's messages; a member id that is empty or longer than 36
characters without one, as KafkaApis.isMemberIdValid), UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
GROUP_MAX_SIZE_REACHED (`group.share.max.size`), NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, and
GROUP_ID_NOT_FOUND: "Group X is not a share group." for a classic or consumer group, "Share group X not
found." for a heartbeat (not a join) to no group, "Group X not found." for a leave.
Version notes: v0 was Kafka 4.0's early-access version, which 4.2 no longer serves.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.handlers._shared.group import client_host, coordinator, other_group_type, ownership_error
from minikafka.broker.wire.context import RequestContext
from minikafka.coordinator.share.group import ShareHeartbeat
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.SHARE_GROUP_HEARTBEAT
VERSIONS = VersionRange(1, 1)
MAX_MEMBER_ID_LENGTH = 36


def _refusal(ctx: RequestContext, group_id: str, member_id: str) -> tuple[ErrorCode, str | None] | None:
    if _member_id_invalid(member_id):
        return ErrorCode.invalid_request, None
    error = ownership_error(ctx, group_id)
    if error is not None:
        return error, None
    if not coordinator(ctx).loaded or not ctx.services.shares.loaded:
        return ErrorCode.coordinator_load_in_progress, None
    if other_group_type(ctx, group_id):
        return ErrorCode.group_id_not_found, f"Group {group_id} is not a share group."
    return None


def _member_id_invalid(member_id: str) -> bool:
    """KafkaApis.isMemberIdValid: the client makes a UUID (22 characters in base64, 36 at most)."""
    return not member_id or len(member_id) > MAX_MEMBER_ID_LENGTH


async def handle(ctx: RequestContext, request: Any) -> Any:
    refused = _refusal(ctx, request.group_id, request.member_id)
    if refused is not None:
        return build(response_of(request), throttle_time=0, error_code=refused[0], error_message=refused[1],
                     member_epoch=-1, heartbeat_interval=0)
    names = request.subscribed_topic_names
    shares = ctx.services.shares
    result = shares.heartbeat(ShareHeartbeat(
        group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        rack_id=request.rack_id, subscribed_topic_names=None if names is None else tuple(names),
        client_id=ctx.client_id or "", client_host=client_host(ctx)))
    if result.error != ErrorCode.none:
        ctx.log.info("share group heartbeat refused", group_id=request.group_id, member_id=request.member_id,
                     error=result.error.name)
    assignment = None
    if result.assignment is not None:
        assignment = {"topic_partitions": [
            {"topic_id": topic_id, "partitions": sorted(parts)}
            for topic, parts in sorted(result.assignment.items())
            if (topic_id := shares.topic_id(topic)) is not None]}
    return build(response_of(request), throttle_time=0, error_code=result.error,
                 error_message=result.error_message, member_id=result.member_id,
                 member_epoch=result.member_epoch, heartbeat_interval=result.heartbeat_interval_ms,
                 assignment=assignment)
