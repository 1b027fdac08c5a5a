"""Client telemetry on /metrics and in the inspector's state: series per client instance, delta sums added
up into counters, names that could pass for the broker's own left out, and the broker's view of the same
client's connections."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from minikafka.broker.observe.client_telemetry import broker_view, instance_state
from minikafka.broker.observe.metrics import BrokerMetrics
from minikafka.broker.observe.prometheus import BrokerCollector
from minikafka.broker.wire.hooks import ANSWERED, Exchange
from minikafka.coordinator.client_metrics.manager import ClientInformation, ClientMetricsManager
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.telemetry import MetricPoint
from minikafka.storage.clock import ManualClock
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

CLIENT = ClientInformation(client_id="orders", software_name="librdkafka", software_version="2.16.0",
                           source_address="127.0.0.1", source_port=50001, connection_id=2)
POINTS = (
    MetricPoint("org.apache.kafka.producer.request.latency.avg", "gauge", 12.5),
    MetricPoint("org.apache.kafka.producer.node.request.latency.avg", "gauge", 3.0, (("node.id", "1"),)),
    MetricPoint("org.apache.kafka.producer.record.send.total", "sum", 4.0, monotonic=True, delta=True),
    MetricPoint("kafka_network_requestmetrics_requests", "gauge", 1.0),
)


def _services() -> Any:
    manager = ClientMetricsManager(ManualClock(), 1024)
    instance = manager.get_subscriptions(None, CLIENT)
    instance.keep({}, POINTS)
    instance.keep({}, POINTS)  # a second push: the delta sum adds up to 8
    return SimpleNamespace(client_metrics=manager, metrics=BrokerMetrics()), instance


def _exchange(connection_id: int, peer: str, client_id: str, api_key: int, latency_ms: float) -> Exchange:
    return Exchange(time_ms=1, node_id=1, connection_id=connection_id, peer=peer, client_id=client_id,
                    api_key=api_key, api_version=0, correlation_id=1, latency_ns=int(latency_ms * 1e6),
                    request_bytes=10, response_bytes=20, outcome=ANSWERED)


def test_series_per_client_instance() -> None:
    services, instance = _services()

    class Only:
        def collect(self) -> Any:
            return BrokerCollector(services)._client_telemetry()

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Only())
    families = {f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())}
    labels = {"client_instance_id": str(instance.instance_id), "client_id": "orders"}
    latency = families["org_apache_kafka_producer_request_latency_avg"]
    assert latency.type == "gauge" and [(s.labels, s.value) for s in latency.samples] == [(labels, 12.5)]
    node = families["org_apache_kafka_producer_node_request_latency_avg"].samples[0]
    assert node.labels == {**labels, "node_id": "1"}
    sent = families["org_apache_kafka_producer_record_send"]
    assert sent.type == "counter" and sent.samples[0].value == 8.0
    assert "kafka_network_requestmetrics_requests" not in families, "a client cannot pass for the broker"
    assert families["kafka_server_client_metrics_instance_count"].samples[0].value == 1
    exported = families["kafka_server_client_metrics_plugin_export"].samples[0]
    assert exported.labels == {"client_instance_id": str(instance.instance_id)} and exported.value == 0


def test_the_broker_s_view_joins_the_client_s_connections() -> None:
    services, instance = _services()
    metrics = services.metrics
    metrics.observe(_exchange(1, "127.0.0.1:50000", "orders", ApiKey.METADATA, 2.0))  # its bootstrap connection
    metrics.observe(_exchange(2, "127.0.0.1:50001", "orders", ApiKey.PRODUCE, 4.0))
    metrics.observe(_exchange(2, "127.0.0.1:50001", "orders", ApiKey.PRODUCE, 6.0))
    metrics.observe(_exchange(3, "127.0.0.1:50002", "payments", ApiKey.PRODUCE, 1.0))
    assert [c.connection_id for c in broker_view(services, instance)] == [1, 2]
    state = instance_state(services, instance)
    produce = state["broker_view"][1]["apis"]["Produce"]
    assert produce == {"requests": 2, "latency_avg_ms": 5.0, "latency_max_ms": 6.0}
    sent = next(m for m in state["metrics"] if m["name"] == "org.apache.kafka.producer.record.send.total")
    assert (sent["value"], sent["total"], sent["delta"]) == (4.0, 8.0, True)
