"""TLS listeners with real clients: confluent-kafka, aiokafka, kafka-python, kafkajs and kcat over SSL, with
and without client certificates (the broker's principal is the certificate's X.500 name), and clients that
speak the wrong protocol to a port, which are closed without harming anything else.

Certificates come from minikafka.testing.certs, as a user's tests would make them."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import ssl
import struct
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from minikafka.testing import Broker
from minikafka.testing.certs import ClientCertificate, TestCertificates, generate_certificates

from tests.support.clients import consume, create_topic
from tests.support.names import unique_topic
from tests.support.produce import SEND_AT_ONCE, numbered, produce
from tests.support.waiting import poll_until

ALICE_SUBJECT = "CN=alice,OU=eng,O=acme"
JS_DIR = Path(__file__).parent / "js"
NODE = shutil.which("node")
KCAT = shutil.which("kcat")


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TestCertificates:
    return generate_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def alice(certs: TestCertificates) -> ClientCertificate:
    return certs.client("alice", ALICE_SUBJECT)


@dataclass
class TlsBroker:
    process: Broker
    certs: TestCertificates

    @property
    def plaintext_bootstrap(self) -> str:
        return self.process.bootstrap_servers

    @property
    def ssl_bootstrap(self) -> str:
        """The SSL listener's address, from the broker's "broker ready" log line."""
        for line in self.process.run_log().splitlines():
            if '"broker ready"' in line:
                for listener in json.loads(line)["listeners"]:
                    name, _, address = listener.partition("://")
                    if name.split(":")[-1] == "SSL":
                        return address
        raise AssertionError(f"no SSL listener in the broker log:\n{self.process.logs()}")

    @property
    def ssl_port(self) -> int:
        return int(self.ssl_bootstrap.rpartition(":")[2])

    def confluent(self, client: ClientCertificate | None = None, **extra: object) -> dict[str, object]:
        config: dict[str, object] = {"bootstrap.servers": self.ssl_bootstrap, "security.protocol": "SSL",
                                     "ssl.ca.location": str(self.certs.ca_cert), **extra}
        if client is not None:
            config |= {"ssl.certificate.location": str(client.cert), "ssl.key.location": str(client.key)}
        return config


@pytest.fixture
def tls_broker(broker_factory: Callable[..., Broker],
               certs: TestCertificates) -> Callable[..., TlsBroker]:
    """A broker with a PLAINTEXT listener (the --port one) and an SSL listener on a free port."""
    def start(client_auth: str = "none", *, encrypted_key: bool = False, **overrides: str) -> TlsBroker:
        process = broker_factory(**{"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                                    **certs.broker_properties("SSL", client_auth=client_auth,
                                                              encrypted_key=encrypted_key),
                                    **overrides})
        return TlsBroker(process, certs)

    return start


def produce_over_tls(config: dict[str, object], topic: str, count: int) -> None:
    errors = produce(str(config["bootstrap.servers"]), topic, numbered(count), keys=numbered(count, "k"), timeout=20,
                     **{**config, **SEND_AT_ONCE, "message.timeout.ms": 15000})
    assert [str(error) for error in errors] == []


def consume_tls(config: dict[str, object], topic: str, count: int) -> list[tuple[bytes | None, bytes | None]]:
    consumer = Consumer({**config, "group.id": "tls-reader", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, 0, 0)])
    received: list[tuple[bytes | None, bytes | None]] = []
    deadline = time.monotonic() + 20
    try:
        while len(received) < count and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=0.2):
                if message.error():
                    raise KafkaException(message.error())
                received.append((message.key(), message.value()))
    finally:
        consumer.close()
    return received


# --- confluent-kafka (librdkafka) ------------------------------------------------------------------------


def test_confluent_over_ssl_without_client_certificate(tls_broker: Callable[..., TlsBroker]) -> None:
    broker = tls_broker()
    topic = unique_topic("tls")
    produce_over_tls(broker.confluent(), topic, 20)
    received = consume_tls(broker.confluent(), topic, 20)
    assert received == [(f"k{i}".encode(), f"v{i}".encode()) for i in range(20)]
    # The PLAINTEXT listener serves the same data.
    assert [r.value for r in consume(broker.plaintext_bootstrap, topic, 20)] == [f"v{i}".encode() for i in range(20)]
    metadata = AdminClient(broker.confluent()).list_topics(timeout=10)
    # Metadata asked on the SSL listener advertises the SSL listener's address.
    assert [(b.host, b.port) for b in metadata.brokers.values()] == [("127.0.0.1", broker.ssl_port)]


def test_big_record_sets_over_ssl_are_the_bytes_sent_with_sendfile_in_plaintext(
        tls_broker: Callable[..., TlsBroker]) -> None:
    """Over TLS the broker reads record sets into memory to encrypt them; in plaintext it sends them from the
    file with sendfile. Both give the same records, in batches bigger than sendfile's threshold."""
    broker = tls_broker()
    topic = unique_topic("tlsbig")
    values = [os.urandom(10_000).hex().encode() for _ in range(100)]
    producer = Producer({**broker.confluent(), "linger.ms": 200, "batch.size": 1_000_000})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(20) == 0
    assert [value for _key, value in consume_tls(broker.confluent(), topic, len(values))] == values
    assert [r.value for r in consume(broker.plaintext_bootstrap, topic, len(values))] == values


