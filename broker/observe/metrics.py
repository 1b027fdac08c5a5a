"""A broker's own counts, kept as plain integers on the request path; broker/observe/prometheus.py turns them
(and the state it reads at scrape time) into Prometheus metrics for GET /metrics.

`BrokerMetrics.observe` is an exchange observer (broker/wire/hooks.py), installed on every broker by
broker/observe/debugging.py: per API it counts requests (by version), the error codes in the responses, the
latency in histogram buckets and the bytes in both directions. prometheus_client is not used here:
importing it costs ~0.1 s and its labelled children take a lock per increment, so the request path
only adds to integers and the exposition module builds metric families from them when scraped.

Label values are bounded whatever a client sends: an API key minikafka does not serve is counted as
request "Unknown", and a version kio has no schema for as version "unsupported".
"""

from __future__ import annotations

import dataclasses
import types
import typing
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from minikafka.broker.wire.hooks import ANSWERED, Exchange
from minikafka.broker.wire.services import BrokerServices
from minikafka.protocol.api_keys import ApiKey, kio_range
from minikafka.protocol.errors import ErrorCode

# Upper bounds (ms) of the latency histogram's buckets; a last one, +Inf, follows. From a tenth of a
# millisecond (a Metadata answered from memory) to 30 s (Kafka clients' request.timeout.ms), so a
# Fetch held for fetch.max.wait.ms and a request delayed by an injected fault both land in a bucket.
LATENCY_BUCKETS_MS: tuple[float, ...] = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000,
                                         10000, 30000)
UNKNOWN_API = "Unknown"
UNSUPPORTED_VERSION = "unsupported"
# The same bounds in nanoseconds: a request's latency is compared as the integer it was measured as.
_LATENCY_BUCKETS_NS: tuple[int, ...] = tuple(round(bound * 1_000_000) for bound in LATENCY_BUCKETS_MS)
_SIZE_PREFIX = 4  # bytes counted as on the wire: each frame with its size prefix

_ERROR_NAMES: dict[int, str] = {int(code): code.name.upper() for code in ErrorCode}


def kafka_request_name(api_key: int) -> str:
    """The `request` tag Kafka's RequestMetrics use: "Produce", "FindCoordinator", and "FetchConsumer" for
    a consumer's Fetch (the only Fetch a single broker gets; Kafka's followers would be "FetchFollower")."""
    if api_key == ApiKey.FETCH:
        return "FetchConsumer"
    try:
        return "".join(part.capitalize() for part in ApiKey(api_key).name.split("_"))
    except ValueError:
        return UNKNOWN_API


def error_name(code: int) -> str:
    """Kafka's name of an error code (NOT_LEADER_OR_FOLLOWER), or the number for one kio does not know."""
    return _ERROR_NAMES.get(code) or str(code)


