"""The two places a request can be watched from, for the flight recorder, pcap captures and metrics.

- Exchange observers see each request/response pair after dispatch (broker/dispatch.py): decoded
  request and response bodies, sizes, latency and how it ended. They run on the event loop, inline,
  so they must be quick and must not raise; an observer that raises is logged and removed rather than
  allowed to fail the request it watched.
- Wire taps see the raw bytes of every frame in both directions (broker/connection.py), with the
  connection's addresses, for a byte-exact capture.

With nothing registered, the cost on the request path is one truth test of an empty list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

_log = structlog.get_logger("minikafka.observe")

# How an exchange ended.
ANSWERED = "answered"
NO_RESPONSE = "no_response"  # acks=0 produce: Kafka sends nothing
CLOSED = "closed"  # the broker closed the connection instead of answering


@dataclass(slots=True)
class Exchange:
    time_ms: int  # the broker clock's wall time when the request was taken up
    node_id: int
    connection_id: int
    peer: str
    client_id: str | None
    api_key: int
    api_version: int
    correlation_id: int
    latency_ns: int
    request_bytes: int  # the request frame, without its 4-byte size prefix
    response_bytes: int  # the response frame sent, without its size prefix; 0 when none
    outcome: str
    request: Any = None  # the decoded kio request body; None when it did not decode
    response: Any = None  # the kio response body sent; None when none was
    close_reason: str | None = None


ExchangeObserver = Callable[[Exchange], None]


class WireTap(Protocol):
    def connection_opened(self, connection_id: int, client: tuple[str, int], broker: tuple[str, int]) -> None: ...

    def frame(self, connection_id: int, from_client: bool, data: bytes) -> None:
        """`data` is one whole frame including its 4-byte size prefix."""

    def connection_closed(self, connection_id: int) -> None: ...


@dataclass(slots=True)
class Observers:
    exchanges: list[ExchangeObserver] = field(default_factory=list)
    taps: list[WireTap] = field(default_factory=list)

    def notify(self, exchange: Exchange) -> None:
        for observer in tuple(self.exchanges):
            try:
                observer(exchange)
            except Exception:
                _log.exception("exchange observer failed; removed", observer=repr(observer))
                self.exchanges.remove(observer)

    def tap(self, method: str, *args: Any) -> None:
        for wire_tap in tuple(self.taps):
            try:
                getattr(wire_tap, method)(*args)
            except Exception:
                _log.exception("wire tap failed; removed", tap=repr(wire_tap))
                self.taps.remove(wire_tap)
