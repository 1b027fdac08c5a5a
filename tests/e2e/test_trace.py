"""The flight recorder against a broker that confluent-kafka drove: `--trace FILE`, its filters,
`--trace-records`, GET /trace, GET /trace/stream and Broker.trace().

The broker runs as `minikafka serve --trace FILE --admin-port 0` (the flags users type, not overrides).
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from minikafka.testing import Broker

from tests.support.clients import consume, create_topic, transactional_producer
from tests.support.descriptors import open_descriptor_targets
from tests.support.names import unique_topic
from tests.support.waiting import poll_until

pytestmark = pytest.mark.e2e

ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
DEADLINE_S = 20.0


class TracedBroker(Broker):
    """A broker subprocess run with `--trace` (and more trace flags) and its admin listener on a free port."""

    def __init__(self, tmp_path: Path, *flags: str) -> None:
        self.trace_path = tmp_path / "trace.jsonl"
        super().__init__(mode="process", data_dir=tmp_path / "data", log_file=tmp_path / "logs" / "broker.log",
                         serve_args=("--trace", str(self.trace_path), "--admin-port", "0", *flags))

    @property
    def admin(self) -> str:
        for line in self.run_log().splitlines():
            if '"broker ready"' in line:
                return f"127.0.0.1:{json.loads(line)['admin_port']}"
        raise AssertionError("no ready line")

    def lines(self) -> list[dict[str, Any]]:
        text = self.trace_path.read_text() if self.trace_path.exists() else ""
        return [json.loads(line) for line in text.splitlines()]

    def wait_lines(self, predicate: Callable[[list[dict[str, Any]]], bool], message: str) -> list[dict[str, Any]]:
        return poll_until(lambda: (lambda lines: lines if predicate(lines) else None)(self.lines()),
                          timeout=DEADLINE_S, message=message)


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[Callable[..., TracedBroker]]:
    started: list[TracedBroker] = []

    def start(*flags: str) -> TracedBroker:
        broker = TracedBroker(tmp_path / f"b{len(started)}", *flags)
        started.append(broker)
        return broker.start()

    yield start
    for broker in started:
        try:
            broker.stop()
        except Exception:
            broker.kill()
        finally:
            broker.close()


def _get(admin: str, path: str) -> tuple[int, Any]:
    host, port = admin.split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=DEADLINE_S)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def _of(lines: list[dict[str, Any]], api: str, client_id: str | None = None) -> list[dict[str, Any]]:
    return [line for line in lines if line["api"] == api and (client_id is None or line["client_id"] == client_id)]


def _batches(entry: dict[str, Any], side: str) -> list[dict[str, Any]]:
    if side == "request":  # Produce
        return [batch for topic in entry["request"]["topic_data"] for partition in topic["partition_data"]
                for batch in (partition["records"] or {"batches": []})["batches"]]
    return [batch for topic in entry["response"]["responses"] for partition in topic["partitions"]
            for batch in (partition["records"] or {"batches": []})["batches"]]


def test_transactional_producer_flow(traced: Callable[..., TracedBroker]) -> None:
    broker = traced("--trace-records")
    topic = unique_topic("trace-txn")
    create_topic(broker.bootstrap_servers, topic)
    transactional_id = unique_topic("tid")
    client_id = "trace-txn-client"
    producer = transactional_producer(broker.bootstrap_servers, transactional_id, **{"client.id": client_id,
                                                                             "linger.ms": 50})
    producer.begin_transaction()
    for index in range(3):
        producer.produce(topic, key=f"k{index}".encode(), value=f"value {index}".encode(), partition=0,
                         headers=[("h", b"\x00\xff")])
    producer.commit_transaction(15)
    lines = broker.wait_lines(lambda lines: bool(_of(lines, "EndTxn", client_id)), "the EndTxn line")
    mine = [line for line in lines if line["client_id"] == client_id]
    for api in ("FindCoordinator", "InitProducerId", "AddPartitionsToTxn", "Produce", "EndTxn"):
        assert _of(mine, api), f"no {api} line in {[line['api'] for line in mine]}"

    # Per connection, correlation ids go up as the client numbered its requests.
    by_connection: dict[int, list[int]] = {}
    for line in mine:
        by_connection.setdefault(line["connection_id"], []).append(line["correlation_id"])
        assert ISO_MS.match(line["time"]), line["time"]
        assert line["peer"].startswith("127.0.0.1:")
        assert line["latency_ms"] >= 0 and line["outcome"] == "answered"
    for ids in by_connection.values():
        assert ids == sorted(ids) and len(set(ids)) == len(ids), ids

    [init] = _of(mine, "InitProducerId")
    assert init["request"]["transactional_id"] == transactional_id
    assert init["response"]["error_code"] == "NONE" and init["errors"] == []
    producer_id, epoch = init["response"]["producer_id"], init["response"]["producer_epoch"]

    [add] = _of(mine, "AddPartitionsToTxn")
    assert topic in add["topics"] and add["errors"] == []

    # The batches as the client built them: transactional, its producer id and epoch, sequences from 0.
    produced = [batch for line in _of(mine, "Produce") for batch in _batches(line, "request")]
    assert sum(batch["count"] for batch in produced) == 3
    sequence = 0
    for batch in produced:
        assert batch["isTransactional"] is True and batch["isControl"] is False
        assert (batch["producerId"], batch["producerEpoch"]) == (producer_id, epoch)
        assert batch["baseSequence"] == sequence
        sequence += batch["count"]
    records = [record for batch in produced for record in batch["records"]]
    assert [(r["key"], r["value"]) for r in records] == [(f"k{i}", f"value {i}") for i in range(3)]
    assert records[0]["headers"] == [{"key": "h", "value": {"base64": "AP8="}}]
    assert all(line["request"]["transactional_id"] == transactional_id for line in _of(mine, "Produce"))

    [end] = _of(mine, "EndTxn")
    assert end["request"]["committed"] is True
    assert (end["request"]["producer_id"], end["request"]["producer_epoch"]) == (producer_id, epoch)
    assert end["response"]["error_code"] == "NONE" and end["errors"] == []

    # What a consumer fetches back: the same batches and the broker's COMMIT marker after them.
    assert len(consume(broker.bootstrap_servers, topic, 3, isolation="read_committed")) == 3
    fetched = broker.wait_lines(
        lambda lines: any(batch["isControl"] for line in _of(lines, "Fetch") for batch in _batches(line, "response")),
        "a Fetch response with the commit marker")
    batches = [batch for line in _of(fetched, "Fetch") for batch in _batches(line, "response")]
    data = [batch for batch in batches if not batch["isControl"]]
    assert [(b["producerId"], b["producerEpoch"], b["baseSequence"], b["count"]) for b in data[:len(produced)]] == \
        [(b["producerId"], b["producerEpoch"], b["baseSequence"], b["count"]) for b in produced]
    [marker] = {json.dumps(batch, sort_keys=True) for batch in batches if batch["isControl"]}
    marker_batch = json.loads(marker)
    assert marker_batch["producerId"] == producer_id and marker_batch["isTransactional"] is True
    assert marker_batch["records"][0]["endTxnMarker"] == "COMMIT"

    # The ring behind GET /trace keeps batch summaries only, --trace-records or not.
    status, body = _get(broker.admin, f"/trace?api=Produce&client_id={client_id}")
    assert status == 200 and body["exchanges"]
    for batch in _batches(body["exchanges"][-1], "request"):
        assert "records" not in batch and batch["producerId"] == producer_id


def test_injected_fault_shows_its_error_name(traced: Callable[..., TracedBroker]) -> None:
    broker = traced()
    topic = unique_topic("trace-fault")
    create_topic(broker.bootstrap_servers, topic)
    client_id = "trace-fault-client"
    producer = transactional_producer(broker.bootstrap_servers, unique_topic("tid"), **{"client.id": client_id})
    request = urllib.request.Request(f"http://{broker.admin}/faults", method="POST",
                                     data=json.dumps({"api": "EndTxn", "error": "NOT_COORDINATOR"}).encode())
    with urllib.request.urlopen(request, timeout=DEADLINE_S) as response:
        assert response.status == 201
    producer.begin_transaction()
    producer.produce(topic, value=b"v", partition=0)
    producer.commit_transaction(15)  # librdkafka looks the coordinator up again and retries
    lines = broker.wait_lines(lambda lines: len(_of(lines, "EndTxn", client_id)) >= 2, "two EndTxn lines")
    first, *rest = _of(lines, "EndTxn", client_id)
    assert first["response"]["error_code"] == "NOT_COORDINATOR" and first["errors"] == ["NOT_COORDINATOR"]
    assert rest[-1]["response"]["error_code"] == "NONE" and rest[-1]["errors"] == []
    status, body = _get(broker.admin, f"/trace?api=EndTxn&client_id={client_id}&limit=1")
    assert status == 200 and [entry["errors"] for entry in body["exchanges"]] == [[]]


def test_filters(traced: Callable[..., TracedBroker]) -> None:
    keep, drop = unique_topic("keep"), unique_topic("drop")
    broker = traced("--trace-api", "Produce", "--trace-api", "EndTxn", "--trace-client-id", "alpha",
                    "--trace-topic", keep)
    create_topic(broker.bootstrap_servers, keep)
    create_topic(broker.bootstrap_servers, drop)
    alpha = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "alpha", "linger.ms": 0})
    beta = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "beta", "linger.ms": 0})
    for producer, topic in ((alpha, drop), (alpha, keep), (beta, keep), (beta, drop)):
        producer.produce(topic, value=b"x")
        assert producer.flush(DEADLINE_S) == 0
    # beta's produce to `drop` is the last request; once the ring has it, every line is written.
    poll_until(lambda: _get(broker.admin, "/trace?api=Produce&client_id=beta&topic=" + drop)[1]["exchanges"],
               timeout=DEADLINE_S, message="beta's last produce in the ring")
    lines = broker.lines()
    assert lines, "the filtered trace is empty"
    assert {(line["api"], line["client_id"]) for line in lines} == {("Produce", "alpha")}
    assert all(keep in line["topics"] for line in lines)

    # The ring keeps every exchange; GET /trace filters by its own query parameters.
    status, body = _get(broker.admin, "/trace?client_id=beta")
    assert status == 200 and {"ApiVersions", "Metadata", "Produce"} <= {e["api"] for e in body["exchanges"]}
    status, body = _get(broker.admin, "/trace?api=Produce&topic=" + urllib.parse.quote(drop))
    assert status == 200 and sorted(e["client_id"] for e in body["exchanges"]) == ["alpha", "beta"]
    assert all(e["topics"] == [drop] for e in body["exchanges"])
    status, body = _get(broker.admin, "/trace?api=Produce&limit=2")
    assert status == 200 and len(body["exchanges"]) == 2
    assert body["exchanges"][-1]["client_id"] == "beta" and body["exchanges"][-1]["topics"] == [drop]
    status, body = _get(broker.admin, "/trace?api=NoSuchApi")
    assert status == 400 and "NoSuchApi" in body["error"]
    status, body = _get(broker.admin, "/trace?limit=0")
    assert status == 400


class EventReader:
    """The raw bytes of one server-sent events response, read with a deadline."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""
        self.ended = False

    @property
    def head(self) -> bytes:
        return self.buffer.partition(b"\r\n\r\n")[0]

    def events(self) -> list[dict[str, Any]]:
        _head, sep, rest = self.buffer.partition(b"\r\n\r\n")
        complete = rest.rpartition(b"\n\n")[0]  # an event counts once its blank line arrived
        return [json.loads(line[6:]) for line in complete.split(b"\n") if line.startswith(b"data: ")] if sep else []

    def read_until(self, done: Callable[[], bool], timeout: float = DEADLINE_S) -> None:
        deadline = time.monotonic() + timeout
        for _ in range(100_000):  # each turn reads at least one byte or times out; the deadline ends it
            if done() or self.ended or time.monotonic() > deadline:
                return
            self.sock.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                continue
            self.ended = not chunk
            self.buffer += chunk


