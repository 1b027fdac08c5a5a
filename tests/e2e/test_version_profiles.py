"""Kafka version profiles (`minikafka.kafka.version`): ApiVersions per release over the raw protocol, checked
against the ranges kafka-python recorded from real brokers (an independent copy of broker/config/versions.py's
source), versions outside the profile refused, and real clients against the 2.8 and 4.0 profiles."""

from __future__ import annotations

import socket
import struct
import uuid
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from kafka.net.compat import KafkaNetClient  # kafka-python 3's KafkaClient
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS
from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsV0
from kio.schema.join_group.v1.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.types import GroupId
from minikafka.broker.config.config import ConfigError
from minikafka.broker.handlers import all_handler_modules
from minikafka.protocol.build import build
from minikafka.protocol.codec import decode_response, encode_request, request_schema

from tests.support.brokers import process_broker
from tests.support.clients import create_topic
from tests.support.names import unique_topic

VERSION_KEY = "minikafka.kafka.version"
# profile -> the release kafka-python's recordings name it by
RELEASES = {"2.8": (2, 8), "3.x": (3, 9), **{f"3.{minor}": (3, minor) for minor in range(10)},
            "4.0": (4, 0), "4.1": (4, 1), "4.2": (4, 2)}


def _recv_exactly(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed by the broker")
        data += chunk
    return data


def _exchange(port: int, frame: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(frame)
        size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
        return _recv_exactly(sock, size)


def _advertised(port: int) -> dict[int, tuple[int, int]]:
    _corr, body = decode_response(_exchange(port, encode_request(1, ApiVersionsV0())), 18, 0)
    assert body.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}


def _expected(release: tuple[int, ...]) -> dict[int, tuple[int, int]]:
    """What we implement, cut to what that Kafka release's broker advertised."""
    theirs = BROKER_API_VERSIONS[release]
    expected = {}
    for module in all_handler_modules():
        ours = getattr(module, "ADVERTISED_VERSIONS", module.VERSIONS)
        if module.API_KEY not in theirs:
            continue
        low, high = max(ours.min, theirs[module.API_KEY][0]), min(ours.max, theirs[module.API_KEY][1])
        if low <= high:
            expected[int(module.API_KEY)] = (low, high)
    return expected


@pytest.mark.parametrize("profile", sorted(RELEASES))
def test_api_versions_are_the_release_s(broker_factory, profile: str) -> None:
    broker = broker_factory(**{VERSION_KEY: profile})
    assert _advertised(broker.port) == _expected(RELEASES[profile])


def test_profiles_differ_where_kafka_did(broker_factory) -> None:
    """Spot checks of the table itself, so a wrong copy in both places would still be caught."""
    old = _advertised(broker_factory(**{VERSION_KEY: "2.8"}).port)
    assert 65 not in old and 66 not in old, "DescribeTransactions and ListTransactions came with 3.0"
    assert old[18] == (0, 3) and old[0] == (0, 9) and old[3] == (0, 11)
    kraft = _advertised(broker_factory(**{VERSION_KEY: "4.0"}).port)
    assert kraft[11] == (2, 9), "Kafka 4.0 dropped JoinGroup v0-1 (KIP-896)"
    assert kraft[0] == (0, 12), "Kafka 4.x still advertises Produce v0 (KAFKA-18659); we serve up to 12"
    assert kraft[65] == (0, 0) and kraft[66] == (0, 1)
    newest = _advertised(broker_factory().port)
    assert newest == _expected((4, 2))
    assert newest[35] == (1, 4) and newest[43] == (0, 2) and newest[45] == (0, 1) and newest[46] == (0, 0)
    assert old[35] == (1, 2), "2.8 had DescribeLogDirs v0-2; v0 is not served (kio has no v0 schema)"
    assert old[43] == (0, 2) and old[45] == (0, 0) and old[46] == (0, 0)
    assert kraft[35] == (1, 4), "Kafka 4.0 dropped DescribeLogDirs v0 (KIP-896)"


def test_version_outside_the_profile_is_refused(broker_factory) -> None:
    broker = broker_factory(**{VERSION_KEY: "4.0"})
    request = JoinGroupRequest(group_id=GroupId("g"), session_timeout=timedelta(seconds=10),
                               rebalance_timeout=timedelta(seconds=10), member_id="", protocol_type="consumer",
                               protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),))
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(encode_request(3, request))
        assert sock.recv(1) == b"", "Kafka 4.0 closes the connection on JoinGroup v1"


