"""AlterUserScramCredentials (KIP-554): v0.

Behavior (Kafka's ScramControlManager.alterScramCredentials): each upsertion carries the salt, the
iteration count and the salted password the client computed; the broker keeps the stored key and the
server key derived from it (`scram-credentials.json` in the data directory, so they survive a restart).
One result per user named. Errors, per user: UNSUPPORTED_SASL_MECHANISM for an unknown mechanism;
UNACCEPTABLE_CREDENTIAL for an empty name, salt or salted password, or iterations outside 4096-16384;
DUPLICATE_RESOURCE for a user named twice in the request; RESOURCE_NOT_FOUND for deleting a credential
that does not exist. A user with any error has none of its changes applied.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.security.sasl.scram import (
    MAX_ITERATIONS,
    MECHANISM_CODES,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredential,
    credential_from_salted_password,
)
from minikafka.broker.wire.context import RequestContext
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
VERSIONS = VersionRange(0, 0)
_MECHANISM_NAMES = {code: name for name, code in MECHANISM_CODES.items()}


def _upsert_error(upsertion: Any) -> tuple[ErrorCode, str] | None:
    if upsertion.mechanism not in _MECHANISM_NAMES:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    if upsertion.iterations < MIN_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too few iterations"
    if upsertion.iterations > MAX_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too many iterations"
    if not upsertion.salt:
        return ErrorCode.unacceptable_credential, "Salt must not be empty"
    if not upsertion.salted_password:
        return ErrorCode.unacceptable_credential, "SaltedPassword must not be empty"
    return None


async def handle(ctx: RequestContext, request: Any) -> Any:
    sasl = ctx.services.sasl
    names = [d.name for d in request.deletions] + [u.name for u in request.upsertions]
    errors: dict[str, tuple[ErrorCode, str]] = {}
    for name in names:
        if not name:
            errors[name] = (ErrorCode.unacceptable_credential, "Username must not be empty")
        elif names.count(name) > 1:
            errors[name] = (ErrorCode.duplicate_resource,
                            "A user credential cannot be altered twice in the same request")
    deletions: list[tuple[str, str]] = []
    for deletion in request.deletions:
        mechanism = _MECHANISM_NAMES.get(deletion.mechanism)
        if deletion.name in errors:
            continue
        if mechanism is None:
            errors[deletion.name] = (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
        elif sasl is None or sasl.credentials.get(deletion.name, mechanism) is None:
            errors[deletion.name] = (ErrorCode.resource_not_found,
                                     "Attempt to delete a user credential that does not exist")
        else:
            deletions.append((deletion.name, mechanism))
    upserts: list[tuple[str, str, ScramCredential]] = []
    for upsertion in request.upsertions:
        if upsertion.name in errors:
            continue
        problem = _upsert_error(upsertion)
        if problem is not None:
            errors[upsertion.name] = problem
            continue
        mechanism = _MECHANISM_NAMES[upsertion.mechanism]
        upserts.append((upsertion.name, mechanism, credential_from_salted_password(
            MECHANISMS[mechanism], bytes(upsertion.salt), bytes(upsertion.salted_password), upsertion.iterations)))
    if sasl is not None and (upserts or deletions):
        sasl.credentials.apply(upserts, deletions)
        ctx.log.info("SCRAM credentials altered", upserted=[u for u, _m, _c in upserts],
                     deleted=[u for u, _m in deletions])
    results = []
    for name in dict.fromkeys(names):
        code, message = errors.get(name, (ErrorCode.none, None))
        results.append({"user": name, "error_code": code, "error_message": message})
    return build(response_of(request), throttle_time=0, results=results)
