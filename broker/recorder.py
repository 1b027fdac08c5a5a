"""The flight recorder: every request/response pair as one JSON-ready dict, kept in a ring and traced.

Interface used by the admin listener and the inspector:
- `observe(exchange)` is the exchange observer (broker/observe.py);
- `recent(limit, api=, client_id=, topic=)` returns the newest exchanges, oldest first;
- `subscribe()` returns a `TraceSubscription` whose `get()` awaits the next exchange.
"""

from __future__ import annotations

import asyncio
import collections
import json
import sys
from typing import IO, Any

from minikafka.protocol.api_keys import api_name

from .observe import Exchange

_SUBSCRIBER_QUEUE = 1000


class TraceSubscription:
    """Exchanges as they happen; a subscriber that falls more than its queue behind loses the oldest."""

    def __init__(self, recorder: FlightRecorder, maxsize: int) -> None:
        self._recorder = recorder
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize)
        self.dropped = 0

    def offer(self, entry: dict[str, Any]) -> None:
        if self.queue.full():
            self.queue.get_nowait()
            self.dropped += 1
        self.queue.put_nowait(entry)

    async def get(self) -> dict[str, Any]:
        return await self.queue.get()

    def close(self) -> None:
        self._recorder.unsubscribe(self)


class FlightRecorder:
    def __init__(self, *, ring_size: int, trace_file: str | None, decode_records: bool, apis: tuple[str, ...],
                 client_ids: tuple[str, ...], topics: tuple[str, ...]) -> None:
        self.ring: collections.deque[dict[str, Any]] = collections.deque(maxlen=ring_size)
        self.decode_records = decode_records
        self.apis = frozenset(apis)
        self.client_ids = frozenset(client_ids)
        self.topics = frozenset(topics)
        self._subscribers: list[TraceSubscription] = []
        self._out: IO[str] | None = None
        if trace_file == "-":
            self._out = sys.stdout
        elif trace_file is not None:
            self._out = open(trace_file, "a", encoding="utf-8", buffering=1)  # noqa: SIM115  # closed by close()

    def observe(self, exchange: Exchange) -> None:
        entry = {
            "time_ms": exchange.time_ms, "connection_id": exchange.connection_id, "peer": exchange.peer,
            "client_id": exchange.client_id, "api": api_name(exchange.api_key), "api_version": exchange.api_version,
            "correlation_id": exchange.correlation_id, "latency_ms": round(exchange.latency_ns / 1e6, 3),
            "outcome": exchange.outcome,
        }
        self.ring.append(entry)
        for subscriber in tuple(self._subscribers):
            subscriber.offer(entry)
        if self._out is not None:
            self._out.write(json.dumps(entry, separators=(",", ":")) + "\n")

    def recent(self, limit: int | None = None, *, api: str | None = None, client_id: str | None = None,
               topic: str | None = None) -> list[dict[str, Any]]:
        entries = [e for e in self.ring if (api is None or e["api"] == api)
                   and (client_id is None or e["client_id"] == client_id)]
        return entries if limit is None else entries[-limit:]

    def subscribe(self, maxsize: int = _SUBSCRIBER_QUEUE) -> TraceSubscription:
        subscription = TraceSubscription(self, maxsize)
        self._subscribers.append(subscription)
        return subscription

    def unsubscribe(self, subscription: TraceSubscription) -> None:
        if subscription in self._subscribers:
            self._subscribers.remove(subscription)

    def close(self) -> None:
        if self._out is not None and self._out is not sys.stdout:
            self._out.close()
        self._out = None
