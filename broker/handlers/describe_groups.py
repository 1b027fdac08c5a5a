"""DescribeGroups: v0-5.

Behavior: state, protocol type, chosen protocol and members of each group. Member metadata and
assignments are filled only while Stable (as Kafka's GroupMetadata.summary). An unknown group is
answered with state "Dead" and no error (as Kafka did before v6's GROUP_ID_NOT_FOUND).
Version notes: v3 adds authorized_operations (we answer -2^31, "not requested"), v4 the members'
group.instance.id. v6 is not advertised.
"""

from __future__ import annotations

from typing import Any

from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build

from ..context import RequestContext
from .common import response_of
from .group_common import coordinator, ownership_error

API_KEY = ApiKey.DESCRIBE_GROUPS
VERSIONS = VersionRange(0, 5)

_AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def _describe(ctx: RequestContext, group_id: str) -> dict[str, Any]:
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
    described.pop("exists")
    described["authorized_operations"] = _AUTHORIZED_OPERATIONS_OMITTED
    return described


async def handle(ctx: RequestContext, request: Any) -> Any:
    return build(response_of(request), throttle_time=0, groups=[_describe(ctx, g) for g in request.groups])
