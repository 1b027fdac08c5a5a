"""ConsumerGroupDescribe: v0-1 (KIP-848).

Behavior (Kafka 4.1's GroupMetadataManager.consumerGroupDescribe): per group its state (Empty,
Assigning, Reconciling, Stable), group epoch, assignment epoch, assignor, and each member's epoch,
subscription, current assignment and target assignment (topics by id and name). An unknown group is
GROUP_ID_NOT_FOUND "Group X not found."; a classic or share group is GROUP_ID_NOT_FOUND "Group X is not
a consumer group.". authorized_operations: every group operation when asked (no authorizer).
Version notes: v1 (Kafka 4.0) adds member_type: 1 for a consumer-protocol member, 0 for a classic
member of the group (one that joined with JoinGroup, or came from an upgraded classic group).
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.authorization import GROUP_OPERATIONS, operations_if
from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.handlers._shared.group import coordinator, ownership_error
from minikafka.broker.wire.context import RequestContext
from minikafka.coordinator.group.consumer import Assignment, ConsumerGroup
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.CONSUMER_GROUP_DESCRIBE
VERSIONS = VersionRange(0, 1)

CONSUMER_MEMBER_TYPE = 1
CLASSIC_MEMBER_TYPE = 0


def _assignment(ctx: RequestContext, assignment: Assignment) -> dict[str, Any]:
    groups = coordinator(ctx)
    return {"topic_partitions": [
        {"topic_id": groups.topic_id(topic), "topic_name": topic, "partitions": sorted(parts)}
        for topic, parts in sorted(assignment.items()) if groups.topic_id(topic) is not None
    ]}


def _describe(ctx: RequestContext, group: ConsumerGroup, include_operations: bool) -> dict[str, Any]:
    members = [
        {
            "member_id": m.member_id,
            "instance_id": m.instance_id,
            "rack_id": m.rack_id,
            "member_epoch": m.member_epoch,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "subscribed_topic_names": list(m.subscribed_topic_names),
            "subscribed_topic_regex": m.subscribed_topic_regex,
            "assignment": _assignment(ctx, m.assigned),
            "target_assignment": _assignment(ctx, group.target.get(m.member_id, {})),
            "member_type": CONSUMER_MEMBER_TYPE if m.classic is None else CLASSIC_MEMBER_TYPE,
        }
        for m in group.members.values()
    ]
    return {
        "error_code": ErrorCode.none,
        "group_id": group.group_id,
        "group_state": group.state().value,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor_name": coordinator(ctx).consumer_assignor_name(group),
        "members": members,
        "authorized_operations": operations_if(include_operations, GROUP_OPERATIONS),
    }


def _error(group_id: str, error: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"error_code": error, "error_message": message, "group_id": group_id, "group_state": "",
            "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": [],
            "authorized_operations": operations_if(False, GROUP_OPERATIONS)}


async def handle(ctx: RequestContext, request: Any) -> Any:
    groups = coordinator(ctx)
    described = []
    for group_id in request.group_ids:
        error = ownership_error(ctx, group_id)
        if error is None and not groups.loaded:
            error = ErrorCode.coordinator_load_in_progress
        group = groups.consumer_group(group_id)
        if error is not None:
            described.append(_error(group_id, error, None))
        elif group is not None:
            described.append(_describe(ctx, group, request.include_authorized_operations))
        elif group_id in groups.groups or ctx.services.is_share_group(group_id):
            described.append(_error(group_id, ErrorCode.group_id_not_found,
                                    f"Group {group_id} is not a consumer group"))
        else:
            described.append(_error(group_id, ErrorCode.group_id_not_found, f"Group {group_id} not found."))
    return build(response_of(request), throttle_time=0, groups=described)
