"""The HTTP admin API from outside Python: curl and kcat, kafkajs with fetch(), and hostile input.

The broker runs as `minikafka serve --admin-port 0` (what Broker(mode="process") starts).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from minikafka.broker.control.admin_http import MAX_BODY_BYTES, MAX_HEAD_BYTES
from minikafka.testing import Broker

from tests.support.clients import consume, create_topic

pytestmark = pytest.mark.e2e

JS_DIR = Path(__file__).parent / "js"
CURL, KCAT, NODE = shutil.which("curl"), shutil.which("kcat"), shutil.which("node")


def _require(tool: str | None, name: str) -> str:
    if tool is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} is not installed")
        pytest.skip(f"{name} is not installed")
    return tool


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(mode="process") as broker:
        yield broker


@pytest.fixture
def admin(broker: Broker) -> Iterator[str]:
    assert broker.admin_url is not None
    yield broker.admin_url
    broker.clear_faults()


def _topic() -> str:
    return f"http-{uuid.uuid4().hex[:10]}"


def _curl(*args: str) -> Any:
    result = subprocess.run([_require(CURL, "curl"), "--silent", "--show-error", "--fail-with-body", *args],
                            capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 0, (result.stdout, result.stderr)
    return json.loads(result.stdout)


def _request(admin: str, method: str, path: str, body: bytes | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, Any]:
    host, port = admin.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def _raw(admin: str, data: bytes) -> tuple[int, Any]:
    """Send raw bytes; return the status and JSON body of the answer."""
    host, port = admin.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        # Answered and closed while we were still sending: read what it said.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(data)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(body)


def test_curl_fault_then_kcat_produces_through_it(broker: Broker, admin: str) -> None:
    """docs/control-plane.md's curl examples, with kcat (librdkafka) as the client that retries through the fault."""
    kcat = _require(KCAT, "kcat")
    topic = _topic()
    create_topic(broker.bootstrap_servers, topic)
    assert _curl(f"{admin}/health") == {"status": "ok"}
    added = _curl("-X", "POST", f"{admin}/faults", "-H", "Content-Type: application/json",
                  "-d", json.dumps({"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "count": 2, "topic": topic}))
    assert added["fault"]["remaining"] == 2 and added["fault"]["error_code"] == 6
    listed = _curl(f"{admin}/faults")["faults"]
    assert [rule["id"] for rule in listed] == [added["fault"]["id"]]

    lines = "".join(f"m{n}\n" for n in range(10))
    result = subprocess.run([kcat, "-b", broker.bootstrap_servers, "-P", "-t", topic,
                             "-X", "enable.idempotence=true", "-X", "linger.ms=0"],
                            input=lines, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert _curl(f"{admin}/faults") == {"faults": []}
    assert [record.value for record in consume(broker.bootstrap_servers, topic, 10)] == [
        f"m{n}".encode() for n in range(10)]
    state = _curl(f"{admin}/state")
    assert state["topics"][topic]["partitions"]["0"]["high_watermark"] == 10

    kept = _curl("-X", "POST", f"{admin}/faults", "-d", '{"api": "Fetch", "delay_ms": 5, "count": null}')["fault"]
    assert _curl(f"{admin}/faults/{kept['id']}")["fault"]["remaining"] is None
    assert _curl("-X", "DELETE", f"{admin}/faults/{kept['id']}") == {"removed": 1}
    assert _curl("-X", "DELETE", f"{admin}/faults") == {"removed": 0}


def test_kafkajs_injects_a_fault_with_fetch_and_produces_through_it(broker: Broker, admin: str) -> None:
    node = _require(NODE, "node")
    if not (JS_DIR / "node_modules" / "kafkajs").exists():
        _require(None, "kafkajs (make js)")
    topic = _topic()
    create_topic(broker.bootstrap_servers, topic)
    result = subprocess.run([node, str(JS_DIR / "fault_produce.js"), broker.bootstrap_servers, admin, topic, "50"],
                            capture_output=True, text=True, timeout=60, check=False)
    output = json.loads(result.stdout or "{}")
    assert result.returncode == 0 and "error" not in output, (output, result.stderr)
    assert output["added"]["api"] == "Produce" and output["added"]["remaining"] == 2
    assert output["left"] == []  # both injected errors were answered, and kafkajs retried through them
    assert output["highWatermark"] == 50
    assert [record.value for record in consume(broker.bootstrap_servers, topic, 50)] == [
        str(n).encode() for n in range(50)]


@pytest.mark.parametrize(("method", "path", "body", "status", "message"), [
    ("POST", "/faults", b"{not json", 400, "not JSON"),
    ("POST", "/faults", b"[1, 2]", 400, "JSON object"),
    ("POST", "/faults", b'{"api": "Produce", "error": "NO_SUCH_ERROR"}', 400, "unknown Kafka error"),
    ("POST", "/faults", b'{"api": "Produce", "error": 6, "colour": "red"}', 400, "unknown field"),
    ("POST", "/faults", b'{"api": "Produce", "error": 6, "count": "3"}', 400, "count"),
    ("POST", "/faults", b'{"api": "Produce", "error": 6, "topic": 7}', 400, "topic"),
    # A filter the API never carries could never fire: refused instead of kept as a silent no-op.
    ("POST", "/faults", b'{"api": "Metadata", "error": 15, "group_id": "billing"}', 400, "could never match"),
    ("POST", "/faults", b'{"api": "Fetch", "error": 6, "transactional_id": "t1"}', 400, "could never match"),
    ("POST", "/faults", b'{"api": "Heartbeat", "error": 6, "topic": "orders"}', 400, "could never match"),
    ("POST", "/faults", "\udcff".encode("utf-8", "surrogatepass"), 400, "not JSON"),
    ("GET", "/nowhere", None, 404, "no such resource"),
    ("GET", "/faults/12345", None, 404, "no fault rule"),
    ("DELETE", "/faults/abc", None, 404, "no fault rule"),
    ("PUT", "/faults", b"{}", 405, "not allowed"),
    ("POST", "/state", b"{}", 405, "not allowed"),
])
def test_bad_requests_get_4xx_and_json(admin: str, method: str, path: str, body: bytes | None, status: int,
                                       message: str) -> None:
    got_status, got = _request(admin, method, path, body)
    assert got_status == status and message in got["error"], got
    assert _request(admin, "GET", "/health") == (200, {"status": "ok"})
    assert _request(admin, "GET", "/faults") == (200, {"faults": []})


@pytest.mark.parametrize(("data", "status"), [
    (b"GET /health HTTP/1.1\r\nX-Filler: " + b"a" * (MAX_HEAD_BYTES * 2) + b"\r\n\r\n", 431),
    (b"POST /faults HTTP/1.1\r\nContent-Length: " + str(MAX_BODY_BYTES + 1).encode() + b"\r\n\r\n", 413),
    (b"POST /faults HTTP/1.1\r\nContent-Length: -5\r\n\r\n", 400),
    (b"POST /faults HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 411),
    (b"\x00\x01\x02 garbage\r\n\r\n", 400),
    (b"GET /health HTTP/1.1\r\nno colon here\r\n\r\n", 400),
])
def test_hostile_bytes_are_refused_and_the_broker_lives_on(broker: Broker, admin: str, data: bytes,
                                                           status: int) -> None:
    got_status, got = _raw(admin, data)
    assert got_status == status and got["error"]
    assert _request(admin, "GET", "/health") == (200, {"status": "ok"})
    topic = _topic()
    create_topic(broker.bootstrap_servers, topic)  # the Kafka listener is untouched


def _log_event(broker: Broker, event: str) -> dict[str, Any]:
    [line] = [json.loads(line) for line in broker.logs().splitlines() if f'"event": "{event}"' in line]
    return line  # type: ignore[no-any-return]


def test_off_unless_configured_and_loopback_by_default(broker_factory: Callable[..., Broker]) -> None:
    assert _log_event(broker_factory(), "broker ready")["admin_port"] is None
    with Broker() as in_process:
        assert in_process.admin_url is None
        assert in_process.faults() == []  # in-process, the Python methods need no listener
    enabled = broker_factory(**{"admin.listener.port": "0"})
    listening = _log_event(enabled, "admin listener ready")
    assert listening["host"] == "127.0.0.1"
    assert _log_event(enabled, "broker ready")["admin_port"] == listening["port"]
    assert _request(f"http://127.0.0.1:{listening['port']}", "GET", "/health") == (200, {"status": "ok"})


@pytest.mark.parametrize("mode", ["inprocess", "process"])
def test_a_pending_long_poll_does_not_hold_the_stop(mode: str) -> None:
    """A /state/wait that would wait a minute, and a connection that never sends its request, end when the
    broker stops instead of holding the stop until they time out."""
    with Broker({"admin.listener.port": 0}, mode=mode) as broker:
        topic = f"never-{uuid.uuid4().hex[:8]}"
        create_topic(broker.bootstrap_servers, topic)
        assert broker.admin_url is not None
        address = urllib.parse.urlsplit(broker.admin_url)
        host, port = address.hostname or "127.0.0.1", address.port or 0
        silent = socket.create_connection((host, port), timeout=5)
        waiting = http.client.HTTPConnection(host, port, timeout=120)
        waiting.request("GET", f"/state/wait?topic={topic}&partition=0&lso=1000000&timeout_ms=60000")
        # A later admin request answered: the listener has taken both connections (it serves them in order).
        assert topic in json.dumps(broker.state())
        started = time.monotonic()
        broker.stop()
        stopped_after = time.monotonic() - started
        with contextlib.suppress(OSError, http.client.HTTPException):
            waiting.getresponse()
        silent.close()
        waiting.close()
        # Far below the minute the long-poll asked for: the stop did not wait it out (a bound, not a speed).
        assert stopped_after < 30, f"the stop took {stopped_after:.1f} s"
