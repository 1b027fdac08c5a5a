"""SaslHandshake: v0-1 advertised as Kafka does; v1 served (v0's raw SASL frames are not).

Behavior (Kafka's SaslServerAuthenticator and KafkaApis): on a SASL listener before authentication, a
mechanism the listener enables starts that mechanism (NONE, with the enabled list); any other gets
UNSUPPORTED_SASL_MECHANISM with the enabled list, and the connection closes. A second handshake once a
mechanism is chosen is ILLEGAL_SASL_STATE, then the close. On a listener without SASL, or after
authentication, the handshake is ILLEGAL_SASL_STATE and the connection stays (KafkaApis answers it).
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.wire.context import RequestContext
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.SASL_HANDSHAKE
VERSIONS = VersionRange(1, 1)
ADVERTISED_VERSIONS = VersionRange(0, 1)


async def handle(ctx: RequestContext, request: Any) -> Any:
    session = ctx.session
    sasl = ctx.services.sasl
    enabled = sasl.enabled_mechanisms(session.listener_name) if sasl is not None else []
    if not session.awaiting_authentication:
        ctx.log.info("SASL handshake not expected", listener=session.listener_name)
        return build(response_of(request), error_code=ErrorCode.illegal_sasl_state, mechanisms=enabled)
    if session.sasl_mechanism is not None:
        ctx.close_after_response = True
        return build(response_of(request), error_code=ErrorCode.illegal_sasl_state, mechanisms=enabled)
    mechanism = request.mechanism
    if sasl is None or mechanism not in enabled:
        ctx.log.info("unsupported SASL mechanism", mechanism=mechanism, enabled=enabled)
        ctx.close_after_response = True
        return build(response_of(request), error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=enabled)
    session.sasl_mechanism = mechanism
    session.sasl_state = sasl.start(session.listener_name, mechanism)
    return build(response_of(request), error_code=ErrorCode.none, mechanisms=enabled)