def test_confluent_client_certificate_is_the_principal(tls_broker: Callable[..., TlsBroker],
                                                       alice: ClientCertificate) -> None:
    broker = tls_broker("required", encrypted_key=True)
    topic = unique_topic("tlsmtls")
    produce_over_tls(broker.confluent(alice), topic, 5)
    assert len(consume_tls(broker.confluent(alice), topic, 5)) == 5
    authenticated = [json.loads(line) for line in broker.process.logs().splitlines()
                     if '"TLS client authenticated"' in line]
    assert authenticated
    assert {entry["principal"] for entry in authenticated} == {f"User:{ALICE_SUBJECT}"}
    assert {entry["listener"] for entry in authenticated} == {"SSL"}


def test_confluent_without_certificate_when_required_fails_and_broker_stays_up(
        tls_broker: Callable[..., TlsBroker], alice: ClientCertificate) -> None:
    broker = tls_broker("required")
    errors: list[str] = []
    admin = AdminClient(broker.confluent(error_cb=lambda error: errors.append(str(error))))
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    poll_until(lambda: "TLS handshake failed" in broker.process.logs(), message="the failed handshake logged")
    assert broker.process.alive
    # Others are unaffected: a client with a certificate, and the PLAINTEXT listener.
    topic = unique_topic("tlsafter")
    produce_over_tls(broker.confluent(alice), topic, 3)
    create_topic(broker.plaintext_bootstrap, unique_topic("plainafter"))


def test_describe_configs_hides_passwords(broker_factory: Callable[..., Broker], certs: TestCertificates,
                                          alice: ClientCertificate) -> None:
    """Plain (not listener-prefixed) keys, an encrypted key: DescribeConfigs shows the settings, and the
    password as sensitive with a null value, as Kafka does."""
    from confluent_kafka.admin import ConfigResource

    process = broker_factory(**{"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                                "ssl.keystore.location": str(certs.server_keystore_encrypted),
                                "ssl.key.password": certs.key_password,
                                "ssl.truststore.location": str(certs.ca_cert), "ssl.client.auth": "required"})
    broker = TlsBroker(process, certs)
    assert "unknown configuration key" not in process.logs()
    admin = AdminClient({"bootstrap.servers": broker.plaintext_bootstrap})
    [future] = admin.describe_configs([ConfigResource("broker", "1")]).values()
    entries = future.result(timeout=15)
    password = entries["ssl.key.password"]
    assert (password.is_sensitive, password.value) == (True, None)
    assert (entries["ssl.client.auth"].value, entries["ssl.client.auth"].is_sensitive) == ("required", False)
    assert entries["ssl.keystore.location"].value == str(certs.server_keystore_encrypted)
    assert entries["ssl.enabled.protocols"].value == "TLSv1.2,TLSv1.3"
    produce_over_tls(broker.confluent(alice), unique_topic("tlsplainkeys"), 1)


