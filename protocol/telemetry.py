"""Client telemetry payloads (KIP-714): a PushTelemetry request's `metrics` bytes, compressed as the
client chose from the broker's accepted list, holding one OpenTelemetry `MetricsData` protobuf message
(opentelemetry-proto's metrics/v1). `decode_metrics` turns one into flat metric points.

Kafka hands the payload to its telemetry receiver plugin; a payload the plugin cannot read is answered
INVALID_RECORD, one that decompresses to more than `telemetry.max.bytes` TELEMETRY_TOO_LARGE
(ClientMetricsManager.processPushTelemetryRequest). The errors raised here carry those codes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from minikafka.protocol.errors import CorruptRecord, DecompressedTooLarge, ErrorCode, KafkaError
from minikafka.protocol.records import Compression, decompress

# Kafka's ClientMetricsManager.SUPPORTED_COMPRESSION_TYPES, in its order of preference: a client takes
# the first one it can write.
ACCEPTED_COMPRESSION_TYPES: tuple[int, ...] = (Compression.ZSTD, Compression.LZ4, Compression.GZIP,
                                               Compression.SNAPPY)
KNOWN_COMPRESSION_TYPES = frozenset(int(codec) for codec in Compression)


class CorruptTelemetry(KafkaError):
    """The payload does not decompress, or is not a MetricsData message."""

    error_code = ErrorCode.invalid_record


class TelemetryTooLarge(KafkaError):
    error_code = ErrorCode.telemetry_too_large


@dataclass(frozen=True, slots=True)
class MetricPoint:
    """One data point of one metric. `value` is the gauge's or sum's number; for a histogram or summary
    it is the sum of the observations, and `count` their number."""

    name: str
    kind: str  # gauge, sum, histogram, exponential_histogram, summary
    value: float
    attributes: tuple[tuple[str, str], ...] = ()
    time_unix_nano: int = 0
    count: int | None = None
    # For a sum: whether it only grows, and whether the value is the change since the last push.
    monotonic: bool = False
    delta: bool = False
    unit: str = ""

    @property
    def key(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """What identifies the series this point belongs to."""
        return self.name, self.attributes


@dataclass(frozen=True, slots=True)
class TelemetryPayload:
    resource: dict[str, str] = field(default_factory=dict)
    points: tuple[MetricPoint, ...] = ()


def decompress_payload(compression_type: int, data: bytes, max_bytes: int) -> bytes:
    try:
        return decompress(compression_type, data, limit=max_bytes)
    except DecompressedTooLarge as exc:
        raise TelemetryTooLarge(f"the telemetry payload decompresses to more than {max_bytes} bytes") from exc
    except CorruptRecord as exc:
        raise CorruptTelemetry(f"the telemetry payload does not decompress: {exc}") from exc


def decode_metrics(compression_type: int, data: bytes, max_bytes: int) -> TelemetryPayload:
    """The points of one pushed payload; raises CorruptTelemetry or TelemetryTooLarge."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

    raw = decompress_payload(compression_type, data, max_bytes)
    message = MetricsData()
    try:
        message.ParseFromString(raw)
    except (DecodeError, ValueError) as exc:
        raise CorruptTelemetry(f"the telemetry payload is not an OpenTelemetry MetricsData message: {exc}") from exc
    resource: dict[str, str] = {}
    points: list[MetricPoint] = []
    for resource_metrics in message.resource_metrics:
        resource.update(_attributes(resource_metrics.resource.attributes))
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                points.extend(_points(metric))
    return TelemetryPayload(resource, tuple(points))


def _any_value(value: Any) -> str:
    kind = value.WhichOneof("value")
    if kind is None:
        return ""
    if kind in ("array_value", "kvlist_value"):
        return str(value)
    return str(getattr(value, kind))


def _attributes(attributes: Any) -> dict[str, str]:
    return {attribute.key: _any_value(attribute.value) for attribute in attributes}


def _number(point: Any) -> float:
    return float(point.as_double) if point.WhichOneof("value") == "as_double" else float(point.as_int)


def _points(metric: Any) -> list[MetricPoint]:
    from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality

    delta_temporality = AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA
    kind = metric.WhichOneof("data")
    if kind is None:
        return []
    data = getattr(metric, kind)
    found = []
    for point in data.data_points:
        attributes = tuple(sorted(_attributes(point.attributes).items()))
        common: dict[str, Any] = {"name": metric.name, "kind": kind, "attributes": attributes,
                                  "time_unix_nano": point.time_unix_nano, "unit": metric.unit}
        if kind in ("gauge", "sum"):
            sum_fields = {}
            if kind == "sum":
                sum_fields = {"monotonic": data.is_monotonic,
                              "delta": data.aggregation_temporality == delta_temporality}
            found.append(MetricPoint(value=_number(point), **common, **sum_fields))
        else:  # histogram, exponential_histogram, summary: their sum and count
            found.append(MetricPoint(value=float(point.sum), count=int(point.count), **common))
    return found
