"""PushTelemetry: v0 (KIP-714).

Behavior: as Kafka's ClientMetricsManager (coordinator/client_metrics/manager.py): INVALID_REQUEST for
a zero or reserved client instance id and for any push after a terminating one;
THROTTLING_QUOTA_EXCEEDED before the push interval (never for a terminating push);
UNKNOWN_SUBSCRIPTION_ID when the subscription changed since the client fetched it;
UNSUPPORTED_COMPRESSION_TYPE for an unknown codec id; TELEMETRY_TOO_LARGE over `telemetry.max.bytes`,
compressed or decompressed. The payload is decoded (OpenTelemetry MetricsData, protocol/telemetry.py)
and its points kept as the instance's latest metrics: the inspector, /metrics and the trace show them.
A payload that does not decompress or decode is INVALID_RECORD, as Kafka answers when its receiver
plugin fails, and logged as one warning line.
Served only with `minikafka.client.telemetry.enabled` (Kafka: only with a telemetry receiver plugin).
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.handlers._shared.telemetry import client_information
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_code_for
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode, KafkaError

API_KEY = ApiKey.PUSH_TELEMETRY
VERSIONS = VersionRange(0, 0)


async def handle(ctx: RequestContext, request: Any) -> Any:
    code = ErrorCode.none
    try:
        ctx.services.client_metrics.push(request.client_instance_id, request.subscription_id,
                                         bool(request.terminating), request.compression_type,
                                         bytes(request.metrics or b""), client_information(ctx))
    except KafkaError as exc:
        code = error_code_for(exc, ctx)
        ctx.log.debug("push telemetry refused", client_instance_id=str(request.client_instance_id),
                      error=code.name.upper())
    return build(response_of(request), throttle_time=0, error_code=code)
