"""The manual clock: timeouts of a minute and more are reached by advancing it, with real clients.

A broker started with minikafka.clock=manual keeps its time still until `advance_clock` (over HTTP in
process mode) moves it; the timers that the move passes run before the call returns, and the work they
start (transaction markers, rebalances) follows at once. No test here waits for real time to pass.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import json
import os
import select
import shutil
import struct
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.sync_group.v3.request import SyncGroupRequest
from minikafka.broker.config.config import ConfigError
from minikafka.protocol.codec import decode_response, encode_request
from minikafka.testing import Broker
from minikafka.testing.broker import MODES, BrokerError, Mode

from tests.support.wire import Wire

MANUAL = {"minikafka.clock": "manual"}
TRANSACTION_TIMEOUT_MS = 60_000
# Kafka's transaction.abort.timed.out.transaction.cleanup.interval.ms: the abort happens at the first
# check after the timeout, so the clock is moved past both.
ABORT_CHECK_INTERVAL_MS = 10_000
STOPPING_MEMBER_SESSION_MS = 6_000  # group.min.session.timeout.ms
SURVIVOR_SESSION_MS = 45_000


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(params=MODES)
def manual_broker(request: pytest.FixtureRequest) -> Iterator[Broker]:
    mode: Mode = request.param
    with Broker(MANUAL, mode=mode) as broker:
        yield broker


def _read_committed(broker: Broker, topic: str, timeout: float = 3.0) -> list[bytes]:
    """Everything read_committed returns from partition 0 within `timeout` (a bounded read to the end)."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": _name("reader"),
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "enable.partition.eof": True, "fetch.wait.max.ms": 50})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return values
                raise KafkaException(message.error())
            values.append(message.value())
    finally:
        consumer.close()
    raise AssertionError(f"read_committed did not reach the end of {topic} within {timeout}s (read {values})")


def _open_transaction(broker: Broker, topic: str, transactional_id: str, values: list[bytes]) -> Producer:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": transactional_id,
                         "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS, "linger.ms": 0})
    producer.init_transactions(15)
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(15) == 0
    return producer


def test_clock_reports_its_kind_and_only_a_manual_one_moves() -> None:
    with Broker() as system:
        assert system.clock()["clock"] == "system" and system.clock()["advanced_ms"] is None
        with pytest.raises(BrokerError, match="system clock"):
            system.advance_clock(1000)
    with Broker(MANUAL) as manual:
        before = manual.clock()
        assert before["clock"] == "manual" and before["advanced_ms"] == 0
        after = manual.advance_clock(90_000)
        assert after["now_ms"] == before["now_ms"] + 90_000 and after["advanced_ms"] == 90_000
        assert manual.clock()["now_ms"] == after["now_ms"], "the clock stays where it was moved"


def test_transaction_timeout_is_reached_by_advancing_the_clock(manual_broker: Broker) -> None:
    broker = manual_broker
    topic, transactional_id = _name("txn-timeout"), _name("tid")
    producer = _open_transaction(broker, topic, transactional_id, [b"never-1", b"never-2", b"never-3"])
    partition = broker.wait_for(
        lambda state: any(p["open_transaction_first_offset"] == 0
                          for p in state["topics"].get(topic, {}).get("partitions", {}).get("0", {})
                          .get("producers", [])))["topics"][topic]["partitions"]["0"]
    assert partition["last_stable_offset"] == 0 and partition["high_watermark"] == 3

    # Just short of the timeout (the first check runs after log.initial.task.delay.ms): still open.
    broker.advance_clock(TRANSACTION_TIMEOUT_MS)
    assert broker.state()["topics"][topic]["partitions"]["0"]["last_stable_offset"] == 0

    broker.advance_clock(ABORT_CHECK_INTERVAL_MS)
    aborted = broker.wait_until_lso(topic, 0, 4, timeout=10)  # 3 records and the ABORT marker
    assert aborted["high_watermark"] == aborted["log_end_offset"] == 4
    assert all(p["open_transaction_first_offset"] is None for p in aborted["producers"])
    assert _read_committed(broker, topic) == []

    # The coordinator bumped the epoch when it aborted: the old producer is fenced, as with Kafka.
    with pytest.raises(KafkaException) as raised:
        producer.commit_transaction(15)
    error = raised.value.args[0]
    assert error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH), error
    assert not error.txn_requires_abort() or error.fatal(), error

    successor = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": transactional_id,
                          "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS, "linger.ms": 0})
    successor.init_transactions(15)
    successor.begin_transaction()
    successor.produce(topic, b"committed", partition=0)
    successor.commit_transaction(15)
    assert _read_committed(broker, topic) == [b"committed"]


