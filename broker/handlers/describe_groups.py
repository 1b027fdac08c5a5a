"""DescribeGroups: v0-5.

Behavior: state, protocol type, chosen protocol and members of each group. Member metadata and
assignments are filled only while Stable (as Kafka's GroupMetadata.summary). An unknown group is
answered with state "Dead" and no error (as Kafka did before v6's GROUP_ID_NOT_FOUND).
Version notes: v3 adds authorized_operations (when asked: every group operation, as Kafka without an
authorizer; otherwise -2^31, "not requested"), v4 the members'
group.instance.id. v6 is not advertised.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.authorization import GROUP_OPERATIONS, operations_if
from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.handlers._shared.group import coordinator, ownership_error
from minikafka.broker.wire.context import RequestContext
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.DESCRIBE_GROUPS
VERSIONS = VersionRange(0, 5)


def _describe(ctx: RequestContext, group_id: str, include_authorized_operations: bool) -> dict[str, Any]:
    error = ownership_error(ctx, group_id)
    if error is not None:
        return {
            "group_id": group_id,
            "error_code": error,
            "group_state": "",
            "protocol_type": "",
            "protocol_data": "",
            "members": [],
        }
    described = coordinator(ctx).describe_group(group_id)
    members = [
        {
            "member_id": m.member_id,
            "group_instance_id": m.group_instance_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "member_metadata": m.metadata,
            "member_assignment": m.assignment,
        }
        for m in described.members
    ]
    return {
        "group_id": described.group_id,
        "error_code": ErrorCode.none,
        "group_state": described.state,
        "protocol_type": described.protocol_type,
        "protocol_data": described.protocol,
        "members": members,
        "authorized_operations": operations_if(include_authorized_operations, GROUP_OPERATIONS),
    }


async def handle(ctx: RequestContext, request: Any) -> Any:
    include = getattr(request, "include_authorized_operations", False)
    return build(response_of(request), throttle_time=0, groups=[_describe(ctx, g, include) for g in request.groups])
