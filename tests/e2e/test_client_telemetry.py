"""Client telemetry (KIP-714) with confluent-kafka: a subscription set over the wire, librdkafka's own
producer metrics shown in the inspector's JSON and on /metrics beside the broker's view of the same
connections, pushes decoded in the flight recorder; the config resource over the wire; bad payloads
answered with Kafka's codes; and docs/telemetry-and-quotas.md's example, run as it is."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zstandard
from confluent_kafka import Producer
from kio.schema.get_telemetry_subscriptions.v0.request import GetTelemetrySubscriptionsRequest
from kio.schema.push_telemetry.v0.request import PushTelemetryRequest
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import decode_response, encode_request
from minikafka.testing import Broker
from minikafka.tools.admin_client import AdminClient
from prometheus_client.parser import text_string_to_metric_families

from tests.support.waiting import poll_until
from tests.support.wire import Wire
from tests.unit.protocol.test_telemetry import metrics_data

pytestmark = pytest.mark.e2e

TELEMETRY = {"minikafka.client.telemetry.enabled": "true"}
SET, DELETE, APPEND = 0, 1, 2
CLIENT_METRICS = 16
DOCS = Path(__file__).resolve().parents[2] / "docs" / "telemetry-and-quotas.md"


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(TELEMETRY, mode="process") as broker:
        yield broker


def _alter(broker: Broker, name: str, *changes: tuple[str, int, str | None]) -> Any:
    with AdminClient(broker.bootstrap_servers) as admin:
        response = admin.any_broker().request(ApiKey.INCREMENTAL_ALTER_CONFIGS, validate_only=False, resources=[
            {"resource_type": CLIENT_METRICS, "resource_name": name,
             "configs": [{"name": key, "config_operation": op, "value": value} for key, op, value in changes]}])
    return response.responses[0]


def _describe(broker: Broker, name: str) -> Any:
    with AdminClient(broker.bootstrap_servers) as admin:
        response = admin.any_broker().request(ApiKey.DESCRIBE_CONFIGS, include_synonyms=True, resources=[
            {"resource_type": CLIENT_METRICS, "resource_name": name, "configuration_keys": None}])
    return response.results[0]


def _listed(broker: Broker, *types: int) -> list[tuple[int, str]]:
    with AdminClient(broker.bootstrap_servers) as admin:
        response = admin.any_broker().request(ApiKey.LIST_CONFIG_RESOURCES, resource_types=list(types))
    assert response.error_code == 0
    return [(r.resource_type, r.resource_name) for r in response.config_resources]


def test_a_producer_s_own_metrics_beside_the_broker_s_view(broker: Broker) -> None:
    client_id = f"orders-{uuid.uuid4().hex[:8]}"
    subscription = f"producers-{client_id}"
    assert _alter(broker, subscription, ("metrics", SET, "org.apache.kafka.producer."), ("interval.ms", SET, "500"),
                  ("match", SET, f"client_id={client_id}")).error_code == 0
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": client_id})
    try:
        for index in range(20):
            producer.produce("telemetry-orders", f"order {index}".encode())
        assert producer.flush(30) == 0

        def pushed() -> dict[str, Any] | None:
            producer.poll(0.1)
            for client in broker.state()["clients"].values():
                names = {m["name"] for m in client["metrics"]}
                if client["client_id"] == client_id and {"org.apache.kafka.producer.request.latency.avg",
                                                        "org.apache.kafka.producer.record.queue.time.avg"} <= names:
                    return client  # type: ignore[no-any-return]
            return None

        client = poll_until(pushed, timeout=30, message="the producer's own metrics in the inspector's state")
    finally:
        producer.flush(10)
    assert client["subscriptions"] == [subscription]
    assert client["requested_metrics"] == ["org.apache.kafka.producer."] and client["push_interval_ms"] == 500
    assert client["client_software_name"] == "confluent-kafka-python" and client["last_error"] == "NONE"
    assert all(m["name"].startswith("org.apache.kafka.producer.") for m in client["metrics"])
    latency = next(m for m in client["metrics"] if m["name"] == "org.apache.kafka.producer.request.latency.avg")
    assert latency["kind"] == "gauge" and latency["value"] >= 0
    # The broker's view of the same client: the connection its records came on, with their latency.
    produce = [c["apis"]["Produce"] for c in client["broker_view"] if "Produce" in c["apis"]]
    assert produce and sum(p["requests"] for p in produce) >= 1 and produce[0]["latency_avg_ms"] > 0
    assert any("PushTelemetry" in c["apis"] for c in client["broker_view"])

    instance_id = client["client_instance_id"]
    samples = [sample for family in text_string_to_metric_families(broker.metrics()) for sample in family.samples
               if sample.labels.get("client_instance_id") == instance_id and sample.name.startswith("org_apache_kafka")]
    names = {sample.name for sample in samples}
    assert {"org_apache_kafka_producer_request_latency_avg", "org_apache_kafka_producer_record_queue_time_avg"} <= names
    assert all(sample.labels["client_id"] == client_id for sample in samples)
    exported = [sample.value for family in text_string_to_metric_families(broker.metrics()) for sample in family.samples
                if sample.name == "kafka_server_client_metrics_plugin_export_total"
                and sample.labels["client_instance_id"] == instance_id]
    assert exported and exported[0] >= 1

    pushes = [e for e in broker.trace(api="PushTelemetry", client_id=client_id) if e["errors"] == []]
    assert pushes and any(m["name"] == "org.apache.kafka.producer.request.latency.avg"
                          for m in pushes[-1]["telemetry"]["metrics"])


def test_subscriptions_as_config_resources(broker: Broker) -> None:
    name = f"sub-{uuid.uuid4().hex[:8]}"
    assert _alter(broker, name, ("metrics", SET, "org.apache.kafka.consumer."), ("interval.ms", SET, "1000")) \
        .error_code == 0
    assert _alter(broker, name, ("metrics", APPEND, "org.apache.kafka.producer.")).error_code == 0
    described = _describe(broker, name)
    configs = {c.name: (c.value, c.config_source) for c in described.configs}
    assert configs == {"metrics": ("org.apache.kafka.consumer.,org.apache.kafka.producer.", 7),
                       "interval.ms": ("1000", 7), "match": ("", 5)}
    assert (CLIENT_METRICS, name) in _listed(broker) and (CLIENT_METRICS, name) in _listed(broker, CLIENT_METRICS)
    assert all(kind == CLIENT_METRICS for kind, _ in _listed(broker, CLIENT_METRICS))

    refused = _alter(broker, name, ("interval.ms", SET, "50"))
    assert (refused.error_code, refused.error_message) == (
        42, "Invalid value 50 for interval.ms, interval must be between 100 and 3600000 (1 hour)")
    assert _alter(broker, name, ("match", SET, "hostname=x")).error_code == 40
    assert _alter(broker, name, ("colour", SET, "x")).error_code == 42
    assert _describe(broker, "").error_code == 42

    assert _alter(broker, name, ("metrics", DELETE, None), ("interval.ms", DELETE, None)).error_code == 0
    assert (CLIENT_METRICS, name) not in _listed(broker, CLIENT_METRICS)


def test_unsupported_resource_type_in_list_config_resources(broker: Broker) -> None:
    with AdminClient(broker.bootstrap_servers) as admin:
        response = admin.any_broker().request(ApiKey.LIST_CONFIG_RESOURCES, resource_types=[3])
    assert response.error_code == 35 and response.config_resources == ()


def _exchange(wire: Wire, corr: int, request: Any) -> Any:
    wire.send(encode_request(corr, request, "raw-telemetry"))
    answer_corr, response = decode_response(wire.receive(), request.__api_key__, request.__version__)
    assert answer_corr == corr
    return response


def test_bad_payloads_get_kafka_s_codes_and_one_log_line(tmp_path: Path) -> None:
    manual = {**TELEMETRY, "minikafka.clock": "manual"}
    with Broker(manual, mode="process", data_dir=tmp_path / "data", log_file=tmp_path / "broker.log") as broker:
        assert _alter(broker, "all", ("metrics", SET, "*"), ("interval.ms", SET, "100")).error_code == 0
        wire = Wire(broker)
        try:
            got = _exchange(wire, 1, GetTelemetrySubscriptionsRequest(client_instance_id=uuid.UUID(int=0)))
            assert got.error_code == 0 and got.requested_metrics == ("*",) and got.push_interval.total_seconds() == 0.1
            assert tuple(got.accepted_compression_types) == (4, 3, 1, 2)

            def push(compression: int, payload: bytes, subscription: int | None = None) -> int:
                request = PushTelemetryRequest(
                    client_instance_id=got.client_instance_id, terminating=False, compression_type=compression,
                    subscription_id=got.subscription_id if subscription is None else subscription, metrics=payload)
                return int(_exchange(wire, 2, request).error_code)

            def when_due(compression: int, payload: bytes, subscription: int | None = None) -> int:
                """A push once the push interval has passed on the broker's manual clock."""
                broker.advance_clock(100)
                return push(compression, payload, subscription)

            good = zstandard.ZstdCompressor().compress(metrics_data())
            assert push(4, b"\x28\xb5\x2f\xfd garbage") == 87, "corrupt zstd: INVALID_RECORD"
            throttled = _exchange(wire, 3, GetTelemetrySubscriptionsRequest(client_instance_id=got.client_instance_id))
            assert throttled.error_code == 89, "a Get before the interval: THROTTLING_QUOTA_EXCEEDED"
            assert push(4, good) == 89, "a push before the interval: THROTTLING_QUOTA_EXCEEDED"
            assert when_due(0, b"\xff\xff\xff") == 87, "not MetricsData: INVALID_RECORD"
            assert when_due(4, good) == 0
            assert when_due(4, good, got.subscription_id + 1) == 117, "UNKNOWN_SUBSCRIPTION_ID"
            assert when_due(9, good) == 76, "UNSUPPORTED_COMPRESSION_TYPE"
            assert when_due(4, good) == 0, "the connection and the instance still work"
        finally:
            wire.close()
        log = broker.logs()
    assert "client telemetry refused" in log and "INVALID_RECORD" in log
    assert "Traceback" not in log


