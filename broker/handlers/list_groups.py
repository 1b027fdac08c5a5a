"""ListGroups: v0-5.

Behavior: every live group (not Dead) with its protocol type; v4's states_filter keeps the groups
in the given states (case-insensitive, trimmed; empty = all). v5's types_filter keeps the groups of
the given types, matched case-insensitively as Kafka 4's GroupType.parse does (an unknown name
matches nothing). KIP-848 consumer groups are listed with type "consumer", protocol type "consumer"
and their consumer-group state (Empty, Assigning, Reconciling, Stable); share groups (KIP-932) with
type "share", protocol type "share" and state Empty or Stable.
Version notes: v4 adds group_state to the answer; v5 adds types_filter and group_type (KIP-848).
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.handlers._shared.group import coordinator
from minikafka.broker.wire.context import RequestContext
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.LIST_GROUPS
VERSIONS = VersionRange(0, 5)

CLASSIC_GROUP_TYPE = "classic"
CONSUMER_GROUP_TYPE = "consumer"
SHARE_GROUP_TYPE = "share"


async def handle(ctx: RequestContext, request: Any) -> Any:
    states = getattr(request, "states_filter", ()) or ()
    types = {name.lower() for name in getattr(request, "types_filter", ()) or ()}
    listed = coordinator(ctx).list_groups(states) if not types or CLASSIC_GROUP_TYPE in types else []
    groups = [
        {"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state,
         "group_type": CLASSIC_GROUP_TYPE}
        for g in listed
    ]
    if not types or CONSUMER_GROUP_TYPE in types:
        wanted = {s.lower().strip() for s in states}
        for group in coordinator(ctx).consumer_groups.values():
            state = group.state().value
            if not wanted or state.lower() in wanted:
                groups.append({"group_id": group.group_id, "protocol_type": CONSUMER_GROUP_TYPE,
                               "group_state": state, "group_type": CONSUMER_GROUP_TYPE})
    if not types or SHARE_GROUP_TYPE in types:
        groups += _share_groups(ctx, {s.lower().strip() for s in states})
    return build(response_of(request), throttle_time=0, error_code=ErrorCode.none, groups=groups)


def _share_groups(ctx: RequestContext, wanted: set[str]) -> list[dict[str, Any]]:
    return [{"group_id": group.group_id, "protocol_type": SHARE_GROUP_TYPE, "group_state": group.state,
             "group_type": SHARE_GROUP_TYPE}
            for group in ctx.services.share_groups() if not wanted or group.state.lower() in wanted]

