"""DescribeClientQuotas: v0-1 (KIP-546).

Behavior (Kafka's ClientQuotasImage.describe): the filter's components name entity types (`user`,
`client-id`, `ip`) matched exactly (match_type 0), by their default entity (1, a null match) or by any
entity of the type (2); `strict` leaves out entities with types the filter does not name, and an empty
non-strict filter matches every entity. A bad filter (a type given twice, an empty type, a match string
where the match type takes none, ip combined with user or client-id) is INVALID_REQUEST with Kafka's
message; an unknown entity type UNSUPPORTED_VERSION. Needs DESCRIBE_CONFIGS on the CLUSTER (checked at
dispatch). The quotas are those AlterClientQuotas set (broker/config/client_quotas.py).
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.config.client_quotas import InvalidQuota
from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.wire.context import RequestContext
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.DESCRIBE_CLIENT_QUOTAS
VERSIONS = VersionRange(0, 1)


async def handle(ctx: RequestContext, request: Any) -> Any:
    response = response_of(request)
    components = [(c.entity_type, c.match_type, c.match) for c in request.components]
    try:
        found = ctx.services.quotas.store.describe(components, request.strict)
    except InvalidQuota as exc:
        return build(response, throttle_time=0, error_code=exc.error_code, error_message=str(exc), entries=None)
    entries = [{"entity": [{"entity_type": kind, "entity_name": name} for kind, name in entity],
                "values": [{"key": key, "value": value} for key, value in sorted(values.items())]}
               for entity, values in found]
    return build(response, throttle_time=0, error_code=ErrorCode.none, error_message=None, entries=entries)