def test_too_new_api_versions_gets_the_profile_s_list(broker_factory) -> None:
    broker = broker_factory(**{VERSION_KEY: "2.8"})
    client = b"new"
    # Header v2 and an ApiVersions v4 body (two empty compact strings, no tags), written by hand.
    body = struct.pack(">hhih", 18, 4, 9, len(client)) + client + b"\x00" + b"\x01\x01\x00"
    frame = _exchange(broker.port, struct.pack(">i", len(body)) + body)
    corr, error_code = struct.unpack_from(">ih", frame)
    assert (corr, error_code) == (9, 35), "ApiVersions v4 is newer than 2.8's v3: UNSUPPORTED_VERSION at v0"
    _corr, body = decode_response(frame, 18, 0)
    assert {k.api_key: (k.min_version, k.max_version) for k in body.api_keys} == _expected((2, 8))


def test_unknown_version_is_a_configuration_error(tmp_path) -> None:
    broker = process_broker(tmp_path / "data", tmp_path, {VERSION_KEY: "1.0"})
    # minikafka.testing checks the configuration before it spawns `minikafka serve`, which would refuse it too.
    with pytest.raises(ConfigError, match=r"minikafka\.kafka\.version"):
        broker.start()


@pytest.mark.parametrize("profile", ["2.8", "4.0"])
def test_confluent_round_trip(broker_factory, profile: str) -> None:
    broker = broker_factory(**{VERSION_KEY: profile})
    topic = unique_topic("profile")
    create_topic(broker.bootstrap_servers, topic, partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True})
    for index in range(20):
        producer.produce(topic, key=str(index).encode(), value=f"v{index}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    values: set[bytes] = set()
    try:
        for _ in range(300):  # bounded: at most 300 polls of 0.1 s
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                values.add(message.value())
                consumer.commit(message, asynchronous=False)
            if len(values) == 20:
                break
    finally:
        consumer.close()
    assert values == {f"v{index}".encode() for index in range(20)}


# kafka-python names a broker by the newest version of one API it serves (infer_broker_version_from_api_versions).
# It tells 3.9 by Fetch v17, 4.0 by ListOffsets v10, 4.1 by Produce v13 (topic ids) and 4.2 by ListOffsets v11.
@pytest.mark.parametrize(("profile", "detected"), [("2.8", (2, 8)), ("3.0", (3, 0)), ("3.x", (3, 9)),
                                                   ("4.0", (4, 0)), ("4.1", (4, 1)), ("4.2", (4, 2))])
def test_kafka_python_detects_the_release(broker_factory, profile: str, detected: tuple[int, int]) -> None:
    broker = broker_factory(**{VERSION_KEY: profile})
    client = KafkaNetClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        assert client.check_version(timeout_ms=10_000) == detected
    finally:
        client.close()


def test_list_offsets_v11_answers_earliest_pending_upload_as_kafka_4_2(broker) -> None:
    """KIP-1023's EARLIEST_PENDING_UPLOAD (-6): nothing is tiered here, so Kafka's answer for a topic without
    remote storage (offset, timestamp and epoch -1); before v11 the timestamp is UNSUPPORTED_VERSION."""
    topic = unique_topic("pending-upload")
    create_topic(broker.bootstrap_servers, topic)

    def ask(version: int) -> Any:
        request = build(request_schema(2, version), replica_id=-1, isolation_level=0, timeout=timedelta(seconds=5),
                        topics=[{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -6}]}])
        _corr, body = decode_response(_exchange(broker.port, encode_request(4, request)), 2, version)
        [partition] = body.topics[0].partitions
        return partition

    answer = ask(11)
    assert (answer.error_code, answer.offset, answer.timestamp, answer.leader_epoch) == (0, -1, -1, -1)
    assert ask(10).error_code == 35, "UNSUPPORTED_VERSION: -6 needs v11"
