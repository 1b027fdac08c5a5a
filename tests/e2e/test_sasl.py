"""SASL over SASL_PLAINTEXT with every client and every mechanism it supports; SCRAM credentials managed
through AlterUserScramCredentials; refused logins; nothing served before authentication."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import socket
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v12.request import MetadataRequest
from minikafka.protocol.codec import decode_response, encode_request
from minikafka.testing import Broker

from tests.support.names import unique_topic

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
SASL_BROKER = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    "minikafka.scram.users": "carol:carol-secret",
}
JS_DIR = Path(__file__).parent / "js"
DEADLINE_S = 30.0


@pytest.fixture
def sasl_broker(broker_factory: Callable[..., Broker]) -> Broker:
    return broker_factory(**SASL_BROKER)


def _confluent(bootstrap: str, mechanism: str, user: str = "", password: str = "") -> dict[str, Any]:
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                              "sasl.mechanism": mechanism}
    if mechanism == "OAUTHBEARER":
        config.update({"enable.sasl.oauthbearer.unsecure.jwt": True, "sasl.oauthbearer.config": f"principal={user}"})
    else:
        config.update({"sasl.username": user, "sasl.password": password})
    return config


def _confluent_round_trip(bootstrap: str, config: dict[str, Any]) -> list[bytes]:
    topic = unique_topic("sasl")
    admin = AdminClient(config)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(DEADLINE_S)
    producer = Producer({**config, "enable.idempotence": True})
    for index in range(3):
        producer.produce(topic, f"v{index}".encode())
    assert producer.flush(DEADLINE_S) == 0
    consumer = Consumer({**config, "group.id": unique_topic("g"), "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(values) < 3 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    return values


@pytest.mark.parametrize(("mechanism", "user", "password"), [
    ("PLAIN", "alice", "alice-secret"),
    ("SCRAM-SHA-256", "carol", "carol-secret"),
    ("SCRAM-SHA-512", "carol", "carol-secret"),
    ("OAUTHBEARER", "dave", ""),
])
def test_confluent_kafka_logs_in_with_each_mechanism(sasl_broker: Broker, mechanism: str, user: str,
                                                       password: str) -> None:
    values = _confluent_round_trip(sasl_broker.bootstrap_servers, _confluent(sasl_broker.bootstrap_servers, mechanism,
                                                                             user, password))
    assert values == [b"v0", b"v1", b"v2"]
    assert f'"principal": "User:{user}"' in sasl_broker.logs() or f"User:{user}" in sasl_broker.logs()


@pytest.mark.parametrize(("mechanism", "user", "password"), [
    ("PLAIN", "alice", "wrong"),
    ("PLAIN", "mallory", "alice-secret"),
    ("SCRAM-SHA-256", "carol", "wrong"),
    ("SCRAM-SHA-512", "nobody", "carol-secret"),
])
def test_confluent_kafka_reports_refused_logins_and_the_broker_carries_on(
        sasl_broker: Broker, mechanism: str, user: str, password: str) -> None:
    errors: list[str] = []
    admin = AdminClient({**_confluent(sasl_broker.bootstrap_servers, mechanism, user, password),
                         "error_cb": lambda error: errors.append(error.str())})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    deadline = time.monotonic() + DEADLINE_S
    while not errors and time.monotonic() < deadline:
        admin.poll(0.2)  # error_cb is served by poll
    assert any("Authentication failed" in error or "SASL authentication error" in error for error in errors), errors
    assert "SASL authentication failed" in sasl_broker.logs()
    good = AdminClient(_confluent(sasl_broker.bootstrap_servers, "PLAIN", "alice", "alice-secret"))
    assert good.list_topics(timeout=DEADLINE_S).brokers, "another client still logs in"


def _frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
    return sock.recv(size, socket.MSG_WAITALL)


def test_nothing_but_api_versions_and_the_handshake_is_served_before_authentication(
        sasl_broker: Broker) -> None:
    with socket.create_connection(("127.0.0.1", sasl_broker.port), timeout=DEADLINE_S) as sock:
        sock.sendall(encode_request(1, ApiVersionsRequest(client_software_name="t", client_software_version="1")))
        correlation_id, versions = decode_response(_frame(sock), 18, 3)
        assert correlation_id == 1 and versions.error_code == 0
        assert {17, 36} <= {api.api_key for api in versions.api_keys}
        sock.sendall(encode_request(2, MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                       include_topic_authorized_operations=False)))
        assert sock.recv(4) == b"", "the broker closes the connection without answering"
    assert "before SASL authentication" in sasl_broker.logs()


def test_scram_users_added_and_removed_through_the_admin_api_survive_a_restart(sasl_broker: Broker) -> None:
    admin = AdminClient(_confluent(sasl_broker.bootstrap_servers, "PLAIN", "admin", "admin-secret"))
    upsert = UserScramCredentialUpsertion("erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                          b"erin-secret", b"salt-of-erin")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(DEADLINE_S)
    described = admin.describe_user_scram_credentials(["erin"])["erin"].result(DEADLINE_S)
    infos = described.scram_credential_infos
    assert [(info.mechanism, info.iterations) for info in infos] == [(ScramMechanism.SCRAM_SHA_512, 8192)]
    everyone = admin.describe_user_scram_credentials().result(DEADLINE_S)
    assert set(everyone) == {"carol", "erin"}
    with pytest.raises(KafkaException, match=r"RESOURCE_NOT_FOUND|does not exist"):
        admin.describe_user_scram_credentials(["frank"])["frank"].result(DEADLINE_S)

    sasl_broker.restart()
    erin = _confluent(sasl_broker.bootstrap_servers, "SCRAM-SHA-512", "erin", "erin-secret")
    assert _confluent_round_trip(sasl_broker.bootstrap_servers, erin) == [b"v0", b"v1", b"v2"]
    assert not (sasl_broker.data_dir / "scram-credentials.json").read_text().count("erin-secret")


def test_kafka_python_logs_in_with_plain_and_scram(sasl_broker: Broker) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KpTopicPartition

    for mechanism, user, password in (("PLAIN", "alice", "alice-secret"), ("SCRAM-SHA-512", "carol", "carol-secret")):
        topic = unique_topic("kp-sasl")
        config = {"bootstrap_servers": sasl_broker.bootstrap_servers, "security_protocol": "SASL_PLAINTEXT",
                  "sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password}
        producer = KafkaProducer(**config)
        producer.send(topic, b"kafka-python").get(timeout=DEADLINE_S)
        producer.close()
        consumer = KafkaConsumer(**config, consumer_timeout_ms=10_000)
        consumer.assign([KpTopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        assert [record.value for record in consumer][:1] == [b"kafka-python"], mechanism
        consumer.close()


def test_kafka_python_reports_a_refused_login_as_an_authentication_error(
        sasl_broker: Broker, caplog: pytest.LogCaptureFixture) -> None:
    """Kafka keeps the connection open for connection.failed.authentication.delay.ms after the error, reading
    nothing: kafka-python reads the SaslAuthenticate error only because the close comes after it (closed at
    once, it reports a lost socket)."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    with caplog.at_level(logging.ERROR, logger="kafka"), pytest.raises(KafkaTimeoutError):
        KafkaProducer(bootstrap_servers=sasl_broker.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="wrong",
                      bootstrap_timeout_ms=3000)
    lost = [record.getMessage() for record in caplog.records if "Connection lost" in record.getMessage()]
    assert lost, caplog.text
    assert all("SaslAuthenticationFailedError" in message for message in lost), lost
    assert "SASL authentication failed" in sasl_broker.logs()


