"""The schema registry's REST API over plain HTTP: Confluent's error codes and bodies for bad input, content
types, bounded bodies, persistent connections, config and mode endpoints."""

from __future__ import annotations

import http.client
import json
import socket
import urllib.parse
from typing import Any

import pytest
from minikafka.coordinator.schemas.formats import FORMATS

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
STRING = json.dumps({"schema": json.dumps({"type": "string"})})
RECORD = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})


class Registry:
    def __init__(self, url: str) -> None:
        parsed = urllib.parse.urlsplit(url)
        self.connection = http.client.HTTPConnection(parsed.hostname or "127.0.0.1", parsed.port, timeout=10)

    def call(self, method: str, path: str, body: Any = None, content_type: str = CONTENT_TYPE,
             raw: bytes | None = None) -> tuple[int, Any]:
        payload = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        headers = {"Content-Type": content_type} if payload is not None else {}
        self.connection.request(method, path, body=payload, headers=headers)
        response = self.connection.getresponse()
        data = response.read()
        assert response.getheader("Content-Type") == CONTENT_TYPE
        return response.status, json.loads(data)


@pytest.fixture
def registry(schema_registry_url: str) -> Registry:
    return Registry(schema_registry_url)


def test_one_connection_serves_many_requests(registry: Registry) -> None:
    _status, answer = registry.call("POST", "/subjects/s/versions", {"schema": RECORD})
    schema_id = answer["id"]
    assert registry.call("POST", "/subjects/s/versions", {"schema": RECORD}) == (200, {"id": schema_id})
    assert registry.call("GET", "/subjects") == (200, ["s"])
    assert registry.call("GET", "/subjects/s/versions") == (200, [1])
    assert registry.call("GET", f"/schemas/ids/{schema_id}/versions") == (200, [{"subject": "s", "version": 1}])
    assert registry.call("GET", f"/schemas/ids/{schema_id}/subjects") == (200, ["s"])
    assert registry.call("GET", f"/schemas/ids/{schema_id}") == (200, {"schema": RECORD})
    assert registry.call("GET", "/subjects/s/versions/1/schema") == (200, json.loads(RECORD))
    assert registry.call("POST", "/subjects/s", {"schema": RECORD})[1]["version"] == 1
    served = [name for name in ("JSON", "PROTOBUF", "AVRO") if name in FORMATS]  # Confluent's order
    assert registry.call("GET", "/schemas/types") == (200, served)
    assert registry.call("GET", "/schemas?subjectPrefix=s") == (200, [
        {"subject": "s", "version": 1, "id": schema_id, "schema": RECORD}])
    assert registry.call("GET", "/schemas?subjectPrefix=nope") == (200, [])
    assert registry.call("GET", "/") == (200, {})


@pytest.mark.parametrize(("method", "path", "body", "status", "code"), [
    ("POST", "/subjects/s/versions", {"schema": "{not json"}, 422, 42201),
    ("POST", "/subjects/s/versions", {"schema": '{"type": "nosuch"}'}, 422, 42201),
    ("POST", "/subjects/s/versions", {"schema": ""}, 422, 42201),
    ("POST", "/subjects/s/versions", {"schema": "{}", "schemaType": "XML"}, 422, 42201),
    ("POST", "/subjects/s/versions", {"schema": RECORD, "references": [{"name": "x"}]}, 422, 422),
    ("POST", "/subjects/s/versions", {"schema": RECORD, "references": [
        {"name": "x", "subject": "missing", "version": 1}]}, 422, 42201),
    ("POST", "/subjects/s/versions", [1, 2], 422, 422),
    ("GET", "/subjects/nosuch/versions", None, 404, 40401),
    ("GET", "/subjects/s/versions/0", None, 422, 42202),
    ("GET", "/subjects/s/versions/abc", None, 422, 42202),
    ("GET", "/schemas/ids/999999", None, 404, 40403),
    ("GET", "/config/s", None, 404, 40408),
    ("PUT", "/config", {"compatibility": "SIDEWAYS"}, 422, 42203),
    ("PUT", "/mode", {"mode": "WRITEONLY"}, 422, 42204),
    ("GET", "/mode/s", None, 404, 40409),
    ("DELETE", "/subjects", None, 405, 405),
    ("GET", "/nosuch", None, 404, 404),
])
def test_bad_requests_get_confluents_codes(registry: Registry, method: str, path: str, body: Any, status: int,
                                           code: int) -> None:
    registry.call("POST", "/subjects/s/versions", {"schema": RECORD})
    answer_status, answer = registry.call(method, path, body)
    assert (answer_status, answer["error_code"]) == (status, code), answer
    assert isinstance(answer["message"], str) and "Traceback" not in answer["message"]