def test_not_advertised_unless_turned_on(tmp_path: Path) -> None:
    with Broker(mode="process", data_dir=tmp_path / "data") as broker, AdminClient(broker.bootstrap_servers) as admin:
        versions = admin.any_broker().versions
    assert ApiKey.GET_TELEMETRY_SUBSCRIPTIONS not in versions and ApiKey.PUSH_TELEMETRY not in versions
    assert versions[ApiKey.LIST_CONFIG_RESOURCES] == (0, 1)


def test_subscriptions_survive_a_restart(tmp_path: Path) -> None:
    broker = Broker(TELEMETRY, mode="process", data_dir=tmp_path / "data")
    with broker:
        assert _alter(broker, "kept", ("metrics", SET, "*"), ("interval.ms", SET, "60000")).error_code == 0
    with Broker(TELEMETRY, mode="process", data_dir=tmp_path / "data") as again:
        assert (CLIENT_METRICS, "kept") in _listed(again, CLIENT_METRICS)
        assert {c.name: c.value for c in _describe(again, "kept").configs}["interval.ms"] == "60000"


def test_the_docs_example_runs(tmp_path: Path) -> None:
    code = re.search(r"## Client telemetry.*?```python\n(.*?)```", DOCS.read_text(), re.S)
    assert code is not None
    script = tmp_path / "example.py"
    script.write_text(code.group(1))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "producer says: request latency avg" in done.stdout
    assert re.search(r"broker saw: \S+ Produce \d+ requests", done.stdout)
