"""Heartbeat: v0-4.

Behavior: resets the member's session timer. NONE while Stable or CompletingRebalance;
REBALANCE_IN_PROGRESS while PreparingRebalance (the member must rejoin); UNKNOWN_MEMBER_ID,
ILLEGAL_GENERATION, FENCED_INSTANCE_ID (v3+ static members) otherwise.
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

API_KEY = ApiKey.HEARTBEAT
VERSIONS = VersionRange(0, 4)


async def handle(ctx: RequestContext, request: Any) -> Any:
    error = ownership_error(ctx, request.group_id)
    if error is None:
        try:
            coordinator(ctx).heartbeat(
                group_id=request.group_id,
                generation_id=request.generation_id,
                member_id=request.member_id,
                group_instance_id=getattr(request, "group_instance_id", None),
            )
        except GroupError as exc:
            error = error_code_for(exc, ctx)
    return build(response_of(request), throttle_time=0, error_code=error or ErrorCode.none)