def test_wrong_content_type_bad_json_and_huge_bodies(registry: Registry, schema_registry_url: str) -> None:
    assert registry.call("POST", "/subjects/s/versions", raw=STRING.encode(), content_type="text/plain")[0] == 415
    assert registry.call("POST", "/subjects/s/versions", raw=b"{oops")[1]["error_code"] == 400
    assert registry.call("POST", "/subjects/s/versions", raw=STRING.encode(), content_type="application/json")[0] == 200
    parsed = urllib.parse.urlsplit(schema_registry_url)
    with socket.create_connection((parsed.hostname, parsed.port), timeout=10) as sock:
        sock.sendall(b"POST /subjects/s/versions HTTP/1.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100000000\r\n\r\n")
        answer = sock.makefile("rb").read()
    assert answer.startswith(b"HTTP/1.1 413 ")
    with socket.create_connection((parsed.hostname, parsed.port), timeout=10) as sock:
        sock.sendall(b"garbage\r\n\r\n")
        assert sock.makefile("rb").read().startswith(b"HTTP/1.1 400 ")


def test_config_mode_and_compatibility_endpoints(registry: Registry) -> None:
    assert registry.call("GET", "/config") == (200, {"compatibilityLevel": "BACKWARD"})
    assert registry.call("GET", "/config/s?defaultToGlobal=true") == (200, {"compatibilityLevel": "BACKWARD"})
    assert registry.call("PUT", "/config", {"compatibility": "full"}) == (200, {"compatibility": "FULL"})
    registry.call("POST", "/subjects/s/versions", {"schema": RECORD})
    assert registry.call("PUT", "/config/s", {"compatibility": "NONE"}) == (200, {"compatibility": "NONE"})
    assert registry.call("DELETE", "/config/s") == (200, {"compatibilityLevel": "NONE"})
    assert registry.call("DELETE", "/config") == (200, {"compatibilityLevel": "FULL"})
    renamed = json.dumps({"type": "record", "name": "R", "fields": [{"name": "b", "type": "int"}]})
    status, answer = registry.call("POST", "/compatibility/subjects/s/versions/latest?verbose=true",
                                   {"schema": renamed})
    assert status == 200 and answer["is_compatible"] is False
    assert answer["messages"][0].startswith("{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE'")
    assert registry.call("POST", "/compatibility/subjects/s/versions", {"schema": RECORD}) == (
        200, {"is_compatible": True})
    assert registry.call("GET", "/mode") == (200, {"mode": "READWRITE"})
    assert registry.call("PUT", "/mode/s", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    assert registry.call("POST", "/subjects/s/versions", {"schema": renamed})[1]["error_code"] == 42205
    assert registry.call("DELETE", "/mode/s") == (200, {"mode": "READONLY"})
    assert registry.call("PUT", "/mode", {"mode": "IMPORT"})[1]["error_code"] == 42205  # subjects exist
    assert registry.call("PUT", "/mode?force=true", {"mode": "IMPORT"}) == (200, {"mode": "IMPORT"})
    assert registry.call("PUT", "/mode", {"mode": "READWRITE"}) == (200, {"mode": "READWRITE"})


def test_soft_and_permanent_deletes(registry: Registry) -> None:
    registry.call("POST", "/subjects/s/versions", {"schema": RECORD})
    assert registry.call("DELETE", "/subjects/s/versions/1?permanent=true")[1]["error_code"] == 40407
    assert registry.call("DELETE", "/subjects/s/versions/latest") == (200, 1)
    assert registry.call("DELETE", "/subjects/s/versions/1")[1]["error_code"] == 40406
    assert registry.call("GET", "/subjects?deleted=true") == (200, ["s"])
    assert registry.call("GET", "/subjects/s/versions/1?deleted=true")[1]["version"] == 1
    assert registry.call("DELETE", "/subjects/s")[1]["error_code"] == 40404
    assert registry.call("DELETE", "/subjects/s?permanent=true") == (200, [1])
    assert registry.call("GET", "/subjects?deleted=true") == (200, [])


def test_expect_100_continue_and_http_1_0(schema_registry_url: str) -> None:
    parsed = urllib.parse.urlsplit(schema_registry_url)
    body = json.dumps({"schema": RECORD, "padding": "x" * 2000}).encode()
    with socket.create_connection((parsed.hostname, parsed.port), timeout=10) as sock:
        sock.sendall(b"POST /subjects/big/versions HTTP/1.1\r\nContent-Type: application/json\r\n"
                     b"Expect: 100-continue\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n")
        stream = sock.makefile("rb")
        assert stream.readline() == b"HTTP/1.1 100 Continue\r\n"
        assert stream.readline() == b"\r\n"
        sock.sendall(body)
        assert stream.readline().startswith(b"HTTP/1.1 200 ")
    with socket.create_connection((parsed.hostname, parsed.port), timeout=10) as sock:
        sock.sendall(b"GET /subjects HTTP/1.0\r\n\r\n")
        answer = sock.makefile("rb").read()  # ends: HTTP/1.0 closes after one answer
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b'["big"]')
