"""The flight recorder: every request/response pair as one JSON object, kept in a ring and traced.

An entry (one line of `--trace FILE`, one element of GET /trace, one event of GET /trace/stream):

    {"time": "2026-11-23T16:49:36.123Z", "time_ms": ..., "node_id": 0, "connection_id": 3,
     "peer": "127.0.0.1:51234", "client_id": "rdkafka", "api": "EndTxn", "api_key": 26, "api_version": 3,
     "correlation_id": 7, "latency_ms": 0.412, "request_bytes": 41, "response_bytes": 10,
     "outcome": "answered" | "no_response" | "closed", "close_reason": "..." (closed only),
     "topics": [...], "errors": ["NOT_COORDINATOR", ...], "request": {...}, "response": {...}}

A request to the schema registry (broker/registry/) is an entry of its own, told apart by its "api":

    {"time": ..., "time_ms": ..., "api": "SchemaRegistry", "request_id": 12, "peer": "127.0.0.1:51240",
     "method": "GET", "path": "/subjects/orders-value/versions/1", "route": "GET /subjects/{s}/versions/{v}",
     "status": 404, "error_code": 40401, "latency_ms": 0.21, "topics": [], "errors": ["40401"]}

"request_id" counts the recorder's HTTP entries (they have no connection or correlation id). The api filter
takes "SchemaRegistry"; a client id or topic filter leaves these entries out.

A PushTelemetry exchange (KIP-714) also has "telemetry": the pushed OpenTelemetry metrics decoded,
{"resource": {...}, "points": N, "metrics": [{"name", "value", "attributes"}, ...]} (the first 200), or
{"error": "INVALID_RECORD", "reason": "..."} for a payload that does not decode.

The bodies are rendered by protocol/render.py (error codes by name, record batches summarised from
their headers). "topics" lists every topic the request or response names; "errors" every error code
other than NONE in the response.

Cost: the ring is always on (minikafka.trace.ring.size, default 1000), so observing must be cheap.
An exchange is kept as the Exchange itself and rendered only when asked for (recent(), a subscriber's
get(), the trace file). Bodies that hold record batches (Produce requests, Fetch responses) are kept
whole too, their record bytes included, until the ring holds RING_MAX_RECORD_BYTES of them; past that
the oldest are reduced to snapshots, their field values with each batch cut to a copy of its 61-byte
header (at most 64 batches an exchange; the rest are counted). Reducing costs about as much as a small
request, so it is paid only under a load of big batches, where each exchange it reduces moved at least
kilobytes anyway; with small batches the ring's count evicts them first and nothing is reduced. The budget
is small (2 MiB) because the record buffers the ring keeps alive push every new request's buffers into
memory that is out of the CPU's caches: with 32 MiB kept, a 1 MiB read from the page cache took 1.5 to 3
times as long (timed alone), and the broker spent about a third more CPU per fetched message than with
2 MiB (bench/bench.py consume, alternating rounds). A Fetch answer's record sets sent from the log files
are kept as those file slices (protocol/regions.py); when their segment is closed or deleted (a topic
deleted, retention, compaction) the exchange is reduced at once, so the ring never keeps a deleted
file's descriptor and space. Subscribers (the inspector's live view) get the reduced form at once.
bench/trace_cost.py measures it.

Filters: the trace file writes only the exchanges the configured filters (minikafka.trace.apis,
.client.ids, .topics) let through; the ring keeps every exchange, and recent() and subscribe() take
their own api / client_id / topic filters. `--trace-records` decodes records in the trace file only:
the ring and its readers always get batch summaries, so memory stays bounded.

Interface used by the admin listener and the inspector:
- `observe(exchange)` is the exchange observer (broker/wire/hooks.py);
- `recent(limit, api=, client_id=, topic=)` returns the newest exchanges, oldest first;
- `subscribe(api=, client_id=, topic=)` returns a `TraceSubscription` whose `get()` awaits the next
  matching exchange (and raises TraceClosed once the subscription or the recorder is closed).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import functools
import json
import operator
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from typing import IO, Any

import structlog
from minikafka.broker.config.config import HTTP_TRACE_APIS
from minikafka.broker.wire.hooks import CLOSED, Exchange, HttpExchange
from minikafka.broker.wire.services import BrokerServices
from minikafka.protocol.api_keys import ApiKey, api_key_by_name, kafka_api_name
from minikafka.protocol.render import Walk, has_records, plan_of, regions_of, render_body, snapshot

_log = structlog.get_logger("minikafka.recorder")
_SUBSCRIBER_QUEUE = 1000
# The ring holds at most this many bytes of requests and responses as they were on the wire, record batches
# not counted (they are not kept): minikafka.trace.ring.size bounds the count, this the memory when the
# exchanges are large (Metadata for thousands of topics). The kept objects take a small multiple of it.
RING_MAX_WIRE_BYTES = 64 * 1024 * 1024
# Wire bytes of exchanges kept whole with their record batches; past it the oldest are reduced to batch
# summaries (see the module docstring for why it is small). The newest is kept whole whatever its size.
RING_MAX_RECORD_BYTES = 2 * 1024 * 1024
_EXCHANGE_FIELDS = tuple(field.name for field in dataclasses.fields(Exchange))
_exchange_values = operator.attrgetter(*_EXCHANGE_FIELDS)  # in the order Exchange(*values) takes them
_REQUEST = _EXCHANGE_FIELDS.index("request")
_RESPONSE = _EXCHANGE_FIELDS.index("response")


class _Kept:
    """One exchange in the ring; `whole` while it still holds its record bytes."""

    __slots__ = ("__weakref__", "exchange", "weight", "whole")

    def __init__(self, exchange: Exchange | HttpExchange, weight: int, whole: bool) -> None:
        self.exchange = exchange
        self.weight = weight  # wire bytes counted against the ring's budgets
        self.whole = whole


class TraceClosed(Exception):
    """The subscription ended: closed by its reader, or the recorder was closed (the broker stops)."""


class TraceFilter:
    """Which exchanges a reader wants: any of `apis`, `client_ids`, `topics` (each empty: all)."""

    __slots__ = ("api_keys", "client_ids", "filters_apis", "services", "topics")

    def __init__(self, apis: tuple[str, ...] | list[str] = (), client_ids: tuple[str, ...] | list[str] = (),
                 topics: tuple[str, ...] | list[str] = ()) -> None:
        keys = set()
        self.services = HTTP_TRACE_APIS.intersection(apis)
        for name in apis:
            if name in HTTP_TRACE_APIS:
                continue
            key = api_key_by_name(name)
            if key is None:
                raise ValueError(f"unknown Kafka API {name!r} (use Kafka's names, such as Produce or EndTxn, "
                                 "or SchemaRegistry)")
            keys.add(key)
        self.api_keys = frozenset(keys)
        self.filters_apis = bool(self.api_keys or self.services)
        self.client_ids = frozenset(client_ids)
        self.topics = frozenset(topics)

    @classmethod
    def of(cls, api: str | None, client_id: str | None, topic: str | None) -> TraceFilter:
        return cls(() if api is None else (api,), () if client_id is None else (client_id,),
                   () if topic is None else (topic,))

    def passes_header(self, exchange: Exchange | HttpExchange) -> bool:
        """The checks that need no rendering."""
        if isinstance(exchange, HttpExchange):
            # HTTP requests carry no client id: a reader asking for one is not asking for them.
            return (not self.filters_apis or exchange.service in self.services) and not self.client_ids
        return ((not self.filters_apis or exchange.api_key in self.api_keys)
                and (not self.client_ids or exchange.client_id in self.client_ids))

    def passes_topics(self, topics: list[str]) -> bool:
        return not self.topics or not self.topics.isdisjoint(topics)


class TraceSubscription:
    """Exchanges as they happen; a subscriber that falls more than its queue behind loses the oldest."""

    def __init__(self, recorder: FlightRecorder, maxsize: int, wanted: TraceFilter) -> None:
        self._recorder = recorder
        self.wanted = wanted
        self.queue: asyncio.Queue[Exchange | HttpExchange | None] = asyncio.Queue(maxsize)
        self.dropped = 0
        self.closed = False

    def offer(self, exchange: Exchange | HttpExchange) -> None:
        if self.closed or not self.wanted.passes_header(exchange):
            return
        if self.queue.full():
            self.queue.get_nowait()
            self.dropped += 1
        self.queue.put_nowait(exchange)

    async def get(self) -> dict[str, Any]:
        """The next matching exchange, rendered; TraceClosed once closed."""
        # Each turn waits for one queued exchange: the topic filter needs the rendering, so one that fails
        # it is skipped here rather than in offer(); close() queues the sentinel that ends the wait.
        while not self.closed:
            exchange = await self.queue.get()
            if exchange is None:
                break
            entry = self._recorder.render(exchange)
            if self.wanted.passes_topics(entry["topics"]):
                return entry
        raise TraceClosed("trace subscription closed")

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._recorder.unsubscribe(self)
        if self.queue.full():
            self.queue.get_nowait()
        self.queue.put_nowait(None)  # wakes a reader waiting in get()


def iso_time(time_ms: int) -> str:
    seconds, millis = divmod(time_ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


class FlightRecorder:
    def __init__(self, *, ring_size: int, trace_file: str | None, decode_records: bool, apis: tuple[str, ...],
                 client_ids: tuple[str, ...], topics: tuple[str, ...],
                 resolve_topic: Callable[[uuid.UUID], str | None] | None = None) -> None:
        self.ring: collections.deque[_Kept] = collections.deque()
        self.ring_size = ring_size
        self._ring_bytes = 0  # wire bytes of the kept exchanges that hold no record bytes
        self._whole_bytes = 0  # wire bytes of those kept whole with their record batches
        self._whole: collections.deque[_Kept] = collections.deque()  # those, oldest first
        self._letting_go = threading.Lock()
        self.decode_records = decode_records
        self.file_filter = TraceFilter(apis, client_ids, topics)
        self.resolve_topic = resolve_topic
        self._subscribers: list[TraceSubscription] = []
        self._render_failures: set[str] = set()  # APIs whose trace line failed to render, logged once
        self._http_requests = 0  # HTTP entries so far, their "request_id"
        self._out: IO[str] | None = None
        if trace_file == "-":
            self._out = sys.stdout
        elif trace_file is not None:
            # Line-buffered: a client hanging now must be visible in the file now, and a crash loses nothing.
            self._out = open(trace_file, "a", encoding="utf-8", buffering=1)  # noqa: SIM115  # closed by close()

    # --- observing ------------------------------------------------------------------------------------

    def observe(self, exchange: Exchange) -> None:
        request, response = exchange.request, exchange.response
        holds_records = ((request is not None and has_records(type(request)))
                         or (response is not None and has_records(type(response))))
        if self.ring_size:
            self._keep(_Kept(exchange, exchange.request_bytes + exchange.response_bytes, holds_records))
        if self._subscribers:
            offered = self._stripped(exchange)[0] if holds_records else exchange
            for subscriber in tuple(self._subscribers):
                subscriber.offer(offered)
        if self._out is not None and self.file_filter.passes_header(exchange):
            self._trace(exchange)

    def observe_http(self, exchange: HttpExchange) -> None:
        """A request to an HTTP service of the broker (the schema registry): kept, offered and traced as
        exchanges are, but rendered as an entry of its own (see the module docstring)."""
        self._http_requests += 1
        exchange.request_id = self._http_requests
        if self.ring_size:
            self._keep(_Kept(exchange, len(exchange.path), False))
        for subscriber in tuple(self._subscribers):
            subscriber.offer(exchange)
        if self._out is not None and self.file_filter.passes_header(exchange):
            self._trace(exchange)

    def _keep(self, kept: _Kept) -> None:
        ring = self.ring
        ring.append(kept)
        if kept.whole:
            self._whole.append(kept)
            self._whole_bytes += kept.weight
            self._watch_regions(kept)
        else:
            self._ring_bytes += kept.weight
        while self._whole_bytes > RING_MAX_RECORD_BYTES and len(self._whole) > 1:
            oldest = self._whole.popleft()
            self._whole_bytes -= oldest.weight
            self._reduce(oldest)
        while len(ring) > self.ring_size or (self._ring_bytes > RING_MAX_WIRE_BYTES and len(ring) > 1):
            oldest = ring.popleft()
            if oldest.whole:
                # The oldest kept whole is the oldest in the ring that still is: both queues are in arrival order.
                self._whole.popleft()
                self._whole_bytes -= oldest.weight
            else:
                self._ring_bytes -= oldest.weight

    def _reduce(self, kept: _Kept) -> None:
        """Cut a whole exchange (already out of `_whole`) down to its batch summaries."""
        assert isinstance(kept.exchange, Exchange), "only Kafka exchanges hold record batches"
        kept.exchange, record_bytes = self._stripped(kept.exchange)
        kept.weight = max(kept.weight - record_bytes, 0)
        kept.whole = False
        self._ring_bytes += kept.weight

    def _watch_regions(self, kept: _Kept) -> None:
        """Ask the log segments behind the answer's file regions to say when they close: the newest exchange
        is kept whole whatever comes after it, and a Fetch from a topic deleted next would otherwise keep
        its segments' descriptors, and their disk space, until other record-holding exchanges came."""
        if not isinstance(kept.exchange, Exchange):
            return
        response = kept.exchange.response
        if response is None or not has_records(type(response)):
            return
        let_go: Callable[[], None] | None = None
        for region in regions_of(response, plan_of(type(response))):
            if let_go is None:
                let_go = functools.partial(self._let_go, weakref.ref(kept))  # the ring alone keeps it alive
            region.on_orphaned = let_go

    def _let_go(self, kept_ref: weakref.ref[_Kept]) -> None:
        """A segment holding some of this exchange's record bytes was closed: reduce it now (its headers are
        still readable through the regions), which ends the regions and closes the file."""
        # At shutdown the logs close on several threads at once (storage/manager.py), each telling its holders.
        with self._letting_go:
            kept = kept_ref()
            if kept is None or not kept.whole or not isinstance(kept.exchange, Exchange):
                return
            self._whole.remove(kept)
            self._whole_bytes -= kept.weight
            try:
                self._reduce(kept)
            except Exception:
                # The headers could not be read (a failing disk): the segment's close must go on regardless.
                _log.exception("fetch answer not summarised from its closing segment; its response is left out",
                               correlation_id=kept.exchange.correlation_id, connection_id=kept.exchange.connection_id)
                kept.exchange = dataclasses.replace(kept.exchange, response=None)
                kept.whole = False
                self._ring_bytes += kept.weight

    def _stripped(self, exchange: Exchange) -> tuple[Exchange, int]:
        """A copy whose record-holding bodies are snapshots without the record bytes (render.snapshot), and
        how many record bytes it let go of."""
        walk = Walk()  # one budget of batch summaries for the whole exchange
        request, response = exchange.request, exchange.response
        if request is not None and has_records(type(request)):
            request = snapshot(request, plan_of(type(request)), walk)
        if response is not None and has_records(type(response)):
            response = snapshot(response, plan_of(type(response)), walk)
        if request is exchange.request and response is exchange.response:
            return exchange, 0  # no batches in it after all
        values = list(_exchange_values(exchange))
        values[_REQUEST] = request
        values[_RESPONSE] = response
        return Exchange(*values), walk.records_bytes

    def _trace(self, exchange: Exchange | HttpExchange) -> None:
        try:
            entry = self.render(exchange, decode_records=self.decode_records)
        except Exception:
            # A body this renderer gets wrong must not cost the ring and the rest of the trace (an observer
            # that raises is removed); said once per API so a steady stream of them does not flood the log.
            api = exchange.service if isinstance(exchange, HttpExchange) else kafka_api_name(exchange.api_key)
            if api not in self._render_failures:
                self._render_failures.add(api)
                _log.exception("trace line could not be rendered; left out", api=api)
            return
        if not self.file_filter.passes_topics(entry["topics"]):
            return
        assert self._out is not None
        try:
            self._out.write(json.dumps(entry, separators=(",", ":")) + "\n")
        except OSError as exc:
            # A full disk must not fail requests; the trace stops, and says so once in the broker log.
            _log.error("trace file write failed; tracing stopped", error=str(exc))
            self._close_file()

    # --- rendering ------------------------------------------------------------------------------------

    def render(self, exchange: Exchange | HttpExchange, *, decode_records: bool = False) -> dict[str, Any]:
        """The JSON-ready entry of `exchange` (see the module docstring)."""
        if isinstance(exchange, HttpExchange):
            return render_http(exchange)
        topics: set[str] = set()
        errors: set[str] = set()
        request = self._body(exchange.request, topics, errors, decode_records)
        response_errors: set[str] = set()
        response = self._body(exchange.response, topics, response_errors, decode_records)
        entry: dict[str, Any] = {
            "time": iso_time(exchange.time_ms), "time_ms": exchange.time_ms, "node_id": exchange.node_id,
            "connection_id": exchange.connection_id, "peer": exchange.peer, "client_id": exchange.client_id,
            "api": kafka_api_name(exchange.api_key), "api_key": exchange.api_key,
            "api_version": exchange.api_version, "correlation_id": exchange.correlation_id,
            "latency_ms": round(exchange.latency_ns / 1e6, 3), "request_bytes": exchange.request_bytes,
            "response_bytes": exchange.response_bytes, "outcome": exchange.outcome,
        }
        if exchange.outcome == CLOSED:
            entry["close_reason"] = exchange.close_reason
        # Error codes in a request (WriteTxnMarkers has none; a few admin requests echo results) are not
        # what went wrong: "errors" is what the broker answered.
        entry["topics"] = sorted(topics)
        entry["errors"] = sorted(response_errors)
        entry["request"] = request
        entry["response"] = response
        if exchange.api_key == ApiKey.PUSH_TELEMETRY and exchange.request is not None:
            entry["telemetry"] = pushed_telemetry(exchange.request)
        return entry

    def _body(self, body: Any, topics: set[str], errors: set[str], decode_records: bool) -> dict[str, Any] | None:
        if body is None:
            return None
        walk = Walk(decode_records=decode_records, resolve_topic=self.resolve_topic)
        rendered = render_body(body, walk)
        topics |= walk.topics
        errors |= walk.errors
        return rendered

    # --- reading --------------------------------------------------------------------------------------

    def reset(self) -> None:
        """A broker reset: the ring emptied. The trace file and live /trace/stream subscribers go on, as
        they record what happens from now on."""
        with self._letting_go:
            self.ring.clear()
            self._whole.clear()
            self._ring_bytes = self._whole_bytes = 0

    def recent(self, limit: int | None = None, *, api: str | None = None, client_id: str | None = None,
               topic: str | None = None) -> list[dict[str, Any]]:
        """The newest `limit` (None: all kept) exchanges that pass the filters, oldest first.

        An unknown API name raises ValueError."""
        wanted = TraceFilter.of(api, client_id, topic)
        found: list[dict[str, Any]] = []
        for kept in reversed(tuple(self.ring)):
            exchange = kept.exchange
            if limit is not None and len(found) >= limit:
                break
            if not wanted.passes_header(exchange):
                continue
            entry = self.render(exchange)
            if wanted.passes_topics(entry["topics"]):
                found.append(entry)
        found.reverse()
        return found

    def subscribe(self, maxsize: int = _SUBSCRIBER_QUEUE, *, api: str | None = None, client_id: str | None = None,
                  topic: str | None = None) -> TraceSubscription:
        """Exchanges from now on that pass the filters; close() the subscription when done."""
        subscription = TraceSubscription(self, maxsize, TraceFilter.of(api, client_id, topic))
        self._subscribers.append(subscription)
        return subscription

    def unsubscribe(self, subscription: TraceSubscription) -> None:
        if subscription in self._subscribers:
            self._subscribers.remove(subscription)

    def close(self) -> None:
        """End every subscription and flush and close the trace file (the broker stops)."""
        for subscription in tuple(self._subscribers):
            subscription.close()
        self._close_file()

    def _close_file(self) -> None:
        out, self._out = self._out, None
        if out is None:
            return
        # Closing flushes what the failed write left buffered, which fails the same way on a full disk: that
        # error must not escape to the observers, which would drop the recorder and its ring with the file.
        with contextlib.suppress(OSError):
            if out is sys.stdout:
                out.flush()
            else:
                out.close()


