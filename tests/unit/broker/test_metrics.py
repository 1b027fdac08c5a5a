"""Metrics: the exchange observer counts each request exactly, label values stay bounded, and a scrape of a
broker spoken to over a real socket reports exactly the frames, bytes, offsets and transactions it holds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import struct
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from minikafka.broker.config.config import BrokerConfig
from minikafka.broker.observe.metrics import LATENCY_BUCKETS_MS, BrokerMetrics, count_error_codes
from minikafka.broker.observe.prometheus import OLDEST_OPEN_TRANSACTIONS, render
from minikafka.broker.server import BrokerServer
from minikafka.broker.wire.hooks import ANSWERED, CLOSED, NO_RESPONSE, Exchange
from minikafka.coordinator.transaction.state import TxnMetadata, TxnState
from minikafka.protocol.api_keys import ApiKey, kio_range
from minikafka.protocol.build import build
from minikafka.protocol.codec import encode_request, response_class
from minikafka.protocol.errors import ErrorCode
from minikafka.storage.clock import ManualClock
from prometheus_client.parser import text_string_to_metric_families

TOPIC = "metered"


def _exchange(api_key: int, api_version: int, *, latency_ms: float, request_bytes: int, response_bytes: int = 0,
              outcome: str = ANSWERED, response: Any = None) -> Exchange:
    return Exchange(time_ms=0, node_id=1, connection_id=1, peer="127.0.0.1:1", client_id="c", api_key=api_key,
                    api_version=api_version, correlation_id=1, latency_ns=int(latency_ms * 1e6),
                    request_bytes=request_bytes, response_bytes=response_bytes, outcome=outcome, response=response)


def _bucket(ms: float) -> int:
    return next(i for i, bound in enumerate(LATENCY_BUCKETS_MS) if ms <= bound)


def _produce_response(*codes: ErrorCode) -> Any:
    return build(response_class(0, 9), responses=[
        {"name": TOPIC, "partition_responses": [{"index": i, "error_code": code} for i, code in enumerate(codes)]}])


def test_observe_counts_each_exchange_exactly() -> None:
    metrics = BrokerMetrics()
    metrics.observe(_exchange(0, 9, latency_ms=0.3, request_bytes=100, response_bytes=50,
                              response=_produce_response(ErrorCode.none, ErrorCode.not_leader_or_follower)))
    metrics.observe(_exchange(0, 9, latency_ms=2.0, request_bytes=60, outcome=NO_RESPONSE))  # acks=0
    metrics.observe(_exchange(0, 99, latency_ms=40_000, request_bytes=10, outcome=CLOSED))

    produce = metrics.apis["Produce"]
    assert produce.requests == {"9": 2, "unsupported": 1}
    assert produce.errors == {ErrorCode.none: 1, ErrorCode.not_leader_or_follower: 1}
    assert produce.bytes_in == (100 + 4) + (60 + 4) + (10 + 4), "frames as on the wire, size prefix included"
    assert produce.bytes_out == 50 + 4, "only the answered request sent a frame"
    expected = [0] * (len(LATENCY_BUCKETS_MS) + 1)
    expected[_bucket(0.3)] += 1
    expected[_bucket(2.0)] += 1
    expected[-1] += 1  # 40 s: past the last bound, +Inf only
    assert produce.latency_buckets == expected
    assert produce.latency_sum_ms == pytest.approx(40_002.3)


def test_label_values_stay_bounded_whatever_keys_a_client_sends() -> None:
    metrics = BrokerMetrics()
    for api_key in range(1000, 1100):
        for version in range(5):
            metrics.observe(_exchange(api_key, version, latency_ms=0.01, request_bytes=8, outcome=CLOSED))
    for version in range(100, 200):
        metrics.observe(_exchange(18, version, latency_ms=0.01, request_bytes=8, outcome=CLOSED))
    assert set(metrics.apis) == {"Unknown", "ApiVersions"}
    assert metrics.apis["Unknown"].requests == {"unsupported": 500}
    assert metrics.apis["ApiVersions"].requests == {"unsupported": 100}
    assert not metrics._slots, "pairs no schema has are not remembered"


def test_error_codes_counted_at_every_level() -> None:
    """Fetch carries a top-level error code and one per partition: each counts, as in Kafka's errorCounts."""
    counts: dict[int, int] = {}
    fetch = build(response_class(1, 12), error_code=ErrorCode.none, responses=[
        {"topic": TOPIC, "partitions": [{"partition_index": 0, "error_code": ErrorCode.offset_out_of_range},
                                        {"partition_index": 1, "error_code": ErrorCode.none}]}])
    count_error_codes(fetch, counts)
    assert counts == {ErrorCode.none: 2, ErrorCode.offset_out_of_range: 1}


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[BrokerServer]:
    broker = BrokerServer(BrokerConfig(host="127.0.0.1", port=0, data_dir=tmp_path / "data", clock="manual"))
    await broker.start()
    assert broker.services is not None
    broker.services.logs.create_topic(TOPIC, 2)
    yield broker
    await broker.shutdown()


