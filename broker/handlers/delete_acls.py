"""DeleteAcls: v1-3 (as Kafka 4; v0 is not in kio).

Behavior: each filter deletes the stored ACLs it matches and lists them; a filter with an UNKNOWN field
is INVALID_REQUEST on its own; with no authorizer, SECURITY_DISABLED. Needs ALTER on the CLUSTER
(checked at dispatch).
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.acls import NO_AUTHORIZER, acl_filter
from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.security.acls import InvalidAcl
from minikafka.broker.wire.context import RequestContext
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.DELETE_ACLS
VERSIONS = VersionRange(1, 3)


async def handle(ctx: RequestContext, request: Any) -> Any:
    authorizer = ctx.services.authorizer
    results = []
    deleted = []
    for entry in request.filters:
        if authorizer is None:
            results.append({"error_code": ErrorCode.security_disabled, "error_message": NO_AUTHORIZER})
            continue
        wanted = acl_filter(entry)
        try:
            wanted.validate()
        except InvalidAcl as exc:
            results.append({"error_code": ErrorCode.invalid_request, "error_message": str(exc)})
            continue
        matching = [acl for acl in authorizer.acls if wanted.matches(acl)]
        deleted += matching
        results.append({"error_code": ErrorCode.none, "error_message": None, "matching_acls": [
            {"error_code": ErrorCode.none, "error_message": None, "resource_type": acl.resource_type,
             "resource_name": acl.resource_name, "pattern_type": acl.pattern_type, "principal": acl.principal,
             "host": acl.host, "operation": acl.operation, "permission_type": acl.permission}
            for acl in matching]})
    if authorizer is not None and deleted:
        authorizer.remove(deleted)
        ctx.log.info("ACLs deleted", count=len(set(deleted)))
    return build(response_of(request), throttle_time=0, filter_results=results)
