"""Client quota enforcement: Kafka's ClientQuotaManager, ClientRequestQuotaManager and
ControllerMutationQuotaManager, on the broker clock.

Each quota type keeps one sensor per (user, client-id) the applicable quota is kept for
(broker/config/client_quotas.py `applicable`): produce and fetch count bytes, request counts the
handler's time as a percentage of one thread (Kafka's request-time: nanoseconds * 100 / 1e9), each in
Kafka's Rate over `quota.window.num` samples of `quota.window.size.seconds`; controller mutations take
partitions from a token bucket refilled at the quota (burst: `controller.quota.window.num` *
`controller.quota.window.size.seconds` * quota). A quota type nobody has a quota for costs one dict
look-up per request, as Kafka records nothing while no quota of the type is enabled.

The throttle time is Kafka's (QuotaUtils.throttleTime): the observed rate O over its window W against
the quota T gives X = (O - T) / T * W, the time that brings the average back to the quota if nothing
more is recorded; request quotas are bounded by one window (ClientRequestQuotaManager.maxThrottleTimeMs);
mutations wait until the bucket is back at zero (-tokens / T seconds).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

from minikafka.broker.config.client_quotas import (
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    IP,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotaStore,
    entity_of,
)
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import response_frame
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.split import with_throttle

if TYPE_CHECKING:
    from collections.abc import Generator

    from minikafka.broker.security.session import Session
    from minikafka.broker.wire.context import RequestContext

Handle = Callable[[Any, Any], Awaitable[Any]]

MAX_THROTTLE_MS = 2**31 - 1  # the response's int32
NANOS_TO_PERCENTAGE = 100 / 1e9
# Kafka's Errors.THROTTLING_QUOTA_EXCEEDED message, sent with the refused topic.
THROTTLING_MESSAGE = "The throttling quota has been exceeded."


class ThrottlingQuotaExceeded(KafkaError):
    """A strict controller mutation quota refused a topic (THROTTLING_QUOTA_EXCEEDED)."""

    def __init__(self, throttle_ms: int) -> None:
        super().__init__(THROTTLING_MESSAGE, code=ErrorCode.throttling_quota_exceeded)
        self.throttle_ms = throttle_ms


@dataclass(frozen=True, slots=True)
class Windows:
    samples: int  # quota.window.num
    window_ms: int  # quota.window.size.seconds, in ms


@dataclass(slots=True)
class _Sample:
    start_ms: int
    last_event_ms: int
    value: float = 0.0

    def reset(self, now_ms: int) -> None:
        self.start_ms = self.last_event_ms = now_ms
        self.value = 0.0


@dataclass(slots=True)
class Rate:
    """Kafka's Rate over a WindowedSum: `samples` + 1 samples kept, the oldest purged once nothing was
    recorded in it for `samples` windows, and the elapsed time never taken as less than `samples` - 1
    whole windows (so a first burst is measured against the whole window, not its first millisecond)."""

    _samples: list[_Sample] = field(default_factory=list)
    _current: int = 0

    def record(self, windows: Windows, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= windows.window_ms:
            self._current = (self._current + 1) % (windows.samples + 1)
            if self._current >= len(self._samples):
                sample = _Sample(now_ms, now_ms)
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample.reset(now_ms)
        sample.value += value
        sample.last_event_ms = now_ms

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        return self._samples[self._current]

    def _purge(self, windows: Windows, now_ms: int) -> None:
        expire_age = windows.samples * windows.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)

    def window_size_ms(self, windows: Windows, now_ms: int) -> int:
        self._purge(windows, now_ms)
        oldest = min(sample.start_ms for sample in self._samples) if self._samples else now_ms
        elapsed = now_ms - oldest
        full_windows = elapsed // windows.window_ms
        if full_windows < windows.samples - 1:
            elapsed += (windows.samples - 1 - full_windows) * windows.window_ms
        return elapsed

    def measure(self, windows: Windows, now_ms: int) -> float:
        """Per second."""
        self._purge(windows, now_ms)
        total = sum(sample.value for sample in self._samples)
        return total / (self.window_size_ms(windows, now_ms) / 1000)


@dataclass(slots=True)
class TokenBucket:
    """Kafka's TokenBucket: refilled at the quota per second, holding at most samples * window * quota."""

    tokens: float = 0.0
    last_update_ms: int = 0

    def _refill(self, windows: Windows, quota: float, now_ms: int) -> None:
        burst = windows.samples * windows.window_ms / 1000 * quota
        self.tokens = min(burst, self.tokens + quota * (now_ms - self.last_update_ms) / 1000)
        self.last_update_ms = now_ms

    def measure(self, windows: Windows, quota: float, now_ms: int) -> float:
        self._refill(windows, quota, now_ms)
        return self.tokens

    def record(self, windows: Windows, quota: float, value: float, now_ms: int) -> None:
        self._refill(windows, quota, now_ms)
        burst = windows.samples * windows.window_ms / 1000 * quota
        self.tokens = min(burst, self.tokens - value)


