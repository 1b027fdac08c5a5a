"""The flight recorder over the admin listener (broker/control/admin_http.py): GET /trace and GET /trace/stream.

    GET /trace?limit=N&api=A&client_id=C&topic=T   {"exchanges": [entry, ...]}, oldest first
    GET /trace/stream?api=A&client_id=C&topic=T    server-sent events: one `data: {entry}` per exchange

Entries are broker/observe/recorder.py's. A stream starts with the next exchange (read GET /trace for what came
before), sends a `: keepalive` comment when nothing happened for KEEPALIVE_S, and an `event: dropped` with
the count when the reader fell more than the subscription's queue behind. It ends when the client goes
(its end of the connection closes, or a write is not taken within SEND_TIMEOUT_S), or the broker stops.
At most MAX_STREAMS streams run at once; each also holds one of the admin listener's connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from minikafka.broker.observe.recorder import FlightRecorder, TraceClosed, TraceSubscription

MAX_STREAMS = 8
KEEPALIVE_S = 15.0
SEND_TIMEOUT_S = 30.0


class TraceQueryError(ValueError):
    """A query parameter that cannot be used (answered 400)."""


def _filter(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[0] or None if values else None


def recent_exchanges(recorder: FlightRecorder, query: dict[str, list[str]]) -> dict[str, Any]:
    """GET /trace: the newest `limit` (default: all the ring holds) exchanges passing the filters."""
    limit: int | None = None
    if query.get("limit"):
        text = query["limit"][0]
        if not text.isdigit() or int(text) < 1:
            raise TraceQueryError(f"query parameter limit: expected a positive integer, got {text[:20]!r}")
        limit = int(text)
    try:
        return {"exchanges": recorder.recent(limit, api=_filter(query, "api"), client_id=_filter(query, "client_id"),
                                             topic=_filter(query, "topic"))}
    except ValueError as exc:
        raise TraceQueryError(str(exc)) from None


def open_stream(recorder: FlightRecorder, query: dict[str, list[str]], running: int) -> TraceSubscription:
    """The subscription a stream reads; TraceQueryError for a bad filter. `running`: streams already open."""
    if running >= MAX_STREAMS:
        raise OverflowError(f"more than {MAX_STREAMS} trace streams")
    try:
        return recorder.subscribe(api=_filter(query, "api"), client_id=_filter(query, "client_id"),
                                  topic=_filter(query, "topic"))
    except ValueError as exc:
        raise TraceQueryError(str(exc)) from None


async def _send(writer: asyncio.StreamWriter, data: bytes) -> None:
    writer.write(data)
    async with asyncio.timeout(SEND_TIMEOUT_S):
        await writer.drain()


async def stream(subscription: TraceSubscription, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
    """Serve one event stream until the client goes or the subscription is closed (the broker stops)."""
    # A stream's client sends nothing after its request: whatever read() returns means it is done.
    client_gone: asyncio.Future[Any] = asyncio.ensure_future(reader.read(1))
    next_entry: asyncio.Future[Any] | None = None
    dropped = 0
    try:
        await _send(writer, b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                            b"Connection: close\r\n\r\n: minikafka flight recorder\n\n")
        while not subscription.closed and not client_gone.done():
            if next_entry is None:
                next_entry = asyncio.ensure_future(subscription.get())
            done, _pending = await asyncio.wait({next_entry, client_gone}, timeout=KEEPALIVE_S,
                                                return_when=asyncio.FIRST_COMPLETED)
            if client_gone in done:
                break
            if next_entry not in done:
                await _send(writer, b": keepalive\n\n")
                continue
            try:
                entry = next_entry.result()
            except TraceClosed:
                break
            next_entry = None
            payload = b"data: " + json.dumps(entry, separators=(",", ":")).encode() + b"\n\n"
            if subscription.dropped != dropped:
                dropped = subscription.dropped
                payload = b"event: dropped\ndata: " + json.dumps({"dropped": dropped}).encode() + b"\n\n" + payload
            await _send(writer, payload)
    except (ConnectionError, TimeoutError):
        pass  # the client stopped reading or went away
    finally:
        subscription.close()
        for task in (next_entry, client_gone):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, ConnectionError, TraceClosed):
                    await task
