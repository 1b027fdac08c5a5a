"""DescribeAcls: v1-3 (as Kafka 4; v0 is not in kio).

Behavior: the stored ACLs the filter matches (Kafka's AclBindingFilter: ANY and null match anything,
MATCH matches the literal, wildcard and prefixed ACLs that apply to the named resource), grouped by
resource. A filter with an UNKNOWN field is INVALID_REQUEST; with no authorizer, SECURITY_DISABLED.
Needs DESCRIBE on the CLUSTER (checked at dispatch).
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.acls import NO_AUTHORIZER_ON_BROKER, acl_filter
from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.security.acls import InvalidAcl
from minikafka.broker.wire.context import RequestContext
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.DESCRIBE_ACLS
VERSIONS = VersionRange(1, 3)


async def handle(ctx: RequestContext, request: Any) -> Any:
    authorizer = ctx.services.authorizer
    response = response_of(request)
    if authorizer is None:
        return build(response, throttle_time=0, error_code=ErrorCode.security_disabled,
                     error_message=NO_AUTHORIZER_ON_BROKER)
    wanted = acl_filter(request)
    try:
        wanted.validate()
    except InvalidAcl as exc:
        return build(response, throttle_time=0, error_code=ErrorCode.invalid_request, error_message=str(exc))
    resources: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for acl in authorizer.acls:
        if wanted.matches(acl):
            resources.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
                {"principal": acl.principal, "host": acl.host, "operation": acl.operation,
                 "permission_type": acl.permission})
    return build(response, throttle_time=0, error_code=ErrorCode.none, error_message=None, resources=[
        {"resource_type": resource_type, "resource_name": name, "pattern_type": pattern, "acls": acls}
        for (resource_type, name, pattern), acls in resources.items()])