def _throttle_ms(observed: float, bound: float, window_ms: int) -> int:
    """QuotaUtils.throttleTime: Math.round((O - T) / T * W)."""
    if bound <= 0:
        return MAX_THROTTLE_MS
    return min(MAX_THROTTLE_MS, math.floor((observed - bound) / bound * window_ms + 0.5))


@dataclass(slots=True)
class _Sensor:
    rate: Rate = field(default_factory=Rate)
    bucket: TokenBucket = field(default_factory=TokenBucket)
    throttle_ms_total: int = 0
    throttled: int = 0


@dataclass(frozen=True, slots=True)
class SensorView:
    user: str
    client_id: str
    value: float
    throttled: int
    throttle_ms_total: int


@dataclass(slots=True)
class QuotaManager:
    """One quota type (Kafka's QuotaType): its sensors by the (user, client-id) they are kept for."""

    key: str
    store: ClientQuotaStore
    windows: Windows
    # ClientRequestQuotaManager bounds the throttle time by one window; the byte-rate managers do not.
    max_throttle_ms: int = MAX_THROTTLE_MS
    sensors: dict[tuple[str, str], _Sensor] = field(default_factory=dict)
    enabled: bool = False

    def refresh(self) -> None:
        self.enabled = self.store.has_key(self.key)

    def _sensor(self, user: str, client_id: str) -> tuple[float | None, _Sensor]:
        limit, tags = self.store.applicable(self.key, user, client_id)
        sensor = self.sensors.get(tags)
        if sensor is None:
            sensor = self.sensors[tags] = _Sensor()
        return limit, sensor

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Kafka's recordAndGetThrottleTimeMs: record, then the throttle time if the rate is over the quota."""
        if not self.enabled:
            return 0
        limit, sensor = self._sensor(user, client_id)
        sensor.rate.record(self.windows, value, now_ms)
        if limit is None:
            return 0
        observed = sensor.rate.measure(self.windows, now_ms)
        if observed <= limit:
            return 0
        window = sensor.rate.window_size_ms(self.windows, now_ms)
        return min(self.max_throttle_ms, _throttle_ms(observed, limit, window))

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """A throttled Fetch returns nothing, so what it would have sent is taken back out."""
        if self.enabled:
            _limit, sensor = self._sensor(user, client_id)
            sensor.rate.record(self.windows, -value, now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """Kafka's maxValueInQuotaWindow: the most one request may take without being throttled for sure
        (what caps a Fetch's max_bytes); None when unlimited."""
        if not self.enabled:
            return None
        limit, _tags = self.store.applicable(self.key, user, client_id)
        if limit is None:
            return None
        return limit * (self.windows.samples - 1) * self.windows.window_ms / 1000

    def note_throttled(self, user: str, client_id: str, throttle_ms: int) -> None:
        """Kafka's throttle-time sensor (its average is what the broker's metrics show)."""
        _limit, sensor = self._sensor(user, client_id)
        sensor.throttled += 1
        sensor.throttle_ms_total += throttle_ms

    def observed(self, now_ms: int) -> list[SensorView]:
        """Every sensor's rate now (remaining tokens, for controller mutations) and what it was throttled."""
        views = []
        for (user, client_id), sensor in sorted(self.sensors.items()):
            if self.key == CONTROLLER_MUTATION_RATE:
                limit, _tags = self.store.applicable(self.key, user, client_id)
                value = sensor.bucket.measure(self.windows, limit, now_ms) if limit is not None else 0.0
            else:
                value = sensor.rate.measure(self.windows, now_ms)
            views.append(SensorView(user, client_id, value, sensor.throttled, sensor.throttle_ms_total))
        return views

    # --- controller mutations ---------------------------------------------------------------

    def mutation(self, user: str, client_id: str, now_ms: int, permits: float, *, strict: bool) -> int:
        """Take `permits` partitions from the bucket. Strict (CreateTopics v6+, CreatePartitions v3+,
        DeleteTopics v5+): refused with ThrottlingQuotaExceeded while the bucket is below zero, else taken
        even if that takes it below. Permissive (older versions): always taken. Returns the throttle time
        (0 while the bucket stays at or above zero)."""
        if not self.enabled:
            return 0
        limit, sensor = self._sensor(user, client_id)
        if limit is None:
            return 0
        bucket = sensor.bucket
        if strict:
            tokens = bucket.measure(self.windows, limit, now_ms)
            if tokens < 0:
                raise ThrottlingQuotaExceeded(_bucket_throttle_ms(tokens, limit))
            bucket.record(self.windows, limit, permits, now_ms)
            return 0
        bucket.record(self.windows, limit, permits, now_ms)
        tokens = bucket.measure(self.windows, limit, now_ms)
        return _bucket_throttle_ms(tokens, limit) if tokens < 0 else 0


def _bucket_throttle_ms(tokens: float, limit: float) -> int:
    """ControllerMutationQuotaManager.throttleTimeMs: Math.round(-tokens / quota * 1000)."""
    if limit <= 0:
        return MAX_THROTTLE_MS
    return min(MAX_THROTTLE_MS, math.floor(-tokens / limit * 1000 + 0.5))


@dataclass(slots=True)
class ConnectionRateQuota:
    """Kafka's per-IP connection creation rate (KIP-612, ConnectionQuotas): an `ip` entity's
    connection_creation_rate, else the default ip entity's. A connection over it is not served: Kafka's
    Acceptor closes it once the throttle time (bounded by one window) has passed, and it is not counted."""

    store: ClientQuotaStore
    windows: Windows
    rates: dict[str, Rate] = field(default_factory=dict)
    enabled: bool = False

    def refresh(self) -> None:
        self.enabled = self.store.has_key(CONNECTION_CREATION_RATE)

    def throttle_ms(self, ip: str, now_ms: int) -> int:
        if not self.enabled:
            return 0
        limit = self.store.value(entity_of([(IP, ip)]), CONNECTION_CREATION_RATE)
        if limit is None:
            limit = self.store.value(entity_of([(IP, None)]), CONNECTION_CREATION_RATE)
        if limit is None:
            return 0
        rate = self.rates.setdefault(ip, Rate())
        rate.record(self.windows, 1, now_ms)
        observed = rate.measure(self.windows, now_ms)
        if observed <= limit:
            return 0
        rate.record(self.windows, -1, now_ms)
        throttle = _throttle_ms(observed, limit, rate.window_size_ms(self.windows, now_ms))
        return min(self.windows.window_ms, throttle)


@dataclass(slots=True)
class ClientQuotas:
    """The four quota managers of a node, reading the quotas of `store`."""

    store: ClientQuotaStore
    produce: QuotaManager
    fetch: QuotaManager
    request: QuotaManager
    controller_mutation: QuotaManager
    connection: ConnectionRateQuota
    # Read by dispatch for every request: one attribute, kept up to date by `refresh`.
    any_enabled: bool = False

    @classmethod
    def over(cls, store: ClientQuotaStore, windows: Windows, controller_windows: Windows) -> ClientQuotas:
        quotas = cls(store, QuotaManager(PRODUCER_BYTE_RATE, store, windows),
                     QuotaManager(CONSUMER_BYTE_RATE, store, windows),
                     QuotaManager(REQUEST_PERCENTAGE, store, windows, max_throttle_ms=windows.window_ms),
                     QuotaManager(CONTROLLER_MUTATION_RATE, store, controller_windows),
                     ConnectionRateQuota(store, windows))
        store.listeners.append(quotas.refresh)
        quotas.refresh()
        return quotas

    def enforced(self, handle: Handle) -> Handle:
        """`handle` under these quotas (with_quotas), for dispatch, which does not import this module."""
        return with_quotas(handle)

    def managers(self) -> tuple[QuotaManager, ...]:
        return self.produce, self.fetch, self.request, self.controller_mutation

    def refresh(self) -> None:
        for manager in self.managers():
            manager.refresh()
        self.connection.refresh()
        self.any_enabled = any(manager.enabled for manager in self.managers())

    def reset(self) -> None:
        """Every quota and every sensor gone (the broker reset): the next request is measured afresh."""
        for manager in self.managers():
            manager.sensors.clear()
        self.connection.rates.clear()
        self.store.reset()


def quota_user(session: Session) -> str:
    """The user a quota is looked up by: the principal's name (ANONYMOUS on an unauthenticated listener)."""
    return session.principal.name


class HandlerTime:
    """Runs a handler's coroutine and adds up the time it ran, without its waits: Kafka's request thread
    time (the time a purgatory holds a request is not the handler's)."""

    __slots__ = ("_coroutine", "nanos")

    def __init__(self, coroutine: Awaitable[Any]) -> None:
        self._coroutine = coroutine.__await__()
        self.nanos = 0

    def __await__(self) -> Generator[Any, Any, Any]:
        step = self._coroutine
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            started = perf_counter_ns()
            try:
                yielded = step.throw(thrown) if thrown is not None else step.send(sent)
            except StopIteration as done:
                self.nanos += perf_counter_ns() - started
                return done.value
            except BaseException:
                self.nanos += perf_counter_ns() - started
                raise
            self.nanos += perf_counter_ns() - started
            thrown = None
            try:
                sent = yield yielded
            except BaseException as exc:  # cancellation and the like go on to the handler
                thrown, sent = exc, None


# Requests Kafka never counts against request quotas: SASL is handled by the network layer before KafkaApis,
# WriteTxnMarkers is a cluster action (inter-broker).
_REQUEST_QUOTA_EXEMPT = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.WRITE_TXN_MARKERS})
# The first version whose refusals are THROTTLING_QUOTA_EXCEEDED (KIP-599); older ones are throttled only.
MUTATION_STRICT_SINCE: dict[int, int] = {ApiKey.CREATE_TOPICS: 6, ApiKey.CREATE_PARTITIONS: 3, ApiKey.DELETE_TOPICS: 5}


