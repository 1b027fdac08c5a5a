"""LeaveGroup: v0-5.

Behavior: removes the members and rebalances the rest. A static member may leave by
group.instance.id alone (empty member id); a member id that does not match the instance's is
FENCED_INSTANCE_ID; an unknown member is UNKNOWN_MEMBER_ID.
Version notes: v0-2 name one member (its error is the top-level error); v3+ batch `members`
with per-member errors.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.handlers._shared.group import coordinator, ownership_error
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_code_for, outcome_code
from minikafka.coordinator.errors import GroupError
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.LEAVE_GROUP
VERSIONS = VersionRange(0, 5)


async def handle(ctx: RequestContext, request: Any) -> Any:
    error = ownership_error(ctx, request.group_id)
    if error is not None:
        return build(response_of(request), error_code=error)
    if request.__version__ < 3:
        top, errors = _leave(ctx, request.group_id, [(request.member_id, None)])
        return build(
            response_of(request), throttle_time=0, error_code=top if top is not ErrorCode.none else errors[0]
        )
    members = [(m.member_id, m.group_instance_id) for m in request.members]
    top, errors = _leave(ctx, request.group_id, members)
    return build(
        response_of(request),
        throttle_time=0,
        error_code=top,
        members=[
            {"member_id": mid, "group_instance_id": iid, "error_code": err}
            for (mid, iid), err in zip(members, errors, strict=True)
        ],
    )


def _leave(
    ctx: RequestContext, group_id: str, members: list[tuple[str, str | None]]
) -> tuple[ErrorCode, list[ErrorCode]]:
    """(top-level code, per-member codes); a group-level failure is every member's code too."""
    try:
        outcomes = coordinator(ctx).leave_group(group_id, members)
    except GroupError as exc:
        code = error_code_for(exc, ctx)
        return code, [code] * len(members)
    return ErrorCode.none, [outcome_code(ctx, outcome) for outcome in outcomes]