def render_http(exchange: HttpExchange) -> dict[str, Any]:
    """The entry of a request to an HTTP service (see the module docstring)."""
    return {"time": iso_time(exchange.time_ms), "time_ms": exchange.time_ms, "api": exchange.service,
            "request_id": exchange.request_id, "peer": exchange.peer, "method": exchange.method,
            "path": exchange.path, "route": exchange.route, "status": exchange.status,
            "error_code": exchange.error_code, "latency_ms": round(exchange.latency_ns / 1e6, 3),
            "topics": [], "errors": [] if exchange.error_code is None else [str(exchange.error_code)]}


# A pushed payload is decoded for the trace up to this size, and this many of its points are shown.
TRACE_TELEMETRY_MAX_BYTES = 4 * 1024 * 1024
TRACE_TELEMETRY_POINTS = 200


def pushed_telemetry(request: Any) -> dict[str, Any]:
    """A PushTelemetry request's metrics, decoded (KIP-714): its points, or why they cannot be read."""
    from minikafka.protocol.errors import KafkaError
    from minikafka.protocol.telemetry import decode_metrics

    try:
        payload = decode_metrics(request.compression_type, bytes(request.metrics or b""), TRACE_TELEMETRY_MAX_BYTES)
    except KafkaError as exc:
        return {"error": exc.error_code.name.upper(), "reason": str(exc)}
    return {"resource": payload.resource, "points": len(payload.points),
            "metrics": [{"name": p.name, "value": p.value, "attributes": dict(p.attributes)}
                        for p in payload.points[:TRACE_TELEMETRY_POINTS]]}


def flight_recorder(services: BrokerServices) -> FlightRecorder | None:
    """The node's flight recorder, for its readers (dispatch only notifies observers); None when off."""
    recorder = services.recorder
    assert recorder is None or isinstance(recorder, FlightRecorder), f"recorder is a {type(recorder).__name__}"
    return recorder
