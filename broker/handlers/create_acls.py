"""CreateAcls: v1-3 (as Kafka 4; v0 is not in kio).

Behavior (Kafka's AclControlManager): each creation is validated on its own (INVALID_REQUEST with
Kafka's message for an ANY or UNKNOWN type, pattern, operation or permission, an empty name, a CLUSTER
name other than `kafka-cluster`, a principal that is not `Type:name`) and the valid ones are stored.
Needs ALTER on the CLUSTER (checked at dispatch, broker/security/api_authorization.py); with no
authorizer configured every creation is SECURITY_DISABLED.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.acls import NO_AUTHORIZER
from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.security.acls import AclBinding, InvalidAcl
from minikafka.broker.wire.context import RequestContext
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.CREATE_ACLS
VERSIONS = VersionRange(1, 3)


async def handle(ctx: RequestContext, request: Any) -> Any:
    authorizer = ctx.services.authorizer
    results = []
    created = []
    for creation in request.creations:
        if authorizer is None:
            results.append({"error_code": ErrorCode.security_disabled, "error_message": NO_AUTHORIZER})
            continue
        binding = AclBinding(creation.resource_type, creation.resource_name, creation.resource_pattern_type,
                             creation.principal, creation.host, creation.operation, creation.permission_type)
        try:
            binding.validate()
        except InvalidAcl as exc:
            results.append({"error_code": ErrorCode.invalid_request, "error_message": str(exc)})
            continue
        created.append(binding)
        results.append({"error_code": ErrorCode.none, "error_message": None})
    if authorizer is not None and created:
        authorizer.add(created)
        ctx.log.info("ACLs created", count=len(created))
    return build(response_of(request), throttle_time=0, results=results)
