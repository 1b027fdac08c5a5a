"""SyncGroup: v0-5.

Behavior:
- Delegates to GroupCoordinator.sync_group. Followers wait until the leader's SyncGroup brings the
  assignment (or a rebalance starts: REBALANCE_IN_PROGRESS). Stable groups answer at once with the
  member's current assignment.
- Errors: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS,
  INCONSISTENT_GROUP_PROTOCOL (v5: protocol type/name must match the group's), NOT_COORDINATOR to the
  leader and every waiting follower when the assignment cannot be stored (the group then rebalances,
  as Kafka's resetAndPropagateAssignmentError does).
Version notes: v3 adds group.instance.id; v5 adds protocol_type/protocol_name to both sides.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.handlers._shared.group import coordinator, ownership_error
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import member_code
from minikafka.coordinator.group import SyncGroupRequest
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build

API_KEY = ApiKey.SYNC_GROUP
VERSIONS = VersionRange(0, 5)


async def handle(ctx: RequestContext, request: Any) -> Any:
    error = ownership_error(ctx, request.group_id)
    if error is not None:
        return build(response_of(request), error_code=error)
    result = await coordinator(ctx).sync_group(SyncGroupRequest(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
        assignments={a.member_id: a.assignment for a in request.assignments},
    ))
    return build(
        response_of(request),
        throttle_time=0,
        error_code=member_code(ctx, result.error),
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
