"""SaslAuthenticate: v0-2.

Behavior (Kafka's SaslServerAuthenticator): each request carries the client's next SASL token to the
mechanism chosen by SaslHandshake; the answer carries the mechanism's challenge. When the mechanism
completes, the connection's principal becomes User:<name> and every API is served; session_lifetime_ms
is 0 (no re-authentication: connections.max.reauth.ms is not set). A failed authentication answers
SASL_AUTHENTICATION_FAILED with the mechanism's message and closes the connection. Before a handshake,
or on a listener without SASL or after authentication, it is ILLEGAL_SASL_STATE (closing the
connection before authentication, as Kafka does).
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.security.sasl import AuthenticationFailed
from minikafka.broker.security.session import KafkaPrincipal
from minikafka.broker.wire.context import RequestContext
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.SASL_AUTHENTICATE
VERSIONS = VersionRange(0, 2)


def _answer(request: Any, code: ErrorCode, message: str | None, auth_bytes: bytes = b"") -> Any:
    return build(response_of(request), error_code=code, error_message=message, auth_bytes=auth_bytes,
                 session_lifetime=0)


async def handle(ctx: RequestContext, request: Any) -> Any:
    session = ctx.session
    mechanism = session.sasl_state
    if not session.awaiting_authentication or mechanism is None:
        if session.awaiting_authentication:
            ctx.close_after_response = True
        return _answer(request, ErrorCode.illegal_sasl_state,
                       "SaslAuthenticate request not expected: no SASL handshake is in progress")
    try:
        step = mechanism.step(bytes(request.auth_bytes))
    except AuthenticationFailed as failure:
        ctx.log.info("SASL authentication failed", mechanism=session.sasl_mechanism, reason=str(failure),
                     peer=ctx.peer)
        ctx.close_after_response = True
        session.sasl_state = None
        return _answer(request, ErrorCode.sasl_authentication_failed, str(failure))
    if step.user is not None:
        session.principal = KafkaPrincipal("User", step.user)
        session.awaiting_authentication = False
        session.sasl_state = None
        ctx.log.info("SASL authentication succeeded", mechanism=session.sasl_mechanism,
                     principal=str(session.principal))
    return _answer(request, ErrorCode.none, None, step.challenge)
