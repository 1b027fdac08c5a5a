"""The interfaces the request path calls: observers, the fault table, crash points and counters.

The wire (connection, dispatch) calls these; what implements them lives in the rooms above it
(broker/observe/ for the recorder, pcap and metrics, broker/control/ for fault rules and crash
points) and is plugged in by the composition root (broker/server.py). So the wire never imports the
tools that watch or steer it.

The two places a request can be watched from, for the flight recorder, pcap captures and metrics:

- Exchange observers see each request/response pair after dispatch (broker/wire/dispatch.py): decoded
  request and response bodies, sizes, latency and how it ended. They run on the event loop, inline,
  so they must be quick and must not raise; an observer that raises is logged and removed rather than
  allowed to fail the request it watched.
- Wire taps see the raw bytes of every frame in both directions (broker/wire/connection.py), with the
  connection's addresses, for a byte-exact capture.

With nothing registered, the cost on the request path is one truth test of an empty list.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.split import Split, TopicResolver

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


@dataclass(slots=True)
class HttpExchange:
    """One request to an HTTP service the broker serves beside Kafka (the schema registry), for the flight
    recorder; `service` is what its trace entries show as "api" ("SchemaRegistry")."""

    service: str
    time_ms: int
    peer: str
    method: str
    path: str
    route: str  # the path without its subject, version or id: "GET /subjects/{s}/versions"
    status: int
    error_code: int | None  # the Confluent error code of an error answer
    latency_ns: int
    request_id: int = 0  # numbered by the flight recorder as it takes them


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


# --- fault rules (implemented by broker/control/faults.py) ---------------------------------------------

DROP_BEFORE = "before"
DROP_AFTER = "after"


class FaultAction(Protocol):
    """What a matched fault rule does to the request it matched."""

    @property
    def id(self) -> int: ...
    @property
    def error(self) -> ErrorCode | None: ...
    @property
    def delay_ms(self) -> int: ...
    @property
    def drop(self) -> str | None: ...
    @property
    def throttle_ms(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class FaultHit:
    rule: FaultAction
    split: Split | None  # set when the rule has a topic filter


class FaultRules(Protocol):
    """The table dispatch consults on every request; empty `rules` costs one truth test."""

    resolve_topic: TopicResolver | None

    @property
    def rules(self) -> Mapping[int, Any]: ...

    def take(self, api_key: int, client_id: str | None, request: Any) -> FaultHit | None: ...


# --- crash points (implemented by broker/control/crash_points.py) -------------------------------------

class CrashPointSwitch(Protocol):
    kills_process: bool

    def reach(self, point: str) -> None: ...


# --- counters (implemented by broker/observe/metrics.py) ----------------------------------------------

class Counters(Protocol):
    open_connections: Callable[[], int] | None

    def count_unexpected(self, api: str) -> None: ...

    def count_closed_for_bad_input(self, reason: str) -> None: ...

    def observe(self, exchange: Exchange) -> None: ...


# --- the schema registry (implemented by broker/registry/service.py) -----------------------------------

class SchemaRegistryControl(Protocol):
    """What the control plane and the observers use of the schema registry."""

    @property
    def url(self) -> str: ...

    def reset(self) -> None: ...

    def snapshot(self) -> dict[str, Any]: ...


# --- the flight recorder (implemented by broker/observe/recorder.py) ----------------------------------

class Recorder(Protocol):
    def observe(self, exchange: Exchange) -> None: ...

    def observe_http(self, exchange: HttpExchange) -> None: ...

    def reset(self) -> None: ...

    def close(self) -> None: ...
