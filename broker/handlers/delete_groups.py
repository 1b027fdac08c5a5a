"""DeleteGroups: v0-2.

Behavior: an Empty group is deleted with its offsets (tombstones for every committed offset and
for the group metadata); a group with members is NON_EMPTY_GROUP; an unknown group is
GROUP_ID_NOT_FOUND; an empty id is INVALID_GROUP_ID. A share group (KIP-932) is deleted when it has no
members, with its share-partition states (tombstones in `__share_group_state`), as Kafka 4.2 does.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.handlers._shared.group import coordinator, ownership_error
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_code_for
from minikafka.coordinator.errors import GroupError
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.DELETE_GROUPS
VERSIONS = VersionRange(0, 2)


async def handle(ctx: RequestContext, request: Any) -> Any:
    results = []
    for group_id in request.groups_names:
        error = ownership_error(ctx, group_id) if group_id else None
        if error is None:
            error = _delete(ctx, group_id)
        results.append({"group_id": group_id, "error_code": error})
    return build(response_of(request), throttle_time=0, results=results)


def _delete(ctx: RequestContext, group_id: str) -> ErrorCode:
    try:
        if group_id and ctx.services.is_share_group(group_id):
            ctx.services.shares.delete_group(group_id)
        else:
            coordinator(ctx).delete_group(group_id)
    except GroupError as exc:
        return error_code_for(exc, ctx)
    return ErrorCode.none
