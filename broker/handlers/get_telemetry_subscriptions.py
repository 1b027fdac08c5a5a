"""GetTelemetrySubscriptions: v0 (KIP-714).

Behavior: as Kafka's ClientMetricsManager (coordinator/client_metrics/manager.py): a zero client
instance id gets a new random one; the answer carries the instance id, the subscription id, the
accepted compression types (zstd, lz4, gzip, snappy, Kafka's order), the push interval,
`telemetry.max.bytes`, delta temporality, and the requested metric prefixes (`*` for all, none when no
subscription matches). A request before the push interval has passed is THROTTLING_QUOTA_EXCEEDED.
Served only with `minikafka.client.telemetry.enabled` (Kafka: only with a telemetry receiver plugin).
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.handlers._shared.telemetry import client_information
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_code_for
from minikafka.coordinator.client_metrics.manager import ZERO_UUID
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import KafkaError
from minikafka.protocol.telemetry import ACCEPTED_COMPRESSION_TYPES

API_KEY = ApiKey.GET_TELEMETRY_SUBSCRIPTIONS
VERSIONS = VersionRange(0, 0)


async def handle(ctx: RequestContext, request: Any) -> Any:
    manager = ctx.services.client_metrics
    try:
        instance = manager.get_subscriptions(request.client_instance_id, client_information(ctx))
    except KafkaError as exc:
        return build(response_of(request), throttle_time=0, error_code=error_code_for(exc, ctx),
                     client_instance_id=ZERO_UUID)
    return build(response_of(request), throttle_time=0, error_code=0, client_instance_id=instance.instance_id,
                 subscription_id=instance.subscription_id,
                 accepted_compression_types=[int(codec) for codec in ACCEPTED_COMPRESSION_TYPES],
                 push_interval=instance.push_interval_ms, telemetry_max_bytes=manager.telemetry_max_bytes,
                 delta_temporality=True, requested_metrics=list(instance.metrics))
