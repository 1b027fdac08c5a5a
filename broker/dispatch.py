"""The one dispatch point every request goes through.

Order of checks follows Kafka: unknown API key -> close; version outside our range -> close, except
ApiVersions, which is answered at v0 with UNSUPPORTED_VERSION and our key list (KIP-511) so a newer
client can downgrade; undecodable bytes -> close. Fault injection and the flight recorder will hook
in here.

An unexpected exception while handling a decoded request stays inside that request, as in Kafka's
KafkaApis.handleError: it is logged once with its stack trace, counted, and answered with
UNKNOWN_SERVER_ERROR for the whole request (broker/error_response.py); the connection stays open.
Handlers that can fail per partition catch there, so one partition's surprise fails only itself.
Only where Kafka sends no response would it close: a Produce with acks=0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minikafka.protocol.api_keys import ApiKey, api_name
from minikafka.protocol.build import build
from minikafka.protocol.codec import decode_request, encode_response, peek_header, response_class
from minikafka.protocol.errors import ErrorCode, KafkaError

from .context import RequestContext
from .error_response import error_response
from .errors import error_code_for, error_message_for


class CloseConnection(Exception):
    """The request cannot be answered; Kafka closes the connection in these cases."""


def _api_versions_fallback(ctx_registry_versions: list[tuple[int, int, int]], correlation_id: int) -> bytes:
    body: Any = build(
        response_class(ApiKey.API_VERSIONS, 0),
        error_code=ErrorCode.unsupported_version,
        api_keys=[{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in ctx_registry_versions],
    )
    return encode_response(correlation_id, body)


async def dispatch(frame: bytes, make_context: Callable[[int, int, int, str | None], RequestContext]) -> bytes | None:
    """Handle one request frame; return the response frame, or None when none is due (acks=0)."""
    peeked = peek_header(frame)
    # The registry lives in the services every context carries; build a bare context to reach it.
    ctx = make_context(peeked.api_key, peeked.api_version, peeked.correlation_id, None)
    registry = ctx.services.registry
    route = registry.route(peeked.api_key)
    if route is None:
        raise CloseConnection(f"unknown api key {peeked.api_key}")
    if peeked.api_version not in route.versions:
        if peeked.api_key == ApiKey.API_VERSIONS:
            return _api_versions_fallback(registry.api_versions(), peeked.correlation_id)
        raise CloseConnection(
            f"unsupported version {peeked.api_version} of {api_name(peeked.api_key)} "
            f"(accepted {route.versions.min}-{route.versions.max})"
        )
    decoded = decode_request(frame, peeked.api_key, peeked.api_version)
    ctx.client_id = decoded.client_id
    if decoded.trailing_bytes:
        ctx.log.debug("ignoring trailing request bytes", count=decoded.trailing_bytes)
    try:
        response = await route.handle(ctx, decoded.body)
        if response is None:
            return None
        return encode_response(peeked.correlation_id, response)
    except CloseConnection:
        raise
    except Exception as exc:  # no handler bug may take the connection (and its other requests) down
        # A KafkaError escaping a handler is answered with its own code; anything else is logged,
        # counted and answered UNKNOWN_SERVER_ERROR.
        code = error_code_for(exc, ctx)
        if isinstance(exc, KafkaError):
            ctx.log.info("request failed", error=code.name, reason=str(exc))
        if peeked.api_key == ApiKey.PRODUCE and getattr(decoded.body, "acks", None) == 0:
            raise CloseConnection("acks=0 produce failed") from exc
        body = error_response(decoded.body, code, error_message_for(exc))
        return encode_response(peeked.correlation_id, body)
