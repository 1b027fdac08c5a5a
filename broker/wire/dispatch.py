"""The one dispatch point every request goes through.

Order of checks follows Kafka: unknown API key -> close; version outside our range -> close, except
ApiVersions, which is answered at v0 with UNSUPPORTED_VERSION and our key list (KIP-511) so a newer
client can downgrade; undecodable bytes -> close. Fault rules (broker/control/faults.py) are applied here,
after decoding, so they can match on what the request names; with none installed the only cost is
one truth test of the empty rule table. Exchange observers (broker/wire/hooks.py: the flight recorder,
metrics) see every pair here too, at the same cost when there are none.

An unexpected exception while handling a decoded request stays inside that request, as in Kafka's
KafkaApis.handleError: it is logged once with its stack trace, counted, and answered with
UNKNOWN_SERVER_ERROR for the whole request (protocol/error_response.py); the connection stays open.
Handlers that can fail per partition catch there, so one partition's surprise fails only itself.
Only where Kafka sends no response would it close: a Produce with acks=0, and a request whose error
response cannot be encoded either (one warning line from the connection, no traceback).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import CloseConnection, error_code_for, error_message_for
from minikafka.broker.wire.hooks import ANSWERED, CLOSED, DROP_AFTER, DROP_BEFORE, NO_RESPONSE, Exchange, FaultHit
from minikafka.protocol.api_keys import ApiKey, api_name
from minikafka.protocol.build import build
from minikafka.protocol.codec import PeekedHeader, decode_request, peek_header, response_class, response_frame
from minikafka.protocol.encoder import FrameBuffer
from minikafka.protocol.error_response import error_response
from minikafka.protocol.errors import ErrorCode, InvalidRequest, KafkaError
from minikafka.protocol.split import merge_responses, partition_errors, with_throttle

if TYPE_CHECKING:
    from minikafka.broker.security.acls import Authorizer


def _api_versions_fallback(ctx_registry_versions: list[tuple[int, int, int]], correlation_id: int,
                           seen: list[Any] | None) -> FrameBuffer:
    body: Any = build(
        response_class(ApiKey.API_VERSIONS, 0),
        error_code=ErrorCode.unsupported_version,
        api_keys=[{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in ctx_registry_versions],
    )
    if seen is not None:
        seen[_RESPONSE] = body
    return response_frame(correlation_id, body)


# `seen`, when observers are registered: [request body, response body], filled in by _dispatch. A list of
# two rather than an object: it is made for every request of every broker (the default observers).
_REQUEST = 0
_RESPONSE = 1

_BEFORE_AUTHENTICATION = frozenset((ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE))


async def dispatch(frame: bytes | bytearray,
                   make_context: Callable[[int, int, int, str | None], RequestContext]) -> FrameBuffer | None:
    """Handle one request frame; return the response frame (send its `parts()`), or None when none is due
    (acks=0)."""
    peeked = peek_header(frame)
    # The registry lives in the services every context carries; build a bare context to reach it.
    ctx = make_context(peeked.api_key, peeked.api_version, peeked.correlation_id, None)
    services = ctx.services
    observers = services.observers
    if not observers.exchanges:
        return await _dispatch(frame, peeked, ctx, None)
    seen: list[Any] = [None, None]
    time_ms = services.clock.now_ms()
    # Latency is how long this host took, not broker time: under a manual clock it must still move.
    started = perf_counter_ns()
    try:
        answer = await _dispatch(frame, peeked, ctx, seen)
    except (CloseConnection, InvalidRequest) as exc:
        observers.notify(Exchange(
            time_ms, ctx.node.node_id, ctx.connection_id, ctx.peer, ctx.client_id, peeked.api_key,
            peeked.api_version, peeked.correlation_id, perf_counter_ns() - started, len(frame), 0, CLOSED,
            seen[_REQUEST], None, str(exc)))
        raise
    # Positional, in Exchange's field order: this runs for every request of every broker, and keyword
    # arguments make building the dataclass three times as dear.
    answered = answer is not None
    answer_bytes = answer.frame_size - 4 if answer is not None else 0
    observers.notify(Exchange(
        time_ms, ctx.node.node_id, ctx.connection_id, ctx.peer, ctx.client_id, peeked.api_key, peeked.api_version,
        peeked.correlation_id, perf_counter_ns() - started, len(frame), answer_bytes,
        ANSWERED if answered else NO_RESPONSE, seen[_REQUEST], seen[_RESPONSE] if answered else None, None))
    return answer


async def _dispatch(frame: bytes | bytearray, peeked: PeekedHeader, ctx: RequestContext,
                    seen: list[Any] | None) -> FrameBuffer | None:
    registry = ctx.services.registry
    route = registry.route(peeked.api_key)
    if route is None:
        raise CloseConnection(f"unknown api key {peeked.api_key}")
    if peeked.api_version not in route.versions:
        if peeked.api_key == ApiKey.API_VERSIONS:
            return _api_versions_fallback(registry.api_versions(), peeked.correlation_id, seen)
        raise CloseConnection(
            f"unsupported version {peeked.api_version} of {api_name(peeked.api_key)} "
            f"(accepted {route.versions.min}-{route.versions.max})"
        )
    if ctx.session.awaiting_authentication and peeked.api_key not in _BEFORE_AUTHENTICATION:
        # Kafka's SaslServerAuthenticator: any other request before authentication is an illegal SASL state.
        raise CloseConnection(f"unexpected {api_name(peeked.api_key)} request before SASL authentication")
    decoded = decode_request(frame, peeked.api_key, peeked.api_version)
    ctx.client_id = decoded.client_id
    ctx.request_size = len(frame)
    if seen is not None:
        seen[_REQUEST] = decoded.body
    if decoded.trailing_bytes:
        ctx.log.debug("ignoring trailing request bytes", count=decoded.trailing_bytes)
    try:
        services = ctx.services
        faults = services.faults
        hit = faults.take(peeked.api_key, ctx.client_id, decoded.body) if faults.rules else None
        handle = route.handle if services.authorizer is None else _authorized(route.handle, services.authorizer)
        quotas = services.client_quotas.built  # none built: no quota set
        if quotas is not None and quotas.any_enabled:
            handle = quotas.enforced(handle)
        if hit is None:
            response = await handle(ctx, decoded.body)
        else:
            response = await _handle_with_fault(hit, handle, ctx, decoded.body)
        if response is None:
            return None
        if seen is not None:
            seen[_RESPONSE] = response
        return response_frame(peeked.correlation_id, response)
    except CloseConnection:
        raise
    except Exception as exc:  # no handler bug may take the connection (and its other requests) down
        # A KafkaError escaping a handler is answered with its own code; anything else is logged,
        # counted and answered UNKNOWN_SERVER_ERROR.
        code = error_code_for(exc, ctx)
        if isinstance(exc, KafkaError):
            ctx.log.info("request failed", error=code.name, reason=str(exc))
        if peeked.api_key == ApiKey.PRODUCE and getattr(decoded.body, "acks", None) == 0:
            raise CloseConnection("acks=0 produce failed", bad_input=False) from exc
        try:
            body = error_response(decoded.body, code, error_message_for(exc))
            if ctx.mute_ms:  # a client quota throttled the failed request (broker/wire/quotas.py)
                body = with_throttle(body, ctx.mute_ms)
            answer = response_frame(peeked.correlation_id, body)
            if seen is not None:
                seen[_RESPONSE] = body
            return answer
        except Exception as unanswerable:
            # The request's own values may not fit its response schema (a null where the response
            # version has no null): with no frame to send, closing is the one answer left; the
            # connection logs it once, with this reason.
            raise CloseConnection(
                f"cannot encode the {code.name.upper()} response to {api_name(peeked.api_key)} "
                f"v{peeked.api_version}: {unanswerable!r}") from exc


def _authorized(handle: Callable[[RequestContext, Any], Any], authorizer: Authorizer) -> Callable[..., Any]:
    """The handler behind the ACL checks of its API (broker/security/api_authorization.py, imported by a
    broker with an authorizer only)."""
    from minikafka.broker.security.api_authorization import handle_authorized as check_then_handle

    async def handle_authorized(ctx: RequestContext, request: Any) -> Any:
        return await check_then_handle(ctx, authorizer, request, handle)

    return handle_authorized


async def _handle_with_fault(hit: FaultHit, handle: Callable[[RequestContext, Any], Any], ctx: RequestContext,
                             request: Any) -> Any:
    """Apply a fault rule: delay, drop before, error (on the matched partitions only), drop after, throttle.

    What the handler raises propagates to dispatch, which answers it as for any request."""
    rule = hit.rule
    ctx.log.info("fault injected", fault_id=rule.id, error=rule.error.name if rule.error is not None else None,
                 delay_ms=rule.delay_ms, drop=rule.drop, throttle_ms=rule.throttle_ms)
    if rule.delay_ms:
        await asyncio.sleep(rule.delay_ms / 1000)
    if rule.drop == DROP_BEFORE:
        raise CloseConnection(f"fault {rule.id}: connection dropped before handling", bad_input=False)
    if rule.error is None:
        response = await handle(ctx, request)
    elif ctx.api_key == ApiKey.PRODUCE and getattr(request, "acks", None) == 0:
        # Kafka's answer to a failed acks=0 produce: no response, the connection closed.
        raise CloseConnection(f"fault {rule.id}: acks=0 produce failed with {rule.error.name}", bad_input=False)
    elif hit.split is None:
        response = error_response(request, rule.error, None)
    else:
        injected = partition_errors(hit.split, rule.error)
        if injected is None:
            response = error_response(request, rule.error, None)
        elif hit.split.rest is None:
            response = injected
        else:
            response = merge_responses(await handle(ctx, hit.split.rest), injected)
    if rule.drop == DROP_AFTER:
        raise CloseConnection(f"fault {rule.id}: connection dropped after handling", bad_input=False)
    if response is not None and rule.throttle_ms is not None:
        response = with_throttle(response, rule.throttle_ms)
        ctx.mute_ms = rule.throttle_ms
    return response
