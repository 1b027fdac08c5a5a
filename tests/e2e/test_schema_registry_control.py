"""The schema registry seen from the control plane: the inspector's state, /metrics, the newest requests,
the flight recorder, and a reset between tests."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from minikafka.testing import Broker

from tests.e2e.test_trace import EventReader
from tests.support.waiting import poll_until

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


def _registry(broker: Broker, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    assert broker.schema_registry_url is not None
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(broker.schema_registry_url + path, method=method, data=data,
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def test_registry_requests_in_the_flight_recorder(tmp_path: Path) -> None:
    trace_file = tmp_path / "trace.jsonl"
    serve_args = ("--trace", str(trace_file), "--trace-api", "SchemaRegistry", "--admin-port", "0")
    with Broker(mode="process", schema_registry=True, data_dir=tmp_path / "data", serve_args=serve_args) as broker:
        status, _ = _registry(broker, "POST", "/subjects/traced-value/versions", {"schema": RECORD})
        assert status == 200
        status, refused = _registry(broker, "GET", "/subjects/no-such-subject/versions/1")
        assert (status, refused["error_code"]) == (404, 40401)
        AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=10)  # a Kafka exchange

        register, unknown = broker.trace(api="SchemaRegistry")
        assert register["method"] == "POST" and register["path"] == "/subjects/traced-value/versions"
        assert (register["route"], register["status"], register["error_code"]) == \
            ("POST /subjects/{s}/versions", 200, None)
        assert (unknown["route"], unknown["status"], unknown["error_code"], unknown["errors"]) == \
            ("GET /subjects/{s}/versions/{v}", 404, 40401, ["40401"])
        assert unknown["request_id"] == register["request_id"] + 1
        assert unknown["peer"].startswith("127.0.0.1:") and unknown["latency_ms"] >= 0
        everything = broker.trace()
        assert {"SchemaRegistry", "Metadata"} <= {entry["api"] for entry in everything}
        assert all("api_key" in entry for entry in everything if entry["api"] != "SchemaRegistry")
        metadata = broker.trace(api="Metadata")
        assert metadata and all(entry["api"] == "Metadata" for entry in metadata)
        assert broker.trace(topic="traced-value") == []  # registry entries name no topic
        assert broker.trace(client_id="anyone") == []

        # GET /trace/stream offers them to its readers too.
        assert broker.admin_url is not None
        host, port = broker.admin_url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=20) as sock:
            sock.sendall(b"GET /trace/stream?api=SchemaRegistry HTTP/1.1\r\nHost: x\r\n\r\n")
            stream = EventReader(sock)
            stream.read_until(lambda: b"\r\n\r\n" in stream.buffer)
            assert stream.head.startswith(b"HTTP/1.1 200")
            assert _registry(broker, "GET", "/subjects")[1] == ["traced-value"]
            stream.read_until(lambda: len(stream.events()) >= 1)
            assert [(e["api"], e["route"], e["status"]) for e in stream.events()] == \
                [("SchemaRegistry", "GET /subjects", 200)]

        # The trace file's API filter lets the registry's requests through and no Kafka exchange.
        lines = poll_until(lambda: (lambda found: found if len(found) >= 3 else None)(
            [json.loads(line) for line in trace_file.read_text().splitlines()] if trace_file.exists() else []),
            timeout=20, message="registry requests in the trace file")
        assert [(line["api"], line["status"]) for line in lines] == \
            [("SchemaRegistry", 200), ("SchemaRegistry", 404), ("SchemaRegistry", 200)]