def _scrape(server: BrokerServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    assert server.services is not None
    samples = {}
    for family in text_string_to_metric_families(render(server.services).decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


async def _round_trip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, frame: bytes) -> bytes:
    writer.write(frame)
    await writer.drain()
    size_prefix = await asyncio.wait_for(reader.readexactly(4), 10)
    return size_prefix + await reader.readexactly(struct.unpack(">i", size_prefix)[0])


async def _until(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.01)


async def test_scrape_reports_exactly_what_a_socket_sent(server: BrokerServer) -> None:
    assert server.node is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", server.node.port)
    versions = encode_request(1, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    metadata = encode_request(2, MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=TOPIC),),
                                                 allow_auto_topic_creation=False,
                                                 include_topic_authorized_operations=False))
    answers = [await _round_trip(reader, writer, frame) for frame in (versions, metadata)]

    samples = _scrape(server)
    assert samples[("kafka_network_requestmetrics_requests_total", (("request", "ApiVersions"), ("version", "3")))] == 1
    assert samples[("kafka_network_requestmetrics_requests_total", (("request", "Metadata"), ("version", "12")))] == 1
    # Metadata: the topic's error code and each of its two partitions'.
    assert samples[("kafka_network_requestmetrics_errors_total", (("error", "NONE"), ("request", "Metadata")))] == 3
    assert samples[("kafka_network_requestmetrics_totaltimems_count", (("request", "Metadata"),))] == 1
    assert samples[("kafka_server_socket_server_metrics_incoming_byte_total", ())] == len(versions) + len(metadata)
    assert samples[("kafka_server_socket_server_metrics_outgoing_byte_total", ())] == sum(map(len, answers))
    assert samples[("minikafka_request_bytes_total", (("request", "Metadata"),))] == len(metadata)
    assert samples[("kafka_server_socket_server_metrics_connection_count", ())] == 1
    for partition in ("0", "1"):
        labels = (("partition", partition), ("topic", TOPIC))
        assert samples[("kafka_log_log_logendoffset", labels)] == 0
        assert samples[("minikafka_partition_last_stable_offset", labels)] == 0
    assert samples[("kafka_server_group_coordinator_metrics_classic_group_count", (("state", "Stable"),))] == 0

    # An API key nobody serves: the connection is closed, counted once, the request labelled Unknown.
    writer.write(struct.pack(">ihhi", 10, 999, 0, 3) + b"\x00\x00")
    await writer.drain()
    assert await asyncio.wait_for(reader.read(), 10) == b""
    writer.close()
    await _until(lambda: server.connection_count == 0)
    samples = _scrape(server)
    assert samples[("minikafka_connections_closed_bad_input_total", (("reason", "unanswerable request"),))] == 1
    assert samples[("kafka_network_requestmetrics_requests_total",
                    (("request", "Unknown"), ("version", "unsupported")))] == 1
    assert samples[("kafka_server_socket_server_metrics_connection_count", ())] == 0


