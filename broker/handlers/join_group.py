"""JoinGroup: v0-9.

Behavior:
- Delegates to GroupCoordinator.join_group (classic protocol; see coordinator/group/classic.py).
  The response waits until the join phase completes (all members rejoined, or the rebalance timeout).
  A join to a non-empty KIP-848 consumer group is answered at once: the member lives in that group
  and gets its partitions from the server-side assignor through SyncGroup (coordinator/group/migration.py).
- v4+: a member with an empty member id gets MEMBER_ID_REQUIRED and its new id (KIP-394).
- Session timeout outside group.min/max.session.timeout.ms is INVALID_SESSION_TIMEOUT.
- A share group's id is GROUP_ID_NOT_FOUND (Kafka: "Group X is not a classic group.").
Version notes: v0 has no rebalance timeout (the session timeout is used); v5 adds
group.instance.id (static membership); v7 returns protocol_type; v9 adds skip_assignment for a
static leader that rejoins without a rebalance.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.handlers._shared.group import client_host, coordinator, ownership_error
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import member_code
from minikafka.coordinator.group import JoinGroupRequest
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build, ms
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.JOIN_GROUP
VERSIONS = VersionRange(0, 9)


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = request.__version__
    error = ownership_error(ctx, request.group_id)
    if error is None and ctx.services.is_share_group(request.group_id):
        # Kafka's getOrMaybeCreateClassicGroup: "Group X is not a classic group."
        error = ErrorCode.group_id_not_found
    if error is not None:
        return build(response_of(request), error_code=error, generation_id=-1, member_id=request.member_id)
    session = ms(request.session_timeout)
    rebalance = ms(getattr(request, "rebalance_timeout", None))
    if rebalance < 0:
        rebalance = session
    result = await coordinator(ctx).join_group(JoinGroupRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=request.protocol_type,
        protocols=[(p.name, p.metadata) for p in request.protocols],
        session_timeout_ms=session,
        rebalance_timeout_ms=rebalance,
        client_id=ctx.client_id or "",
        client_host=client_host(ctx),
        require_known_member_id=version >= 4,
        supports_skip_assignment=version >= 9,
    ))
    return build(
        response_of(request),
        throttle_time=0,
        error_code=member_code(ctx, result.error),
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name or ("" if version < 7 else None),
        leader=result.leader_id,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[{"member_id": m, "group_instance_id": i, "metadata": md} for m, i, md in result.members],
    )
