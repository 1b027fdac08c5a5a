"""Client telemetry payloads (KIP-714): OpenTelemetry MetricsData, compressed as clients send them, decoded
into points; bad payloads get Kafka's codes (INVALID_RECORD, TELEMETRY_TOO_LARGE), never a traceback."""

from __future__ import annotations

import gzip
import struct

import cramjam
import lz4.frame
import pytest
import zstandard
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.records import Compression
from minikafka.protocol.telemetry import CorruptTelemetry, TelemetryTooLarge, decode_metrics
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AggregationTemporality,
    Gauge,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

LIMIT = 1024 * 1024


def _attribute(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


def metrics_data() -> bytes:
    """What a producer pushes: a gauge with a node attribute, a delta sum and a histogram."""
    latency = Metric(name="org.apache.kafka.producer.node.request.latency.avg", unit="ms", gauge=Gauge(data_points=[
        NumberDataPoint(as_double=21.5, time_unix_nano=5, attributes=[_attribute("node.id", "1")])]))
    sent = Metric(name="org.apache.kafka.producer.record.send.total", sum=Sum(
        data_points=[NumberDataPoint(as_int=7)], is_monotonic=True,
        aggregation_temporality=AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA))
    sizes = Metric(name="org.apache.kafka.producer.batch.size", histogram=Histogram(
        data_points=[HistogramDataPoint(count=3, sum=300.0)]))
    data = MetricsData(resource_metrics=[ResourceMetrics(
        resource=Resource(attributes=[_attribute("client_rack", "r1")]),
        scope_metrics=[ScopeMetrics(metrics=[latency, sent, sizes])])])
    return bytes(data.SerializeToString())


def _xerial_snappy(raw: bytes) -> bytes:
    """Snappy as Java clients frame it: the xerial header, then length-prefixed raw blocks."""
    block = bytes(cramjam.snappy.compress_raw(raw))
    return b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block)) + block


COMPRESSORS = {
    "none": (Compression.NONE, lambda raw: raw),
    "gzip": (Compression.GZIP, gzip.compress),
    "snappy": (Compression.SNAPPY, lambda raw: bytes(cramjam.snappy.compress_raw(raw))),
    "snappy-xerial": (Compression.SNAPPY, _xerial_snappy),
    "lz4": (Compression.LZ4, lz4.frame.compress),
    "zstd": (Compression.ZSTD, zstandard.ZstdCompressor().compress),
}


@pytest.mark.parametrize("codec", sorted(COMPRESSORS))
def test_each_compression_decodes_to_the_same_points(codec: str) -> None:
    compression, compress = COMPRESSORS[codec]
    payload = decode_metrics(compression, compress(metrics_data()), LIMIT)
    assert payload.resource == {"client_rack": "r1"}
    latency, sent, sizes = payload.points
    assert (latency.name, latency.kind, latency.value, latency.attributes, latency.unit, latency.time_unix_nano) == (
        "org.apache.kafka.producer.node.request.latency.avg", "gauge", 21.5, (("node.id", "1"),), "ms", 5)
    assert (sent.kind, sent.value, sent.monotonic, sent.delta) == ("sum", 7.0, True, True)
    assert (sizes.kind, sizes.value, sizes.count) == ("histogram", 300.0, 3)


def test_an_empty_message_has_no_points() -> None:
    assert decode_metrics(Compression.NONE, b"", LIMIT).points == ()


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_corrupt_compression_is_invalid_record(codec: str) -> None:
    compression, compress = COMPRESSORS[codec]
    damaged = bytearray(compress(metrics_data() * 20))
    damaged[len(damaged) // 2:] = b"\xff" * (len(damaged) - len(damaged) // 2)
    with pytest.raises(CorruptTelemetry) as raised:
        decode_metrics(compression, bytes(damaged), LIMIT)
    assert raised.value.error_code == ErrorCode.invalid_record


@pytest.mark.parametrize("garbage", [b"\xff\xff\xff\xff", b"\x0a\x05ab", b"\x0b"])
def test_bytes_that_are_not_metrics_data_are_invalid_record(garbage: bytes) -> None:
    """A truncated field, an unterminated varint, a group start (wire type 3) that never ends."""
    with pytest.raises(CorruptTelemetry, match="not an OpenTelemetry MetricsData") as raised:
        decode_metrics(Compression.NONE, garbage, LIMIT)
    assert raised.value.error_code == ErrorCode.invalid_record


@pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd", "snappy"])
def test_decompressing_past_the_limit_is_telemetry_too_large(codec: str) -> None:
    compression, compress = COMPRESSORS[codec]
    with pytest.raises(TelemetryTooLarge) as raised:
        decode_metrics(compression, compress(b"\x00" * 10_000), 1000)
    assert raised.value.error_code == ErrorCode.telemetry_too_large


def test_an_unknown_codec_is_unsupported_compression_type() -> None:
    with pytest.raises(KafkaError) as raised:
        decode_metrics(9, b"x", LIMIT)
    assert raised.value.error_code == ErrorCode.unsupported_compression_type