def test_trace_stream(traced: Callable[..., TracedBroker]) -> None:
    broker = traced()
    topic = unique_topic("trace-sse")
    create_topic(broker.bootstrap_servers, topic)
    host, port = broker.admin.split(":")
    with socket.create_connection((host, int(port)), timeout=DEADLINE_S) as sock:
        sock.sendall(b"GET /trace/stream?client_id=sse-client&api=Produce HTTP/1.1\r\nHost: x\r\n\r\n")
        stream = EventReader(sock)
        stream.read_until(lambda: b"\r\n\r\n" in stream.buffer)
        assert stream.head.startswith(b"HTTP/1.1 200") and b"text/event-stream" in stream.head
        other = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "other", "linger.ms": 0})
        other.produce(topic, value=b"not for the stream")
        assert other.flush(DEADLINE_S) == 0
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "sse-client", "linger.ms": 0})
        for index in range(3):
            producer.produce(topic, value=b"v%d" % index)
            assert producer.flush(DEADLINE_S) == 0
        stream.read_until(lambda: len(stream.events()) >= 3)
        events = stream.events()
        assert len(events) == 3
        assert {(e["api"], e["client_id"]) for e in events} == {("Produce", "sse-client")}
        assert [e["correlation_id"] for e in events] == sorted(e["correlation_id"] for e in events)
        assert all(e["topics"] == [topic] and e["request"]["topic_data"][0]["partition_data"][0]["records"]
                   ["batches"][0]["count"] == 1 for e in events)

        # The stream ends (EOF) when the broker stops.
        assert broker.stop() == 0
        stream.read_until(lambda: False)
        assert stream.ended, "the stream did not end with the broker"