# --- aiokafka -----------------------------------------------------------------------------------------


def test_aiokafka_ssl_context(tls_broker: Callable[..., TlsBroker], alice: ClientCertificate) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.helpers import create_ssl_context

    broker = tls_broker("required")
    topic = unique_topic("tlsaio")

    async def run() -> list[bytes | None]:
        context = create_ssl_context(cafile=str(broker.certs.ca_cert), certfile=str(alice.cert),
                                     keyfile=str(alice.key))
        producer = AIOKafkaProducer(bootstrap_servers=broker.ssl_bootstrap, security_protocol="SSL",
                                    ssl_context=context)
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait(topic, f"aio-{i}".encode(), partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.ssl_bootstrap, security_protocol="SSL",
                                    ssl_context=context, auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0)])
            values: list[bytes | None] = []
            async with asyncio.timeout(20):
                while len(values) < 5:
                    batch = await consumer.getmany(timeout_ms=500)
                    values += [record.value for records in batch.values() for record in records]
            return values
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [f"aio-{i}".encode() for i in range(5)]


# --- kafka-python -------------------------------------------------------------------------------------


def test_kafka_python_ssl_files(tls_broker: Callable[..., TlsBroker], alice: ClientCertificate) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    broker = tls_broker("required")
    topic = unique_topic("tlskp")
    ssl_files = {"security_protocol": "SSL", "ssl_cafile": str(broker.certs.ca_cert),
                 "ssl_certfile": str(alice.cert), "ssl_keyfile": str(alice.key)}
    producer = KafkaProducer(bootstrap_servers=broker.ssl_bootstrap, **ssl_files)
    try:
        for i in range(5):
            producer.send(topic, f"kp-{i}".encode(), partition=0).get(timeout=20)
    finally:
        producer.close(timeout=10)
    consumer = KafkaConsumer(bootstrap_servers=broker.ssl_bootstrap, group_id=None, enable_auto_commit=False,
                             consumer_timeout_ms=20000, **ssl_files)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        values = []
        for record in consumer:
            values.append(record.value)
            if len(values) == 5:
                break
    finally:
        consumer.close()
    assert values == [f"kp-{i}".encode() for i in range(5)]


# --- kafkajs ------------------------------------------------------------------------------------------


def _require(tool: str | None, what: str) -> None:
    if tool is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{what} is not installed")
        pytest.skip(f"{what} is not installed")


@pytest.mark.kafkajs
def test_kafkajs_ssl(tls_broker: Callable[..., TlsBroker], alice: ClientCertificate) -> None:
    _require(NODE if (JS_DIR / "node_modules" / "kafkajs").exists() else None, "node with kafkajs (make js)")
    broker = tls_broker("required")
    topic = unique_topic("tlsjs")
    result = subprocess.run([NODE or "node", str(JS_DIR / "tls.js"), broker.ssl_bootstrap, topic,
                             str(broker.certs.ca_cert), str(alice.cert), str(alice.key)],
                            capture_output=True, text=True, timeout=60, check=False)
    output = json.loads(result.stdout or "{}")
    assert result.returncode == 0 and "error" not in output, (output, result.stderr)
    assert output["created"] is True
    assert output["baseOffset"] == "0"
    assert [(o["partition"], o["high"]) for o in output["offsets"]] == [(0, "5")]
    assert output["brokers"] == [{"nodeId": 1, "host": "127.0.0.1", "port": broker.ssl_port}]
    assert [value for _key, value in consume_tls(broker.confluent(alice), topic, 5)] == \
        [f"kafkajs-{i}".encode() for i in range(5)]


