"""ShareGroupDescribe: v1 (KIP-932, Kafka 4.2).

Behavior (Kafka 4.2's GroupMetadataManager.shareGroupDescribe): each share group's state (Empty,
Stable), group epoch, assignment epoch, assignor ("simple") and members with their epoch, client id
and host, rack, subscribed topics and assignment (topics by id and name). An unknown group is
GROUP_ID_NOT_FOUND "Group X not found."; a classic or consumer group GROUP_ID_NOT_FOUND "Group X is
not a share group."; NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS as the other group APIs.
authorized_operations: every group operation when asked (no authorizer).
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.authorization import GROUP_OPERATIONS, operations_if
from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.handlers._shared.group import other_group_type, ownership_error
from minikafka.broker.wire.context import RequestContext
from minikafka.coordinator.share.group import ShareGroup
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.SHARE_GROUP_DESCRIBE
VERSIONS = VersionRange(1, 1)
ASSIGNOR_NAME = "simple"


def _error(group_id: str, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"group_id": group_id, "error_code": code, "error_message": message, "group_state": "",
            "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": []}


def _describe(ctx: RequestContext, group: ShareGroup, include_operations: bool) -> dict[str, Any]:
    shares = ctx.services.shares
    members = [{
        "member_id": m.member_id, "rack_id": m.rack_id, "member_epoch": m.member_epoch, "client_id": m.client_id,
        "client_host": m.client_host, "subscribed_topic_names": sorted(m.subscribed_topic_names),
        "assignment": {"topic_partitions": [
            {"topic_id": shares.topic_id(topic), "topic_name": topic, "partitions": sorted(parts)}
            for topic, parts in sorted(m.assigned.items())]},
    } for m in group.members.values()]
    return {"group_id": group.group_id, "error_code": ErrorCode.none, "group_state": group.state,
            "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
            "assignor_name": ASSIGNOR_NAME, "members": members,
            "authorized_operations": operations_if(include_operations, GROUP_OPERATIONS)}


async def handle(ctx: RequestContext, request: Any) -> Any:
    shares = ctx.services.shares
    described = []
    for group_id in request.group_ids:
        error = ownership_error(ctx, group_id)
        if error is None and not shares.loaded:
            error = ErrorCode.coordinator_load_in_progress
        group = shares.group(group_id)
        if error is not None:
            described.append(_error(group_id, error, None))
        elif group is not None:
            described.append(_describe(ctx, group, request.include_authorized_operations))
        elif other_group_type(ctx, group_id):
            described.append(_error(group_id, ErrorCode.group_id_not_found, f"Group {group_id} is not a share group."))
        else:
            described.append(_error(group_id, ErrorCode.group_id_not_found, f"Group {group_id} not found."))
    return build(response_of(request), throttle_time=0, groups=described)