def test_bad_stream_requests(traced: Callable[..., TracedBroker]) -> None:
    broker = traced()
    status, body = _get(broker.admin, "/trace/stream?api=Nope")
    assert status == 400 and "Nope" in body["error"]


def test_broker_trace_in_process() -> None:
    with Broker() as broker:
        topic = unique_topic("trace-inproc")
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "inproc", "linger.ms": 0})
        producer.produce(topic, key=b"k", value=b"v")
        assert producer.flush(DEADLINE_S) == 0
        [entry] = broker.trace(api="Produce", client_id="inproc")
        assert entry["topics"] == [topic] and entry["response"]["responses"][0]["partition_responses"][0][
            "error_code"] == "NONE"
        assert [e["api"] for e in broker.trace(limit=1, client_id="inproc")] == ["Produce"]
        assert broker.trace(topic="no-such-topic") == []
        with pytest.raises(ValueError, match="NoSuchApi"):
            broker.trace(api="NoSuchApi")
    with Broker({"minikafka.trace.ring.size": 0}) as broker:
        from minikafka.testing.broker import BrokerError

        with pytest.raises(BrokerError, match="off"):
            broker.trace()


def test_a_deleted_topic_that_was_fetched_keeps_no_file_open(traced: Callable[..., TracedBroker]) -> None:
    """A Fetch's big record sets are sent from the segment files and the ring keeps the newest exchanges
    whole, file slices included; deleting the topic must still close its files (and free their space)
    without waiting for other record-holding exchanges to push the Fetch out of the ring."""
    from confluent_kafka.admin import AdminClient

    broker = traced()
    assert broker.alive
    topic = unique_topic("fetched-then-deleted")
    create_topic(broker.bootstrap_servers, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 50, "batch.size": 1 << 20})
    values = [bytes([index]) * 20_000 for index in range(10)]  # one batch of 200 KB: a file region when fetched
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(DEADLINE_S) == 0
    assert [record.value for record in consume(broker.bootstrap_servers, topic, len(values))] == values
    pid = broker.pid

    def topic_files_open() -> list[str]:
        return [target for target in open_descriptor_targets(pid) if f"/{topic}-0" in target]

    assert topic_files_open()  # the live segment, as before any deletion
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.delete_topics([topic], operation_timeout=10)[topic].result(timeout=DEADLINE_S)
    poll_until(lambda: not topic_files_open(), timeout=DEADLINE_S,
               message=f"the broker to close every file of the deleted topic {topic}")
    # The ring still shows what was fetched: its summaries were read from the files before they closed.
    status, body = _get(broker.admin, "/trace?api=Fetch")
    assert status == 200
    fetched = {offset for entry in body["exchanges"] for batch in _batches(entry, "response")
               for offset in range(batch["baseOffset"], batch["lastOffset"] + 1)}
    assert fetched >= set(range(len(values)))