class _RawMember:
    """A group member speaking the wire protocol by hand, so it can stop heartbeating without leaving."""

    def __init__(self, broker: Broker, group: str, topic: str) -> None:
        # JoinGroup answers only when the rebalance completes: a longer timeout than Wire's default.
        self.wire = Wire(broker, timeout=30)
        self.group = group
        self.topic = topic
        self.member_id = ""
        self.correlation = 0

    def call(self, api_key: int, version: int, request: Any) -> Any:
        self.correlation += 1
        self.wire.send(encode_request(self.correlation, request))
        correlation, response = decode_response(self.wire.receive(), api_key, version)
        assert correlation == self.correlation
        return response

    def _subscription(self) -> bytes:
        """ConsumerProtocolSubscription v0: the topic list and null user data."""
        name = self.topic.encode()
        return struct.pack(">hih", 0, 1, len(name)) + name + struct.pack(">i", -1)

    def join_and_sync(self) -> int:
        """JoinGroup (twice: v4+ first hands out the member id) and SyncGroup; returns the generation."""
        for _attempt in range(2):
            joined = self.call(11, 5, JoinGroupRequest(
                group_id=self.group, session_timeout=datetime.timedelta(milliseconds=STOPPING_MEMBER_SESSION_MS),
                rebalance_timeout=datetime.timedelta(seconds=30),
                member_id=self.member_id, group_instance_id=None, protocol_type="consumer",
                protocols=(JoinGroupRequestProtocol(name="range", metadata=self._subscription()),
                           JoinGroupRequestProtocol(name="roundrobin", metadata=self._subscription()))))
            self.member_id = joined.member_id
            if joined.error_code == 79:  # MEMBER_ID_REQUIRED: join again with the id it came with
                continue
            assert joined.error_code == 0, joined
            assert joined.leader != self.member_id, "the consumer that was there first stays leader"
            synced = self.call(14, 3, SyncGroupRequest(group_id=self.group, generation_id=joined.generation_id,
                                                        member_id=self.member_id, group_instance_id=None,
                                                        assignments=()))
            assert synced.error_code == 0, synced
            return int(joined.generation_id)
        raise AssertionError("JoinGroup kept asking for a member id")

    def close(self) -> None:
        self.wire.sock.close()


def _group(state: dict[str, Any], group: str) -> dict[str, Any]:
    return state["groups"].get(group, {"state": "Dead", "generation": -1, "members": []})


def test_session_timeout_is_reached_by_advancing_the_clock() -> None:
    topic, group = _name("sessions"), _name("group")
    with Broker({**MANUAL, "num.partitions": 2}) as broker:
        survivor = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                             "session.timeout.ms": SURVIVOR_SESSION_MS, "heartbeat.interval.ms": 100,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        producer.produce(topic, b"created", partition=0)
        assert producer.flush(15) == 0
        survivor.subscribe([topic])
        stopping = _RawMember(broker, group, topic)
        try:
            deadline = time.monotonic() + 30
            while not survivor.assignment() and time.monotonic() < deadline:
                survivor.poll(0.1)
            assert survivor.assignment(), "the survivor joined the group"
            # The join completes once the survivor has rejoined, which it does from its poll loop.
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                joining = pool.submit(stopping.join_and_sync)
                while not joining.done() and time.monotonic() < deadline + 30:
                    survivor.poll(0.05)
                generation = joining.result(timeout=0)
            both = broker.wait_for(lambda state: _group(state, group)["state"] == "Stable"
                                   and len(_group(state, group)["members"]) == 2)
            assert _group(both, group)["generation"] == generation

            # The raw member now goes silent. Its 6 s session passes on the broker's clock; the
            # survivor's 45 s one does not, and it keeps heartbeating in real time.
            broker.advance_clock(STOPPING_MEMBER_SESSION_MS + 1)

            def rebalanced_without_it(state: dict[str, Any]) -> bool:
                survivor.poll(0)  # serve the survivor's rejoin, as its application loop would
                found = _group(state, group)
                members = [member["member_id"] for member in found["members"]]
                return found["state"] == "Stable" and found["generation"] > generation and \
                    len(members) == 1 and stopping.member_id not in members

            after = _group(broker.wait_for(rebalanced_without_it, timeout=20), group)
            assert after["leader"] == after["members"][0]["member_id"]
            assert "rdkafka" in after["members"][0]["client_id"]
        finally:
            stopping.close()
            survivor.close()