def take_mutations(ctx: RequestContext, partitions: int) -> None:
    """Count `partitions` created or deleted against the client's controller_mutation_rate (Kafka's
    applyPartitionChangeQuota): ThrottlingQuotaExceeded refuses the topic on strict versions; the
    throttle time the response carries is the last one recorded."""
    quotas = ctx.services.client_quotas.built
    if quotas is None or not quotas.controller_mutation.enabled:  # none built: no quota set
        return
    manager = quotas.controller_mutation
    strict = ctx.api_version >= MUTATION_STRICT_SINCE.get(ctx.api_key, 0)
    try:
        throttle_ms = manager.mutation(quota_user(ctx.session), ctx.client_id or "", ctx.services.clock.now_ms(),
                                       partitions, strict=strict)
    except ThrottlingQuotaExceeded as exc:
        ctx.mutation_throttle_ms = exc.throttle_ms
        raise
    if throttle_ms:
        ctx.mutation_throttle_ms = throttle_ms


def with_quotas(handle: Handle) -> Handle:
    """The handler under the client quotas, applied where Kafka's KafkaApis applies them: after handling,
    the bytes in (Produce), out (Fetch) and the handler's time are recorded; the response carries the
    largest throttle time and the connection reads nothing more for that long (the response goes out
    first, KIP-219). A throttled Fetch answers no partitions and its bytes are taken back."""

    async def handle_with_quotas(ctx: RequestContext, request: Any) -> Any:
        quotas = ctx.services.quotas
        user, client_id = quota_user(ctx.session), ctx.client_id or ""
        api_key = ctx.api_key
        if api_key == ApiKey.FETCH and quotas.fetch.enabled:
            request = _capped_fetch(request, quotas.fetch.max_value_in_window(user, client_id))
        timed_request = quotas.request.enabled and api_key not in _REQUEST_QUOTA_EXEMPT
        if timed_request:
            timer = HandlerTime(handle(ctx, request))
            try:
                response = await timer
            except Exception:
                # Kafka answers a failed request with sendErrorResponseMaybeThrottle: its time still counts
                # (dispatch puts the throttle time in the error response).
                request_ms = quotas.request.record(user, client_id, timer.nanos * NANOS_TO_PERCENTAGE,
                                                   ctx.services.clock.now_ms())
                if request_ms > 0:
                    quotas.request.note_throttled(user, client_id, request_ms)
                    ctx.mute_ms = max(ctx.mute_ms, request_ms)
                raise
        else:
            response = await handle(ctx, request)
        now_ms = ctx.services.clock.now_ms()
        no_response = response is None  # acks=0: Kafka does not count it against the request quota
        request_ms = quotas.request.record(user, client_id, timer.nanos * NANOS_TO_PERCENTAGE, now_ms) \
            if timed_request and not no_response else 0
        bandwidth_ms, bandwidth = 0, quotas.request
        fetched = 0
        if api_key == ApiKey.PRODUCE:
            bandwidth = quotas.produce
            bandwidth_ms = bandwidth.record(user, client_id, ctx.request_size, now_ms)
        elif api_key == ApiKey.FETCH and quotas.fetch.enabled:
            bandwidth = quotas.fetch
            fetched = response_frame(0, response).frame_size - 4
            bandwidth_ms = bandwidth.record(user, client_id, fetched, now_ms)
        throttle_ms = max(request_ms, bandwidth_ms, ctx.mutation_throttle_ms)
        if throttle_ms <= 0:
            return response
        if api_key == ApiKey.FETCH:
            if fetched:
                quotas.fetch.unrecord(user, client_id, fetched, now_ms)
            response = _throttled_fetch(response)
        # The quota the throttle is charged to: on a tie, the request quota (as KafkaApis chooses).
        if request_ms == throttle_ms:
            quotas.request.note_throttled(user, client_id, throttle_ms)
        elif bandwidth_ms == throttle_ms:
            bandwidth.note_throttled(user, client_id, throttle_ms)
        else:
            quotas.controller_mutation.note_throttled(user, client_id, throttle_ms)
        ctx.mute_ms = max(ctx.mute_ms, throttle_ms)
        return None if no_response else with_throttle(response, throttle_ms)

    return handle_with_quotas


def _throttled_fetch(response: Any) -> Any:
    """Kafka's FetchContext.getThrottledResponse (no fetch sessions here: the full context's): no partitions,
    and from v7 no error and session 0."""
    if hasattr(response, "session_id"):
        return dataclasses.replace(response, error_code=ErrorCode.none, session_id=0, responses=())
    return dataclasses.replace(response, responses=())


def _capped_fetch(request: Any, most: float | None) -> Any:
    """KafkaApis.handleFetchRequest: max_bytes no more than the quota lets through in one window."""
    if most is None or not hasattr(request, "max_bytes"):
        return request
    max_bytes = min(request.max_bytes, int(most))
    if max_bytes == request.max_bytes:
        return request
    return dataclasses.replace(request, max_bytes=max_bytes, min_bytes=min(request.min_bytes, max_bytes))