async def test_open_transactions_counted_with_bounded_ages(server: BrokerServer, tmp_path: Path) -> None:
    assert server.services is not None
    clock = server.services.clock
    assert isinstance(clock, ManualClock)
    now = clock.now_ms()
    txns = server.services.transactions.txns
    opened = OLDEST_OPEN_TRANSACTIONS + 5
    for age_s in range(1, opened + 1):
        txns[f"open-{age_s}"] = TxnMetadata(f"open-{age_s}", age_s, 0, 60000, TxnState.ONGOING,
                                            frozenset({(TOPIC, 0)}), now - age_s * 1000, now)
    txns["done"] = TxnMetadata("done", 999, 0, 60000, TxnState.COMPLETE_COMMIT, frozenset(), now - 99_000, now)
    clock.advance(500)

    samples = _scrape(server)
    assert samples[("minikafka_transactions_open", ())] == opened
    assert samples[("minikafka_transactions", (("state", "Ongoing"),))] == opened
    assert samples[("minikafka_transactions", (("state", "CompleteCommit"),))] == 1
    assert samples[("minikafka_transaction_oldest_open_age_seconds", ())] == opened + 0.5
    ages = {labels[0][1]: value for (name, labels), value in samples.items()
            if name == "minikafka_transaction_open_age_seconds"}
    assert ages == {f"open-{age_s}": age_s + 0.5 for age_s in range(opened, opened - OLDEST_OPEN_TRANSACTIONS, -1)}

    # Another broker in the same process has a registry of its own.
    other = BrokerServer(BrokerConfig(host="127.0.0.1", port=0, data_dir=tmp_path / "other"))
    await other.start()
    try:
        assert ("minikafka_transactions_open", ()) in _scrape(other)
        assert _scrape(other)[("minikafka_transactions_open", ())] == 0
    finally:
        await other.shutdown()


async def _boom(_ctx: Any, _request: Any) -> Any:
    raise RuntimeError("a bug in a handler")


async def test_unexpected_handler_error_counted_under_kafkas_request_name(
        server: BrokerServer, monkeypatch: pytest.MonkeyPatch) -> None:
    assert server.services is not None and server.node is not None
    route = server.services.registry.route(ApiKey.LIST_OFFSETS)
    assert route is not None
    # The registry offers no way to swap a handler (nothing but a test should): replace its route.
    monkeypatch.setitem(server.services.registry._routes, ApiKey.LIST_OFFSETS,
                        type(route)(route.api_key, route.versions, route.advertised, _boom, route.name))
    reader, writer = await asyncio.open_connection("127.0.0.1", server.node.port)
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(ListOffsetsTopic(
        name=TOPIC, partitions=(ListOffsetsPartition(partition_index=1, current_leader_epoch=-1, timestamp=-1),)),))
    await _round_trip(reader, writer, encode_request(1, request))
    writer.close()

    samples = _scrape(server)
    assert samples[("minikafka_unexpected_handler_errors_total", (("request", "ListOffsets"),))] == 1
    assert samples[("kafka_network_requestmetrics_errors_total",
                    (("error", "UNKNOWN_SERVER_ERROR"), ("request", "ListOffsets")))] == 1
    assert ("kafka_network_requestmetrics_errors_total", (("error", "NONE"), ("request", "ListOffsets"))) \
        not in samples


def test_every_response_schema_served_can_be_counted() -> None:
    """The observer is removed if it raises, so every response class of every API and version must walk."""
    for api_key in ApiKey:
        versions = kio_range(api_key)
        for version in range(versions.min, versions.max + 1):
            response_cls = response_class(api_key, version)
            counts: dict[int, int] = {}
            count_error_codes(build(response_cls), counts)
            top_level = any(f.name == "error_code" for f in dataclasses.fields(response_cls))
            assert counts.get(ErrorCode.none, 0) >= (1 if top_level else 0), response_cls
