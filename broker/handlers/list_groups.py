"""ListGroups: v0-4.

Behavior: every live group (not Dead) with its protocol type; v4's states_filter keeps the groups
in the given states (case-insensitive; empty = all).
Version notes: v4 adds group_state to the answer; v5 (types filter, KIP-848) is not advertised.
"""

from __future__ import annotations

from typing import Any

from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

from ..context import RequestContext
from .common import response_of
from .group_common import coordinator

API_KEY = ApiKey.LIST_GROUPS
VERSIONS = VersionRange(0, 4)


async def handle(ctx: RequestContext, request: Any) -> Any:
    states = getattr(request, "states_filter", ()) or ()
    groups = [
        {"group_id": group_id, "protocol_type": protocol_type, "group_state": state}
        for group_id, protocol_type, state in coordinator(ctx).list_groups(states)
    ]
    return build(response_of(request), throttle_time=0, error_code=ErrorCode.none, groups=groups)