def test_aiokafka_logs_in_with_plain_and_scram(sasl_broker: Broker) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def round_trip(mechanism: str, user: str, password: str) -> bytes:
        topic = unique_topic("aio-sasl")
        config = {"bootstrap_servers": sasl_broker.bootstrap_servers, "security_protocol": "SASL_PLAINTEXT",
                  "sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password}
        producer = AIOKafkaProducer(**config)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"aiokafka")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, **config, auto_offset_reset="earliest")
        await consumer.start()
        try:
            record = await asyncio.wait_for(consumer.getone(), DEADLINE_S)
        finally:
            await consumer.stop()
        return bytes(record.value)

    for mechanism, user, password in (("PLAIN", "alice", "alice-secret"), ("SCRAM-SHA-256", "carol", "carol-secret")):
        assert asyncio.run(round_trip(mechanism, user, password)) == b"aiokafka", mechanism


def _node() -> str:
    node = shutil.which("node")
    if node is None or not (JS_DIR / "node_modules" / "kafkajs").exists():
        pytest.fail("node or kafkajs is not installed (make js)")
    return node


@pytest.mark.kafkajs
@pytest.mark.parametrize(("mechanism", "user", "password"), [
    ("plain", "alice", "alice-secret"), ("scram-sha-256", "carol", "carol-secret"),
    ("scram-sha-512", "carol", "carol-secret")])
def test_kafkajs_logs_in(sasl_broker: Broker, mechanism: str, user: str, password: str) -> None:
    result = subprocess.run([_node(), str(JS_DIR / "sasl.js"), sasl_broker.bootstrap_servers, unique_topic("kjs-sasl"),
                             mechanism, user, password], capture_output=True, text=True, timeout=60, check=False)
    output = json.loads(result.stdout or "{}")
    assert result.returncode == 0 and "error" not in output and "refused" not in output, (output, result.stderr)
    assert output["created"] is True and output["baseOffset"] == "0"
    assert output["offsets"][0]["high"] == "3"


@pytest.mark.kafkajs
def test_kafkajs_reports_a_refused_login(sasl_broker: Broker) -> None:
    result = subprocess.run([_node(), str(JS_DIR / "sasl.js"), sasl_broker.bootstrap_servers, unique_topic("kjs-sasl"),
                             "plain", "alice", "wrong"], capture_output=True, text=True, timeout=60, check=False)
    output = json.loads(result.stdout or "{}")
    assert output.get("refused") == "KafkaJSSASLAuthenticationError", (output, result.stderr)


