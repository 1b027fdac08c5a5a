"""ListTransactions (KIP-664): v0-1.

Behavior: transactional ids known to this coordinator, filtered by state names, producer ids and
(v1, KIP-994) a minimum running duration; unknown state names are echoed in unknown_state_filters.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.wire.context import RequestContext
from minikafka.coordinator.transaction.state import STATE_BY_NAME
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.LIST_TRANSACTIONS
VERSIONS = VersionRange(0, 1)


async def handle(ctx: RequestContext, request: Any) -> Any:
    unknown = [name for name in request.state_filters if name not in STATE_BY_NAME]
    states = {STATE_BY_NAME[name] for name in request.state_filters if name in STATE_BY_NAME}
    if request.state_filters and not states:
        found = []
    else:
        found = ctx.services.transactions.list(states or None, set(request.producer_id_filters) or None,
                                               getattr(request, "duration_filter", -1))
    return build(response_of(request), throttle_time=0, error_code=ErrorCode.none, unknown_state_filters=unknown,
                 transaction_states=[{"transactional_id": m.transactional_id, "producer_id": m.producer_id,
                                      "transaction_state": m.state.display_name} for m in found])
