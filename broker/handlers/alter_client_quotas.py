"""AlterClientQuotas: v0-1 (KIP-546).

Behavior (Kafka's ClientQuotaControlManager.alterClientQuotas): each entry sets or removes quota keys of
one entity (user, client-id, both, or ip; a null name is the type's default). Each entity is validated on
its own, answered in request order, and what passes is applied together and persisted
(broker/config/client_quotas.py); validate_only applies nothing. INVALID_REQUEST, with Kafka's messages,
for: an empty entity, an unknown entity type, an empty name, ip combined with user or client-id, an
unknown key for the entity ("Invalid configuration key x"), a fractional value of a whole-number key
("Configuration producer_byte_rate must be a Long value"), a key or an entity given twice ("Ignoring
duplicate entity ..."). Needs ALTER_CONFIGS on the CLUSTER (checked at dispatch). A change applies to
the next request of every connection it matches (broker/wire/quotas.py).
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.config.client_quotas import Alteration, entity_of
from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.wire.context import RequestContext
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build

API_KEY = ApiKey.ALTER_CLIENT_QUOTAS
VERSIONS = VersionRange(0, 1)


async def handle(ctx: RequestContext, request: Any) -> Any:
    alterations = [
        Alteration(entity_of((e.entity_type, e.entity_name) for e in entry.entity),
                   tuple((op.key, None if op.remove else float(op.value)) for op in entry.ops))
        for entry in request.entries]
    results = ctx.services.quotas.store.alter(alterations, validate_only=request.validate_only)
    return build(response_of(request), throttle_time=0, entries=[
        {"error_code": result.code, "error_message": result.message,
         "entity": [{"entity_type": kind, "entity_name": name} for kind, name in result.entity]}
        for result in results])
