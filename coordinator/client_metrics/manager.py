"""The client instances that fetch telemetry subscriptions and push their metrics (KIP-714), as Kafka's
ClientMetricsManager and ClientMetricsInstance keep them, and the metrics they pushed last.

- GetTelemetrySubscriptions: a client sends the zero id at first and is given a random one. Its
  subscription is the union of the metric prefixes of every subscription it matches (`*` alone when
  one of them has `*`), pushed every smallest interval.ms of those (300000 when none match), under an id
  that changes with them: the CRC32C of the prefix set and interval XOR the instance id's Java hash. A
  second request before the interval has passed is THROTTLING_QUOTA_EXCEEDED, unless the last push failed
  with UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE. A change of the subscriptions gives every
  instance a fresh evaluation (and fresh timestamps) at its next request.
- PushTelemetry: INVALID_REQUEST for the zero id or after a terminating push; THROTTLING_QUOTA_EXCEEDED
  before the interval (a terminating push, and the first push after a GetTelemetrySubscriptions, are
  never early); UNKNOWN_SUBSCRIPTION_ID for a stale subscription id; UNSUPPORTED_COMPRESSION_TYPE for a
  codec id Kafka does not know; TELEMETRY_TOO_LARGE over `telemetry.max.bytes`. Then the payload is
  decoded (protocol/telemetry.py), where Kafka hands it to its receiver plugin: one that does not decode
  is INVALID_RECORD, one that decompresses past telemetry.max.bytes TELEMETRY_TOO_LARGE.
- An instance not heard from for max(60 s, 3 push intervals) is forgotten; at most MAX_INSTANCES are
  kept (the least recently heard from go first), each with at most MAX_POINTS points of its last push.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

import structlog
from minikafka.coordinator.client_metrics.configs import ALL_METRICS, DEFAULT_INTERVAL_MS, Subscription, subscription
from minikafka.coordinator.errors import (
    InvalidTelemetryRequest,
    TelemetryThrottled,
    UnknownSubscriptionId,
    UnsupportedTelemetryCompression,
)
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.records import crc32c
from minikafka.protocol.telemetry import (
    KNOWN_COMPRESSION_TYPES,
    CorruptTelemetry,
    MetricPoint,
    TelemetryTooLarge,
    decode_metrics,
)
from minikafka.storage.clock import Clock

_log = structlog.get_logger("minikafka.client_metrics")

ZERO_UUID = uuid.UUID(int=0)
# Kafka's Uuid.RESERVED: the zero id and the metadata topic's id.
RESERVED_IDS = frozenset({ZERO_UUID, uuid.UUID(int=1)})
INSTANCE_EXPIRY_MS = 60_000  # Kafka's DEFAULT_CACHE_EXPIRY_MS
MAX_INSTANCES = 1024
MAX_POINTS = 1000


@dataclass(frozen=True, slots=True)
class ClientInformation:
    """What the broker knows of a client from the connection a request came on."""

    client_id: str | None
    software_name: str | None
    software_version: str | None
    source_address: str
    source_port: int | None
    connection_id: int

    def attributes(self, instance_id: uuid.UUID) -> dict[str, str | None]:
        """The values `match` patterns are checked against (ClientMetricsInstanceMetadata)."""
        return {"client_instance_id": str(instance_id), "client_id": self.client_id,
                "client_software_name": self.software_name, "client_software_version": self.software_version,
                "client_source_address": self.source_address,
                "client_source_port": None if self.source_port is None else str(self.source_port)}


@dataclass(slots=True)
class ClientInstance:
    instance_id: uuid.UUID
    client: ClientInformation  # as first seen
    subscription_id: int
    subscription_version: int
    metrics: tuple[str, ...]
    push_interval_ms: int
    subscriptions: tuple[str, ...]  # the names of the subscriptions it matched
    last_get_ms: int = 0
    last_push_ms: int = 0
    last_seen_ms: int = 0
    terminating: bool = False
    last_error: ErrorCode = ErrorCode.none
    connection_ids: set[int] = field(default_factory=set)
    # What its last accepted push held.
    resource: dict[str, str] = field(default_factory=dict)
    points: tuple[MetricPoint, ...] = ()
    points_dropped: int = 0
    pushes: int = 0
    # Kafka's per-instance client-metrics sensors: requests refused as too early, payloads not decoded.
    throttled: int = 0
    push_errors: int = 0
    last_push_bytes: int = 0
    last_compression: int | None = None
    # Delta sums added up since the first push, per series: counters Prometheus can rate().
    totals: dict[tuple[str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)

    def expires_at(self) -> int:
        return self.last_seen_ms + max(INSTANCE_EXPIRY_MS, 3 * self.push_interval_ms)

    def take_get(self, now_ms: int) -> bool:
        """ClientMetricsInstance.maybeUpdateGetRequestTimestamp."""
        if now_ms - max(self.last_get_ms, self.last_push_ms) >= self.push_interval_ms:
            self.last_get_ms = now_ms
            return True
        return False

    def take_push(self, now_ms: int) -> bool:
        """maybeUpdatePushRequestTimestamp: the first push after a get is never early, as the client puts a
        jitter on its interval."""
        accepted = self.last_get_ms > self.last_push_ms or now_ms - self.last_push_ms >= self.push_interval_ms
        if accepted:
            self.last_push_ms = now_ms
        return accepted

    def keep(self, resource: dict[str, str], points: tuple[MetricPoint, ...]) -> None:
        self.resource = resource
        self.points = points[:MAX_POINTS]
        self.points_dropped = max(0, len(points) - MAX_POINTS)
        for point in self.points:
            if point.kind == "sum" and point.delta:
                self.totals[point.key] = self.totals.get(point.key, 0.0) + point.value


def _java_uuid_hash(value: uuid.UUID) -> int:
    """org.apache.kafka.common.Uuid.hashCode, unsigned."""
    bits = (value.int >> 64) ^ (value.int & (2**64 - 1))
    return ((bits >> 32) ^ bits) & 0xFFFFFFFF


def _int32(value: int) -> int:
    return value - 2**32 if value >= 2**31 else value


def subscription_id(metrics: tuple[str, ...], interval_ms: int, instance_id: uuid.UUID) -> int:
    """Kafka's computeSubscriptionId: CRC32C of the set's text and the interval, XOR the id's hash. Kafka
    prints a HashSet (its own order); the prefixes are sorted here: the id is opaque to clients."""
    text = "[" + ", ".join(metrics) + "]" + str(interval_ms)
    return _int32(crc32c(text.encode()) ^ _java_uuid_hash(instance_id))


class ClientMetricsManager:
    def __init__(self, clock: Clock, telemetry_max_bytes: int) -> None:
        self.clock = clock
        self.telemetry_max_bytes = telemetry_max_bytes
        self.subscriptions: dict[str, Subscription] = {}
        self.subscription_version = 0
        # Kafka's unknown-subscription-request sensor.
        self.unknown_subscription_requests = 0
        self._instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()

    def reset(self) -> None:
        """No subscription and no client instance (the broker reset); the subscription version moves on, so a
        client's next push names a subscription the broker no longer knows and it asks again."""
        self.subscriptions.clear()
        self.subscription_version += 1
        self.unknown_subscription_requests = 0
        self._instances.clear()

    # --- subscriptions ------------------------------------------------------------------------------------

    def update_subscription(self, name: str, properties: Mapping[str, str]) -> None:
        """Set (or, with no properties, remove) a subscription; validated as Kafka's updateSubscription."""
        if not properties:
            if self.subscriptions.pop(name, None) is not None:
                self.subscription_version += 1
            return
        self.subscriptions[name] = subscription(name, properties)
        self.subscription_version += 1

    def subscription_names(self) -> list[str]:
        return sorted(self.subscriptions)

    # --- instances ----------------------------------------------------------------------------------------

    def instances(self) -> list[ClientInstance]:
        self._forget_expired(self.clock.now_ms())
        return list(self._instances.values())

    def instance(self, instance_id: uuid.UUID) -> ClientInstance | None:
        return self._instances.get(instance_id)

    def _forget_expired(self, now_ms: int) -> None:
        for instance_id in [i for i, instance in self._instances.items() if instance.expires_at() <= now_ms]:
            del self._instances[instance_id]

    def _new_instance_id(self) -> uuid.UUID:
        instance_id = uuid.uuid4()
        while instance_id in self._instances or instance_id in RESERVED_IDS:
            instance_id = uuid.uuid4()
        return instance_id

    def _evaluate(self, instance_id: uuid.UUID, client: ClientInformation) -> ClientInstance:
        """A fresh instance under the current subscriptions (Kafka's createClientInstance)."""
        attributes = client.attributes(instance_id)
        matched = [s for _name, s in sorted(self.subscriptions.items()) if s.matches(attributes)]
        metrics: set[str] = set()
        for found in matched:
            metrics |= found.metrics
        interval = min([DEFAULT_INTERVAL_MS, *(found.interval_ms for found in matched)])
        wanted = (ALL_METRICS,) if ALL_METRICS in metrics else tuple(sorted(metrics))
        return ClientInstance(instance_id, client, subscription_id(wanted, interval, instance_id),
                              self.subscription_version, wanted, interval, tuple(found.name for found in matched))

    def _instance(self, instance_id: uuid.UUID, client: ClientInformation, now_ms: int) -> ClientInstance:
        self._forget_expired(now_ms)
        instance = self._instances.get(instance_id)
        if instance is None:
            instance = self._evaluate(instance_id, client)
        elif instance.subscription_version < self.subscription_version:
            previous = instance
            instance = self._evaluate(instance_id, previous.client)
            # What it pushed so far stays on show; only the subscription and its timing start over.
            instance.resource, instance.points, instance.totals = previous.resource, previous.points, previous.totals
            instance.pushes, instance.connection_ids = previous.pushes, previous.connection_ids
            instance.throttled, instance.push_errors = previous.throttled, previous.push_errors
        self._instances[instance_id] = instance
        self._instances.move_to_end(instance_id)
        while len(self._instances) > MAX_INSTANCES:
            self._instances.popitem(last=False)
        instance.last_seen_ms = now_ms
        instance.connection_ids.add(client.connection_id)
        return instance

    def get_subscriptions(self, instance_id: uuid.UUID | None, client: ClientInformation) -> ClientInstance:
        """The instance whose subscription a GetTelemetrySubscriptions answers; raises TelemetryThrottled."""
        now_ms = self.clock.now_ms()
        if instance_id is None or instance_id == ZERO_UUID:
            instance_id = self._new_instance_id()
        instance = self._instance(instance_id, client, now_ms)
        if not instance.take_get(now_ms) and instance.last_error not in (ErrorCode.unknown_subscription_id,
                                                                          ErrorCode.unsupported_compression_type):
            instance.throttled += 1
            raise TelemetryThrottled(f"Request from the client [{instance_id}] arrived before the next push "
                                     "interval time")
        instance.last_error = ErrorCode.none
        return instance

    def push(self, instance_id: uuid.UUID | None, subscription: int, terminating: bool, compression_type: int,
             metrics: bytes, client: ClientInformation) -> ClientInstance:
        """Accept one PushTelemetry and keep its metrics; raises the KafkaError Kafka answers with."""
        if instance_id is None or instance_id in RESERVED_IDS:
            raise InvalidTelemetryRequest(f"Invalid request from the client [{instance_id}], invalid client "
                                          "instance id")
        now_ms = self.clock.now_ms()
        instance = self._instance(instance_id, client, now_ms)
        try:
            self._check_push(instance, subscription, terminating, compression_type, len(metrics), now_ms)
        except KafkaError as exc:
            instance.last_error = exc.error_code
            raise
        finally:
            instance.terminating = terminating
        if metrics:
            self._decode(instance, compression_type, metrics)
        instance.last_error = ErrorCode.none
        return instance

    def _check_push(self, instance: ClientInstance, subscription: int, terminating: bool, compression_type: int,
                    size: int, now_ms: int) -> None:
        """Kafka's validatePushRequest, in its order."""
        who = instance.instance_id
        if instance.terminating:
            raise InvalidTelemetryRequest(f"Client [{who}] sent the previous request with state terminating to "
                                          "TRUE, can not accept any requests after that")
        if not instance.take_push(now_ms) and not terminating:
            instance.throttled += 1
            raise TelemetryThrottled(f"Request from the client [{who}] arrived before the next push interval time")
        if subscription != instance.subscription_id:
            self.unknown_subscription_requests += 1
            raise UnknownSubscriptionId(f"Unknown client subscription id for the client [{who}]")
        if compression_type not in KNOWN_COMPRESSION_TYPES:
            raise UnsupportedTelemetryCompression(f"Unknown compression type [{compression_type}] is received in "
                                                  f"telemetry request from [{who}]")
        if size > self.telemetry_max_bytes:
            raise TelemetryTooLarge(f"Telemetry request from [{who}] is larger than the maximum allowed size "
                                    f"[{self.telemetry_max_bytes}]")

    def _decode(self, instance: ClientInstance, compression_type: int, metrics: bytes) -> None:
        try:
            payload = decode_metrics(compression_type, metrics, self.telemetry_max_bytes)
        except (CorruptTelemetry, TelemetryTooLarge) as exc:
            instance.last_error = exc.error_code
            instance.push_errors += 1
            # A client's bad payload is its problem, not the broker's: one line, no stack trace.
            _log.warning("client telemetry refused", client_instance_id=str(instance.instance_id),
                         client_id=instance.client.client_id, error=exc.error_code.name.upper(), reason=str(exc))
            raise
        instance.keep(payload.resource, payload.points)
        instance.pushes += 1
        instance.last_push_bytes = len(metrics)
        instance.last_compression = compression_type