class ApiStats:
    """The counts of one API (one `request` label)."""

    __slots__ = ("_versions", "bytes_in", "bytes_out", "errors", "latency_buckets", "latency_sum_ns", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._versions: dict[str, _Slot] = {}  # version label -> its counter
        self.errors: dict[int, int] = {}  # error code -> occurrences in responses
        self.latency_buckets = [0] * (len(LATENCY_BUCKETS_MS) + 1)  # not cumulative; the last is +Inf
        self.latency_sum_ns = 0
        self.bytes_in = 0
        self.bytes_out = 0

    def slot(self, version: str) -> _Slot:
        found = self._versions.get(version)
        if found is None:
            found = self._versions[version] = _Slot(self, version)
        return found

    @property
    def requests(self) -> dict[str, int]:
        """Version label -> requests."""
        return {version: slot.requests for version, slot in self._versions.items()}

    @property
    def latency_sum_ms(self) -> float:
        return self.latency_sum_ns / 1e6


class _Slot:
    """Where one (api key, version) pair is counted, looked up once per request."""

    __slots__ = ("requests", "stats", "version")

    def __init__(self, stats: ApiStats, version: str) -> None:
        self.stats = stats
        self.version = version
        self.requests = 0


# A response class -> where its error codes are: (field, None, False) for an error code field, (field, plan of
# the nested entity, is an array) for an entity or an array of entities holding error codes.
_Plan = tuple[tuple[str, "_Plan | None", bool], ...]
_plans: dict[type, _Plan] = {}
_ErrorCounter = Callable[[Any, dict[int, int]], None]
# A response class -> a function counting its error codes, compiled from its plan (see _compile).
_counters: dict[type, _ErrorCounter] = {}


def _entity_class(hint: Any) -> tuple[type | None, bool]:
    """The entity class a field holds, itself or as the elements of an array (None for a plain value), and
    whether it is an array."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and args:
        hint = args[0]
    is_array = typing.get_origin(hint) is tuple
    inner = typing.get_args(hint)[0] if is_array else hint
    return (inner if isinstance(inner, type) and dataclasses.is_dataclass(inner) else None), is_array


def _plan(cls: type) -> _Plan:
    found = _plans.get(cls)
    if found is not None:
        return found
    hints = typing.get_type_hints(cls)
    steps: list[tuple[str, _Plan | None, bool]] = []
    for f in dataclasses.fields(cls):
        if f.metadata.get("kafka_type") == "error_code":
            steps.append((f.name, None, False))
            continue
        element, is_array = _entity_class(hints[f.name])
        if element is not None:
            nested = _plan(element)
            if nested:
                steps.append((f.name, nested, is_array))
    plan = tuple(steps)
    _plans[cls] = plan
    return plan


def _compile(plan: _Plan) -> _ErrorCounter:
    """A function adding the error codes `plan` locates to a dict, as straight-line code with one loop per
    array level. Every response of every request goes through it, and a generic walk (a call per entity, a
    getattr by name per field) costs several times more; the names are kio's dataclass field names."""
    lines = ["def count(v0, counts):"]

    def emit(steps: _Plan, var: str, depth: int) -> None:
        indent = "    " * depth
        for name, nested, is_array in steps:
            if nested is None:
                lines.append(f"{indent}code = {var}.{name}")
                lines.append(f"{indent}counts[code] = counts.get(code, 0) + 1")
                continue
            inner = f"v{depth}"
            if is_array:
                lines.append(f"{indent}for {inner} in {var}.{name} or ():")
            else:
                lines.append(f"{indent}{inner} = {var}.{name}")
                lines.append(f"{indent}if {inner} is not None:")
            emit(nested, inner, depth + 1)

    emit(plan, "v0", 1)
    if len(lines) == 1:
        lines.append("    pass")
    namespace: dict[str, Any] = {}
    exec("\n".join(lines), namespace)  # the source is built above from dataclass field names only
    counter: _ErrorCounter = namespace["count"]
    return counter


def prepare_error_counter(response_cls: type) -> None:
    """Compile now what the first answer of this class would (a process that forks brokers: the testing
    kit's fork server, whose children then find it compiled)."""
    _counter(response_cls)


def _counter(cls: type) -> _ErrorCounter:
    counter = _counters.get(cls)
    if counter is None:
        counter = _counters[cls] = _compile(_plan(cls))
    return counter


def count_error_codes(response: Any, counts: dict[int, int]) -> None:
    """Add every error code in a kio response to `counts`, NONE included, as Kafka's
    AbstractResponse.errorCounts feeds its ErrorsPerSec: a Produce to three partitions counts three."""
    counter = _counters.get(type(response))
    if counter is None:
        counter = _counter(type(response))
    counter(response, counts)


# Connections whose requests are counted one by one (ConnectionStats), newest first kept: closed ones age out.
MAX_TRACKED_CONNECTIONS = 1024


class ConnectionStats:
    """What the broker saw of one connection: its requests per API, their latency and bytes. Shown beside the
    metrics the client itself pushes (broker/observe/client_telemetry.py)."""

    __slots__ = ("apis", "bytes_in", "bytes_out", "client_id", "connection_id", "first_ms", "last_ms", "peer")

    def __init__(self, exchange: Exchange) -> None:
        self.connection_id = exchange.connection_id
        self.peer = exchange.peer
        self.client_id = exchange.client_id
        self.first_ms = exchange.time_ms
        self.last_ms = exchange.time_ms
        self.bytes_in = 0
        self.bytes_out = 0
        self.apis: dict[int, list[int]] = {}  # api key -> [requests, latency sum ns, latency max ns]

    def add(self, exchange: Exchange) -> None:
        self.last_ms = exchange.time_ms
        self.client_id = exchange.client_id
        self.bytes_in += exchange.request_bytes + _SIZE_PREFIX
        self.bytes_out += exchange.response_bytes + _SIZE_PREFIX if exchange.outcome == ANSWERED else 0
        counts = self.apis.get(exchange.api_key)
        if counts is None:
            counts = self.apis[exchange.api_key] = [0, 0, 0]
        counts[0] += 1
        counts[1] += exchange.latency_ns
        if exchange.latency_ns > counts[2]:
            counts[2] = exchange.latency_ns


@dataclass(slots=True)
class BrokerMetrics:
    # Requests (or partitions of one) answered UNKNOWN_SERVER_ERROR because a handler raised
    # something unexpected, keyed by API name as the logs show it (e.g. "PRODUCE").
    unexpected_errors: Counter[str] = field(default_factory=Counter)

    # Connections the broker closed because of what the client sent, keyed by why: "frame size" (a size
    # prefix outside (0, socket.request.max.bytes]), "invalid request" (bytes that do not decode) or
    # "unanswerable request" (unknown API or version, or no response that can be encoded).
    closed_for_bad_input: Counter[str] = field(default_factory=Counter)

    # Per `request` label, filled by `observe`.
    apis: dict[str, ApiStats] = field(default_factory=dict)
    # The server's count of open connections; set by BrokerServer.start (None: not served yet).
    open_connections: Callable[[], int] | None = None
    # The Prometheus registry of this broker, made at the first scrape (broker/observe/prometheus.py).
    registry: Any = None
    # Per connection id, the MAX_TRACKED_CONNECTIONS most recently opened.
    connections: dict[int, ConnectionStats] = field(default_factory=dict)
    _slots: dict[int, _Slot] = field(default_factory=dict)

    def count_unexpected(self, api: str) -> None:
        self.unexpected_errors[api] += 1

    def count_closed_for_bad_input(self, reason: str) -> None:
        self.closed_for_bad_input[reason] += 1

    def observe(self, exchange: Exchange) -> None:
        """The exchange observer: count one request/response pair."""
        slot = self._slots.get((exchange.api_key << 16) + exchange.api_version)
        if slot is None:
            slot = self._slot(exchange.api_key, exchange.api_version)
        slot.requests += 1
        stats = slot.stats
        latency_ns = exchange.latency_ns
        stats.latency_buckets[bisect_left(_LATENCY_BUCKETS_NS, latency_ns)] += 1
        stats.latency_sum_ns += latency_ns
        stats.bytes_in += exchange.request_bytes + _SIZE_PREFIX
        if exchange.outcome == ANSWERED:
            stats.bytes_out += exchange.response_bytes + _SIZE_PREFIX
            response = exchange.response
            if response is not None:
                counter = _counters.get(type(response))
                if counter is None:
                    counter = _counter(type(response))
                counter(response, stats.errors)
        connection = self.connections.get(exchange.connection_id)
        if connection is None:
            connection = self._track(exchange)
        connection.add(exchange)

    def _track(self, exchange: Exchange) -> ConnectionStats:
        connection = self.connections[exchange.connection_id] = ConnectionStats(exchange)
        if len(self.connections) > MAX_TRACKED_CONNECTIONS:
            del self.connections[next(iter(self.connections))]  # the oldest opened: most likely closed by now
        return connection

    def _slot(self, api_key: int, api_version: int) -> _Slot:
        name = kafka_request_name(api_key)
        stats = self.apis.get(name)
        if stats is None:
            stats = self.apis[name] = ApiStats(name)
        if name == UNKNOWN_API or api_version not in kio_range(api_key):
            # Not cached: the key space a client can send is unbounded, the label values are not.
            return stats.slot(UNSUPPORTED_VERSION)
        # Both are int16 on the wire, so (key << 16) + version is one int per pair: no tuple per request.
        slot = self._slots[(api_key << 16) + api_version] = stats.slot(str(api_version))
        return slot


def broker_metrics(services: BrokerServices) -> BrokerMetrics:
    """The node's counters in full, for their readers (the request path sees only the Counters hook)."""
    metrics = services.metrics
    assert isinstance(metrics, BrokerMetrics), f"counters hook is a {type(metrics).__name__}"
    return metrics
