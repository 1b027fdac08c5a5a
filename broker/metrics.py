"""A broker's own counts, kept as plain integers on the request path; broker/prometheus.py turns them
(and the state it reads at scrape time) into Prometheus metrics for GET /metrics.

`BrokerMetrics.observe` is an exchange observer (broker/observe.py), installed on every broker by
broker/debugging.py: per API it counts requests (by version), the error codes in the responses, the
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

from minikafka.protocol.api_keys import ApiKey, kio_range
from minikafka.protocol.errors import ErrorCode

from .observe import ANSWERED, Exchange

# Upper bounds (ms) of the latency histogram's buckets; a last one, +Inf, follows. From a tenth of a
# millisecond (a Metadata answered from memory) to 30 s (Kafka clients' request.timeout.ms), so a
# Fetch held for fetch.max.wait.ms and a request delayed by an injected fault both land in a bucket.
LATENCY_BUCKETS_MS: tuple[float, ...] = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000,
                                         10000, 30000)
UNKNOWN_API = "Unknown"
UNSUPPORTED_VERSION = "unsupported"
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

    __slots__ = ("bytes_in", "bytes_out", "errors", "latency_buckets", "latency_sum_ms", "name", "requests")

    def __init__(self, name: str) -> None:
        self.name = name
        self.requests: dict[str, int] = {}  # version label -> requests
        self.errors: dict[int, int] = {}  # error code -> occurrences in responses
        self.latency_buckets = [0] * (len(LATENCY_BUCKETS_MS) + 1)  # not cumulative; the last is +Inf
        self.latency_sum_ms = 0.0
        self.bytes_in = 0
        self.bytes_out = 0


class _Slot:
    """Where one (api key, version) pair is counted, looked up once per request."""

    __slots__ = ("stats", "version")

    def __init__(self, stats: ApiStats, version: str) -> None:
        self.stats = stats
        self.version = version


# A response class -> where its error codes are: (field, None) for an error code field, (field, plan of
# the nested entity or of each element) for an entity or an array of entities holding error codes.
_Plan = tuple[tuple[str, "_Plan | None"], ...]
_plans: dict[type, _Plan] = {}


def _entity_class(hint: Any) -> type | None:
    """The entity class a field holds, itself or as the elements of an array; None for a plain value."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and args:
        hint = args[0]
    is_array = typing.get_origin(hint) is tuple
    inner = typing.get_args(hint)[0] if is_array else hint
    return inner if isinstance(inner, type) and dataclasses.is_dataclass(inner) else None


def _plan(cls: type) -> _Plan:
    found = _plans.get(cls)
    if found is not None:
        return found
    hints = typing.get_type_hints(cls)
    steps: list[tuple[str, _Plan | None]] = []
    for f in dataclasses.fields(cls):
        if f.metadata.get("kafka_type") == "error_code":
            steps.append((f.name, None))
            continue
        element = _entity_class(hints[f.name])
        if element is not None:
            nested = _plan(element)
            if nested:
                steps.append((f.name, nested))
    plan = tuple(steps)
    _plans[cls] = plan
    return plan


def _count_codes(entity: Any, plan: _Plan, counts: dict[int, int]) -> None:
    for name, nested in plan:
        value = getattr(entity, name)
        if nested is None:
            counts[value] = counts.get(value, 0) + 1
        elif isinstance(value, tuple):
            for element in value:
                _count_codes(element, nested, counts)
        elif value is not None:
            _count_codes(value, nested, counts)


def count_error_codes(response: Any, counts: dict[int, int]) -> None:
    """Add every error code in a kio response to `counts`, NONE included, as Kafka's
    AbstractResponse.errorCounts feeds its ErrorsPerSec: a Produce to three partitions counts three."""
    plan = _plans.get(type(response))
    if plan is None:
        plan = _plan(type(response))
    if plan:
        _count_codes(response, plan, counts)


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
    # The Prometheus registry of this broker, made at the first scrape (broker/prometheus.py).
    registry: Any = None
    _slots: dict[tuple[int, int], _Slot] = field(default_factory=dict)

    def count_unexpected(self, api: str) -> None:
        self.unexpected_errors[api] += 1

    def count_closed_for_bad_input(self, reason: str) -> None:
        self.closed_for_bad_input[reason] += 1

    def observe(self, exchange: Exchange) -> None:
        """The exchange observer: count one request/response pair."""
        slot = self._slots.get((exchange.api_key, exchange.api_version))
        if slot is None:
            slot = self._slot(exchange.api_key, exchange.api_version)
        stats = slot.stats
        stats.requests[slot.version] = stats.requests.get(slot.version, 0) + 1
        latency_ms = exchange.latency_ns / 1e6
        stats.latency_buckets[bisect_left(LATENCY_BUCKETS_MS, latency_ms)] += 1
        stats.latency_sum_ms += latency_ms
        stats.bytes_in += exchange.request_bytes + _SIZE_PREFIX
        if exchange.outcome == ANSWERED:
            stats.bytes_out += exchange.response_bytes + _SIZE_PREFIX
            if exchange.response is not None:
                count_error_codes(exchange.response, stats.errors)

    def _slot(self, api_key: int, api_version: int) -> _Slot:
        name = kafka_request_name(api_key)
        stats = self.apis.get(name)
        if stats is None:
            stats = self.apis[name] = ApiStats(name)
        if name == UNKNOWN_API or api_version not in kio_range(api_key):
            # Not cached: the key space a client can send is unbounded, the label values are not.
            return _Slot(stats, UNSUPPORTED_VERSION)
        slot = self._slots[(api_key, api_version)] = _Slot(stats, str(api_version))
        return slot
