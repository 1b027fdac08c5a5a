"""DescribeUserScramCredentials (KIP-554): v0.

Behavior (Kafka's ScramControlManager.describeScramCredentials): with users null or empty, every user with a
SCRAM credential, each with its mechanisms and iteration counts (never salts or keys); a named user
without one is RESOURCE_NOT_FOUND; a name given twice is DUPLICATE_RESOURCE for that name.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.security.sasl.scram import MECHANISM_CODES
from minikafka.broker.security.sasl_server import ScramCredentials
from minikafka.broker.wire.context import RequestContext
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
VERSIONS = VersionRange(0, 0)


def _described(user: str, mechanisms: dict[str, Any]) -> dict[str, Any]:
    return {"user": user, "error_code": ErrorCode.none, "error_message": None,
            "credential_infos": [{"mechanism": MECHANISM_CODES[mechanism], "iterations": credential.iterations}
                                 for mechanism, credential in sorted(mechanisms.items())]}


def describe(credentials: ScramCredentials, names: list[str] | None) -> list[dict[str, Any]]:
    users = credentials.users()
    if not names:  # null or empty: every user (librdkafka asks with an empty array)
        return [_described(user, mechanisms) for user, mechanisms in sorted(users.items())]
    results = []
    for name in dict.fromkeys(names):
        if names.count(name) > 1:
            results.append({"user": name, "error_code": ErrorCode.duplicate_resource, "credential_infos": [],
                            "error_message": "Cannot describe SCRAM credentials for the same user twice in a "
                                             f"single request: {name}"})
        elif name not in users:
            results.append({"user": name, "error_code": ErrorCode.resource_not_found, "credential_infos": [],
                            "error_message": f"Attempt to describe a user credential that does not exist: {name}"})
        else:
            results.append(_described(name, users[name]))
    return results


async def handle(ctx: RequestContext, request: Any) -> Any:
    sasl = ctx.services.sasl
    names = None if request.users is None else [user.name for user in request.users]
    results = describe(sasl.credentials, names) if sasl is not None else []
    return build(response_of(request), throttle_time=0, error_code=ErrorCode.none, error_message=None,
                 results=results)