def test_log_append_time_segment_roll_and_retention_follow_the_clock() -> None:
    topic = _name("retention")
    with Broker(MANUAL) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        created = admin.create_topics([NewTopic(topic, 1, 1, config={
            # At the retention check below (330 s after the start) "old" is 330 s old and "new" 270 s: only the
            # first segment is past retention.ms (an expired active segment would be deleted too, as in Kafka).
            "message.timestamp.type": "LogAppendTime", "segment.ms": "60000", "retention.ms": "300000"})])
        created[topic].result(15)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
        first_ms = broker.clock()["now_ms"]
        producer.produce(topic, b"old", timestamp=1)
        assert producer.flush(15) == 0
        broker.advance_clock(60_001)
        second_ms = broker.clock()["now_ms"]
        producer.produce(topic, b"new", timestamp=1)
        assert producer.flush(15) == 0

        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": _name("reader"),
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([topic])
        stamps: list[int] = []
        deadline = time.monotonic() + 20
        try:
            while len(stamps) < 2 and time.monotonic() < deadline:
                message = consumer.poll(0.1)
                if message is not None and not message.error():
                    stamps.append(message.timestamp()[1])
        finally:
            consumer.close()
        assert stamps == [first_ms, second_ms], "LogAppendTime is the broker clock's, not the client's"
        partition = broker.state()["topics"][topic]["partitions"]["0"]
        assert partition["segments"] == 2, "the second append rolled: the segment spanned segment.ms"

        # Past retention.ms and the next retention check (log.retention.check.interval.ms 300000).
        broker.advance_clock(300_000)
        partition = broker.state()["topics"][topic]["partitions"]["0"]
        assert partition["log_start_offset"] == 1 and partition["segments"] == 1


def test_idle_connections_close_when_the_clock_passes_the_limit() -> None:
    with Broker({**MANUAL, "connections.max.idle.ms": 600_000}) as broker:
        idle = _RawMember(broker, "unused", "unused")
        try:
            # A request answered: the broker has set the connection up and noted its activity.
            assert idle.call(18, 0, ApiVersionsRequest()).error_code == 0
            broker.advance_clock(599_000)
            idle.wire.sock.settimeout(0.2)
            with pytest.raises(TimeoutError):
                idle.wire.sock.recv(1)  # still open: nothing to read, no end of stream
            broker.advance_clock(1_001)
            idle.wire.sock.settimeout(10)
            assert idle.wire.sock.recv(1) == b"", "closed by the broker once idle past connections.max.idle.ms"
        finally:
            idle.close()


def test_waiting_for_an_offset_that_is_not_reached_times_out(manual_broker: Broker) -> None:
    topic = _name("never")
    producer = Producer({"bootstrap.servers": manual_broker.bootstrap_servers})
    producer.produce(topic, b"one", partition=0)
    assert producer.flush(15) == 0
    assert manual_broker.wait_until_lso(topic, 0, 1)["last_stable_offset"] == 1
    with pytest.raises(TimeoutError, match="did not"):
        manual_broker.wait_until_lso(topic, 0, 2, timeout=0.2)


def _require(name: str) -> str:
    tool = shutil.which(name)
    if tool is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} is not installed")
        pytest.skip(f"{name} is not installed")
    return tool