# --- kcat ---------------------------------------------------------------------------------------------


@pytest.mark.kcat
def test_kcat_ssl(tls_broker: Callable[..., TlsBroker], alice: ClientCertificate) -> None:
    _require(KCAT, "kcat")
    broker = tls_broker("required")
    topic = unique_topic("tlskcat")
    ssl_args = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={broker.certs.ca_cert}",
                "-X", f"ssl.certificate.location={alice.cert}", "-X", f"ssl.key.location={alice.key}"]

    def kcat(*args: str, stdin: str | None = None) -> str:
        result = subprocess.run([KCAT or "kcat", "-b", broker.ssl_bootstrap, *ssl_args, *args], input=stdin,
                                capture_output=True, text=True, timeout=30, check=False)
        assert result.returncode == 0, result.stderr
        return result.stdout

    kcat("-P", "-t", topic, stdin="".join(f"kcat-{i}\n" for i in range(5)))
    assert kcat("-C", "-t", topic, "-o", "beginning", "-e", "-f", "%o=%s\\n").splitlines() == \
        [f"{i}=kcat-{i}" for i in range(5)]


# --- the wrong protocol on a port ------------------------------------------------------------------------


def _api_versions_request() -> bytes:
    # ApiVersions v0: api_key 18, version 0, correlation id 7, client id "raw".
    body = struct.pack(">hhih", 18, 0, 7, 3) + b"raw"
    return struct.pack(">i", len(body)) + body


def _closed_by_peer(sock: socket.socket, deadline_s: float = 10.0) -> bytes:
    """Everything the peer sends until it closes the connection (EOF or reset), within a deadline."""
    sock.settimeout(deadline_s)
    received = b""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk
    raise AssertionError("the broker did not close the connection")


def test_plaintext_client_on_the_tls_port_is_closed(tls_broker: Callable[..., TlsBroker]) -> None:
    broker = tls_broker()
    with socket.create_connection(("127.0.0.1", broker.ssl_port), timeout=10) as sock:
        sock.sendall(_api_versions_request())
        reply = _closed_by_peer(sock)
    # No Kafka response; at most a TLS alert record (content type 21).
    assert reply == b"" or reply[0] == 21
    poll_until(lambda: "TLS handshake failed" in broker.process.logs(), message="the failed handshake logged")
    # The broker is still serving both listeners.
    topic = unique_topic("tlsafterplain")
    produce_over_tls(broker.confluent(), topic, 1)
    create_topic(broker.plaintext_bootstrap, unique_topic("plainafterplain"))


def test_tls_client_on_the_plaintext_port_fails_cleanly(tls_broker: Callable[..., TlsBroker]) -> None:
    broker = tls_broker()
    context = ssl.create_default_context(cafile=str(broker.certs.ca_cert))
    # The broker reads the ClientHello as a Kafka frame header, finds the size absurd and closes.
    with socket.create_connection(("127.0.0.1", broker.process.port), timeout=10) as raw, \
            pytest.raises(OSError), context.wrap_socket(raw, server_hostname="127.0.0.1"):
        pass
    poll_until(lambda: "frame size" in broker.process.logs(), message="the bad frame logged")
    # librdkafka configured for SSL against the PLAINTEXT port gets no metadata, and nothing breaks.
    admin = AdminClient({"bootstrap.servers": broker.plaintext_bootstrap, "security.protocol": "SSL",
                         "ssl.ca.location": str(broker.certs.ca_cert)})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)
    assert broker.process.alive
    produce_over_tls(broker.confluent(), unique_topic("tlsafterssl"), 1)
    create_topic(broker.plaintext_bootstrap, unique_topic("plainafterssl"))
