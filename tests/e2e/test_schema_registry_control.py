"""The schema registry seen from the control plane: the inspector's state, /metrics, the newest requests,
and a reset between tests."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from minikafka.testing import Broker

RECORD = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})


def _admin(broker: Broker, method: str, path: str) -> Any:
    assert broker.admin_url is not None
    request = urllib.request.Request(broker.admin_url + path, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read()
    return body.decode() if path == "/metrics" else json.loads(body)


def test_state_metrics_and_reset_over_the_admin_api() -> None:
    with Broker(mode="process", schema_registry=True) as broker:
        assert broker.schema_registry_url is not None
        client = SchemaRegistryClient({"url": broker.schema_registry_url})
        schema_id = client.register_schema("r-value", Schema(RECORD, "AVRO"))
        client.set_compatibility("r-value", "FULL")

        registry = _admin(broker, "GET", "/state")["schema_registry"]
        assert registry["url"] == broker.schema_registry_url
        assert registry["subjects"] == {"r-value": {"compatibility": "FULL", "versions": [
            {"version": 1, "id": schema_id, "schema_type": "AVRO", "deleted": False}]}}
        assert {"route": "POST /subjects/{s}/versions", "status": 200, "count": 1} in registry["requests"]
        assert registry["recent"][-1]["route"] == "PUT /config/{s}"

        metrics = _admin(broker, "GET", "/metrics")
        assert 'minikafka_schema_registry_requests_total{route="POST /subjects/{s}/versions",status="200"} 1.0' \
            in metrics
        assert "minikafka_schema_registry_subjects 1.0" in metrics

        assert _admin(broker, "POST", "/schema-registry/reset") == {"reset": True}
        assert client.get_subjects() == []
        assert _admin(broker, "GET", "/schema-registry")["subjects"] == {}
        broker.restart()
        assert SchemaRegistryClient({"url": broker.schema_registry_url}).get_subjects() == []


def test_in_process_reset(schema_registry_url: str, minikafka_session: Broker) -> None:
    client = SchemaRegistryClient({"url": schema_registry_url})
    client.register_schema("x", Schema(RECORD, "AVRO"))
    minikafka_session.reset_schema_registry()
    assert SchemaRegistryClient({"url": schema_registry_url}).get_subjects() == []