def _curl(*args: str) -> Any:
    result = subprocess.run([_require("curl"), "--silent", "--show-error", "--fail-with-body", *args],
                            capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 0, (result.stdout, result.stderr)
    return json.loads(result.stdout)


def test_clock_and_state_wait_over_http_with_curl_and_kcat() -> None:
    """docs/control-plane.md's curl examples for the clock, with kcat (librdkafka) producing and consuming."""
    kcat, topic = _require("kcat"), _name("curl-clock")
    with Broker(MANUAL, mode="process") as broker:
        admin = broker.admin_url
        assert admin is not None
        started = _curl(f"{admin}/clock")
        assert started["clock"] == "manual" and started["advanced_ms"] == 0
        produced = subprocess.run([kcat, "-P", "-b", broker.bootstrap_servers, "-t", topic, "-p", "0"],
                                  input="one\ntwo\nthree\n", capture_output=True, text=True, timeout=30, check=False)
        assert produced.returncode == 0, produced.stderr
        waited = _curl(f"{admin}/state/wait?topic={topic}&partition=0&lso=3&timeout_ms=10000")
        assert waited["partition"]["last_stable_offset"] == waited["partition"]["high_watermark"] == 3

        advanced = _curl("-X", "POST", f"{admin}/clock/advance", "-d", '{"ms": 3600000}')
        assert advanced["advanced_ms"] == 3_600_000 and advanced["now_ms"] == started["now_ms"] + 3_600_000
        consumed = subprocess.run([kcat, "-C", "-b", broker.bootstrap_servers, "-t", topic, "-p", "0",
                                   "-o", "beginning", "-e", "-f", "%T %s\\n"],
                                  capture_output=True, text=True, timeout=30, check=False)
        assert consumed.returncode == 0, consumed.stderr
        rows = [line.split(" ", 1) for line in consumed.stdout.splitlines()]
        assert [value for _stamp, value in rows] == ["one", "two", "three"]
        # The clients' CreateTime is kept: an hour behind the advanced broker clock, not moved with it.
        assert all(int(stamp) < advanced["now_ms"] - 3_000_000 for stamp, _value in rows), rows


def test_cli_clock_flag_and_a_bad_clock_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"minikafka\.clock"):
        Broker({"minikafka.clock": "sundial"}).start()
    log_path = tmp_path / "broker.log"
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "minikafka.broker", "serve", "--port", "0", "--admin-port", "0", "--clock", "manual",
             "--data-dir", str(tmp_path / "data"), "--log-format", "json"], stdout=log_file, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        ready: dict[str, Any] = {}
        while not ready and time.monotonic() < deadline and process.poll() is None:
            lines = [json.loads(line) for line in log_path.read_text().splitlines() if '"broker ready"' in line]
            ready = lines[0] if lines else {}
            time.sleep(0.01)  # polling the log for the ready line, bounded by the deadline
        assert ready, log_path.read_text()
        with urllib.request.urlopen(f"http://127.0.0.1:{ready['admin_port']}/clock", timeout=10) as answer:
            assert json.loads(answer.read())["clock"] == "manual"
    finally:
        process.terminate()
        process.wait(30)


def test_fetch_long_poll_ends_in_real_time_under_a_manual_clock() -> None:
    """max_wait is the client's real-time wait: a Fetch whose min_bytes is never reached is answered after
    max_wait even though the manual clock stands still and appends keep waking it."""
    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic

    with Broker(MANUAL) as broker:
        topic = _name("manual-longpoll")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
        request = FetchRequest(
            max_wait=datetime.timedelta(milliseconds=500), min_bytes=1 << 30, max_bytes=1 << 20, isolation_level=0,
            session_id=0, session_epoch=-1, topics=(FetchTopic(topic=topic, partitions=(
                FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20, log_start_offset=-1),)),),
            forgotten_topics_data=(), rack_id="")
        waiting = Wire(broker)
        waiting.send(encode_request(1, request))
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
        answer = None
        deadline = time.monotonic() + 20
        while answer is None and time.monotonic() < deadline:
            # Each append wakes the parked fetch, which finds too few bytes and parks again.
            producer.produce(topic, b"x")
            producer.flush(5)
            readable, _, _ = select.select([waiting.sock], [], [], 0.05)
            if readable:
                answer = waiting.receive()
        assert answer is not None, "the fetch was never answered while appends kept waking it"
        corr, response = decode_response(answer, 1, 12)
        partition = response.responses[0].partitions[0]
        assert (corr, partition.error_code) == (1, 0)
        assert partition.high_watermark >= 1
        assert broker.clock()["advanced_ms"] == 0
        waiting.close()