@pytest.fixture
def kcat() -> Iterator[str]:
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if path is None:
        pytest.fail("kcat is not installed")
    yield path


def test_kcat_produces_and_consumes_over_sasl_plain(sasl_broker: Broker, kcat: str) -> None:
    topic = unique_topic("kcat-sasl")
    auth = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=SCRAM-SHA-256",
            "-X", "sasl.username=carol", "-X", "sasl.password=carol-secret"]
    subprocess.run([kcat, "-b", sasl_broker.bootstrap_servers, *auth, "-P", "-t", topic], input=b"one\ntwo\n",
                   check=True, timeout=60)
    out = subprocess.run([kcat, "-b", sasl_broker.bootstrap_servers, *auth, "-C", "-t", topic, "-o", "beginning", "-e",
                          "-c", "2"], capture_output=True, check=True, timeout=60)
    assert out.stdout.split() == [b"one", b"two"]


# --- SASL_SSL: the same logins over TLS ---------------------------------------------------------


@pytest.fixture
def sasl_ssl_broker(broker_factory: Callable[..., Broker], tmp_path: Path) -> tuple[Broker, Path]:
    from minikafka.testing.certs import generate_certificates

    certs = generate_certificates(tmp_path / "certs")
    overrides = {**SASL_BROKER, "listeners": "SASL_SSL://127.0.0.1:0",
                 "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS, **certs.broker_properties("SASL_SSL")}
    del overrides["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    return broker_factory(**overrides), certs.ca_cert


@pytest.mark.parametrize(("mechanism", "user", "password"), [
    ("PLAIN", "alice", "alice-secret"), ("SCRAM-SHA-256", "carol", "carol-secret"),
    ("SCRAM-SHA-512", "carol", "carol-secret"), ("OAUTHBEARER", "dave", "")])
def test_confluent_kafka_logs_in_over_sasl_ssl(sasl_ssl_broker: tuple[Broker, Path], mechanism: str,
                                               user: str, password: str) -> None:
    broker, ca = sasl_ssl_broker
    config = {**_confluent(broker.bootstrap_servers, mechanism, user, password), "security.protocol": "SASL_SSL",
              "ssl.ca.location": str(ca)}
    assert _confluent_round_trip(broker.bootstrap_servers, config) == [b"v0", b"v1", b"v2"]


def test_kafka_python_and_aiokafka_log_in_over_sasl_ssl(sasl_ssl_broker: tuple[Broker, Path]) -> None:
    import ssl

    from aiokafka import AIOKafkaProducer
    from kafka import KafkaProducer

    broker, ca = sasl_ssl_broker
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, security_protocol="SASL_SSL",
                             ssl_cafile=str(ca),
                             sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="carol",
                             sasl_plain_password="carol-secret")
    assert producer.send(unique_topic("kp-ssl"), b"x").get(timeout=DEADLINE_S).offset == 0
    producer.close()

    async def aiokafka_send() -> int:
        context = ssl.create_default_context(cafile=str(ca))
        aio = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, security_protocol="SASL_SSL",
                               ssl_context=context,
                               sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="alice-secret")
        await aio.start()
        try:
            return int((await aio.send_and_wait(unique_topic("aio-ssl"), b"x")).offset)
        finally:
            await aio.stop()

    assert asyncio.run(aiokafka_send()) == 0


def test_kcat_over_sasl_ssl(sasl_ssl_broker: tuple[Broker, Path], kcat: str) -> None:
    broker, ca = sasl_ssl_broker
    topic = unique_topic("kcat-ssl")
    auth = ["-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={ca}", "-X", "sasl.mechanism=PLAIN",
            "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"]
    subprocess.run([kcat, "-b", broker.bootstrap_servers, *auth, "-P", "-t", topic], input=b"one\n", check=True,
                   timeout=60)
    out = subprocess.run([kcat, "-b", broker.bootstrap_servers, *auth, "-C", "-t", topic, "-o", "beginning", "-e",
                          "-c", "1"],
                         capture_output=True, check=True, timeout=60)
    assert out.stdout.split() == [b"one"]


@pytest.mark.kafkajs
def test_kafkajs_logs_in_over_sasl_ssl(sasl_ssl_broker: tuple[Broker, Path]) -> None:
    broker, ca = sasl_ssl_broker
    result = subprocess.run([_node(), str(JS_DIR / "sasl.js"), broker.bootstrap_servers, unique_topic("kjs-ssl"),
                             "scram-sha-512", "carol", "carol-secret", str(ca)],
                            capture_output=True, text=True, timeout=60, check=False)
    output = json.loads(result.stdout or "{}")
    assert result.returncode == 0 and "error" not in output and "refused" not in output, (output, result.stderr)
    assert output["offsets"][0]["high"] == "3"
