"""Record the fuzz corpus: run all five clients through a recording proxy in front of a broker.

    .venv/bin/python -m tests.fuzz.recorder [--out tests/fuzz/corpus.jsonl]

Each client gets its own broker (fresh data dir) whose `advertised.listeners` points at the proxy, so
metadata and FindCoordinator send every later connection through the proxy too. Every request frame
the client sends is recorded with the client's name; `corpus.save` dedupes and caps them. A scenario
step that fails has still sent its requests, so failures are listed, not fatal; the API coverage per
client printed at the end is what to check.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import structlog
from minikafka.protocol.api_keys import ApiKey, api_name

from tests.framing_proxy import FrameHandler, FramingProxy

from . import corpus
from .broker import FuzzBroker

_log = structlog.get_logger("fuzz.recorder")
JS_SCRIPT = Path(__file__).with_name("record_kafkajs.js")
CLIENTS = ("confluent-kafka", "aiokafka", "kafka-python", "kcat", "kafkajs")


class RecordingProxy(FramingProxy):
    """Forwards 127.0.0.1 (a free port) to the broker and keeps every client-to-broker frame (without size prefix)."""

    def __init__(self, client: str) -> None:
        self.client = client
        self.frames: list[bytes] = []
        super().__init__()

    def frame_handlers(self) -> tuple[FrameHandler, FrameHandler]:
        def request(frame: bytes) -> bool:
            with self._lock:
                self.frames.append(frame[4:])
            return True

        return request, (lambda _frame: True)


class Steps:
    """Runs scenario steps, keeping going after a failure (the requests were sent all the same)."""

    def __init__(self, client: str) -> None:
        self.client = client
        self.failures: list[str] = []

    def run(self, name: str, action: Callable[[], object]) -> None:
        try:
            action()
        except Exception as exc:
            self.failures.append(f"{name}: {exc!r}"[:300])


# --- confluent-kafka ---------------------------------------------------------------------------------------------

def _confluent(bootstrap: str, prefix: str, steps: Steps) -> None:
    from confluent_kafka import (
        Consumer,
        ConsumerGroupTopicPartitions,
        IsolationLevel,
        Producer,
        TopicPartition,
    )
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
        OffsetSpec,
        ResourceType,
    )

    topic, other, group = f"{prefix}-a", f"{prefix}-b", f"{prefix}-g"
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def wait(futures: dict) -> None:  # type: ignore[type-arg]
        for future in futures.values():
            future.result(timeout=15)

    steps.run("create_topics", lambda: wait(admin.create_topics(
        [NewTopic(topic, 2, 1), NewTopic(other, 1, 1, config={"cleanup.policy": "delete"})], operation_timeout=10)))
    steps.run("create_partitions", lambda: wait(admin.create_partitions([NewPartitions(other, 2)])))
    steps.run("describe_configs", lambda: wait(admin.describe_configs(
        [ConfigResource(ResourceType.TOPIC, topic), ConfigResource(ResourceType.BROKER, "1")])))
    steps.run("incremental_alter_configs", lambda: wait(admin.incremental_alter_configs([ConfigResource(
        ResourceType.TOPIC, other, incremental_configs=[
            ConfigEntry("retention.ms", "600000", incremental_operation=AlterConfigOpType.SET)])])))
    steps.run("describe_cluster", lambda: admin.describe_cluster().result(timeout=15))
    steps.run("describe_topics", lambda: admin.list_topics(timeout=10))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "compression.type": "lz4"})
    for i in range(5):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), headers=[("h", b"x")], partition=i % 2)
    steps.run("produce", lambda: producer.flush(15))
    idempotent = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0})
    idempotent.produce(topic, value=b"i1", partition=0)
    steps.run("idempotent", lambda: idempotent.flush(15))

    def transactions() -> None:
        txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{prefix}-txn", "linger.ms": 0})
        txn.init_transactions(15)
        txn.begin_transaction()
        txn.produce(topic, value=b"t1", partition=0)
        reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        txn.send_offsets_to_transaction([TopicPartition(topic, 0, 1)], reader.consumer_group_metadata(), 15)
        txn.commit_transaction(15)
        txn.begin_transaction()
        txn.produce(topic, value=b"t2", partition=0)
        txn.abort_transaction(15)
        reader.close()

    steps.run("transactions", transactions)

    for isolation, group_id in (("read_committed", group), ("read_uncommitted", f"{group}-u")):
        def consume(isolation: str = isolation, group_id: str = group_id) -> None:
            consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id, "auto.offset.reset": "earliest",
                                 "isolation.level": isolation, "enable.auto.commit": False,
                                 "fetch.wait.max.ms": 100, "heartbeat.interval.ms": 300})
            consumer.subscribe([topic])
            seen, deadline = 0, time.monotonic() + 15
            while seen < 3 and time.monotonic() < deadline:
                message = consumer.poll(0.2)
                if message is not None and not message.error():
                    seen += 1
            consumer.commit(asynchronous=False)
            consumer.committed([TopicPartition(topic, 0)], timeout=10)
            consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
            consumer.offsets_for_times([TopicPartition(topic, 0, int(time.time() * 1000) - 60_000)], timeout=10)
            poll_deadline = time.monotonic() + 1.0
            while time.monotonic() < poll_deadline:  # a heartbeat or two
                consumer.poll(0.1)
            consumer.close()

        steps.run(f"consume_{isolation}", consume)

    def validate_position() -> None:
        # An assigned offset that carries a leader epoch makes librdkafka validate it (OffsetForLeaderEpoch).
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{group}-e", "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, 0, 1, leader_epoch=0)])
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            consumer.poll(0.1)
        consumer.close()

    steps.run("offset_for_leader_epoch", validate_position)

    def consumer_protocol() -> None:
        # KIP-848 (group.protocol=consumer): ConsumerGroupHeartbeat join/heartbeat/leave, OffsetCommit v9.
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{group}-848", "group.protocol": "consumer",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([topic])
        seen, deadline = 0, time.monotonic() + 15
        while seen < 3 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                seen += 1
        consumer.commit(asynchronous=False)
        wait(admin.describe_consumer_groups([f"{group}-848"]))  # ConsumerGroupDescribe while it is live
        consumer.close()

    steps.run("consumer_protocol", consumer_protocol)
    steps.run("list_offsets", lambda: wait(admin.list_offsets(
        {TopicPartition(topic, 0): OffsetSpec.latest(), TopicPartition(topic, 1): OffsetSpec.earliest()},
        isolation_level=IsolationLevel.READ_COMMITTED)))
    steps.run("list_consumer_groups", lambda: admin.list_consumer_groups().result(timeout=15))
    steps.run("describe_consumer_groups", lambda: wait(admin.describe_consumer_groups([group])))
    steps.run("list_consumer_group_offsets", lambda: wait(admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)])))
    steps.run("alter_consumer_group_offsets", lambda: wait(admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(f"{group}-u", [TopicPartition(topic, 0, 1)])])))
    steps.run("delete_records", lambda: wait(admin.delete_records([TopicPartition(topic, 0, 1)])))
    steps.run("delete_consumer_groups", lambda: wait(admin.delete_consumer_groups([f"{group}-u"])))
    steps.run("delete_topics", lambda: wait(admin.delete_topics([other], operation_timeout=10)))
    _confluent_security(bootstrap, prefix, steps, admin, wait)


# --- kafka-python ------------------------------------------------------------------------------------------------

def _kafka_python(bootstrap: str, prefix: str, steps: Steps) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
    from kafka.admin import AbortTransactionSpec, ConfigResource, ConfigResourceType, NewPartitions, NewTopic
    from kafka.protocol.consumer.offsets import OffsetSpec

    topic, other, group = f"{prefix}-a", f"{prefix}-b", f"{prefix}-g"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    tp0 = TopicPartition(topic, 0)
    steps.run("create_topics", lambda: admin.create_topics(
        [NewTopic(topic, 2, 1), NewTopic(other, 1, 1, topic_configs={"cleanup.policy": "delete"})]))
    steps.run("create_partitions", lambda: admin.create_partitions({other: NewPartitions(2)}))
    steps.run("describe_configs", lambda: admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic), ConfigResource(ConfigResourceType.BROKER, "1")]))
    steps.run("alter_configs", lambda: admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, other, configs={"retention.ms": "600000"})]))
    steps.run("describe_cluster", admin.describe_cluster)
    steps.run("describe_topics", lambda: admin.describe_topics([topic]))

    def produce(**config: object) -> None:
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0, **config)
        if "transactional_id" in config:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send(topic, value=b"t1", partition=0)
            producer.send_offsets_to_transaction({tp0: OffsetAndMetadata(1, "", -1)}, group)
            producer.commit_transaction()
            producer.begin_transaction()
            producer.send(topic, value=b"t2", partition=0)
            producer.abort_transaction()
        else:
            for i in range(4):
                producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), headers=[("h", b"x")],
                              partition=i % 2)
        producer.flush(15)
        producer.close(5)

    steps.run("produce", lambda: produce(acks="all", compression_type="gzip"))
    steps.run("idempotent", lambda: produce(enable_idempotence=True))
    steps.run("transactions", lambda: produce(transactional_id=f"{prefix}-txn"))

    for isolation, group_id in (("read_committed", group), ("read_uncommitted", f"{group}-u")):
        def consume(isolation: str = isolation, group_id: str = group_id) -> None:
            consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group_id,
                                     auto_offset_reset="earliest", isolation_level=isolation,
                                     enable_auto_commit=False, fetch_max_wait_ms=100, heartbeat_interval_ms=300)
            seen, deadline = 0, time.monotonic() + 15
            while seen < 3 and time.monotonic() < deadline:
                seen += sum(len(batch) for batch in consumer.poll(200).values())
            consumer.commit()
            consumer.committed(tp0)
            consumer.end_offsets([tp0])
            consumer.offsets_for_times({tp0: int(time.time() * 1000) - 60_000})
            consumer.close()

        steps.run(f"consume_{isolation}", consume)

    steps.run("list_groups", admin.list_groups)
    steps.run("describe_groups", lambda: admin.describe_groups([group]))
    steps.run("list_group_offsets", lambda: admin.list_group_offsets({group: None}))
    steps.run("alter_group_offsets",
              lambda: admin.alter_group_offsets(f"{group}-u", {tp0: OffsetAndMetadata(1, "", -1)}))
    steps.run("delete_group_offsets", lambda: admin.delete_group_offsets(f"{group}-u", [tp0]))
    steps.run("list_partition_offsets", lambda: admin.list_partition_offsets({tp0: OffsetSpec.LATEST}))
    steps.run("describe_producers", lambda: admin.describe_producers([tp0]))
    steps.run("list_transactions", admin.list_transactions)
    steps.run("describe_transactions", lambda: admin.describe_transactions([f"{prefix}-txn"]))
    # An admin abort of a transaction that is not open: the WriteTxnMarkers frame is what counts here.
    steps.run("abort_transaction", lambda: admin.abort_transaction(AbortTransactionSpec(tp0, 1000, 0)))
    steps.run("delete_records", lambda: admin.delete_records({tp0: 1}))
    steps.run("delete_groups", lambda: admin.delete_groups([f"{group}-u"]))
    steps.run("delete_topics", lambda: admin.delete_topics([other]))
    admin.close()


# --- aiokafka ----------------------------------------------------------------------------------------------------

async def _aiokafka_async(bootstrap: str, prefix: str, steps: Steps) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
    from aiokafka.structs import OffsetAndMetadata

    topic, other, group = f"{prefix}-a", f"{prefix}-b", f"{prefix}-g"
    tp0 = TopicPartition(topic, 0)

    async def step(name: str, action: Callable[[], object]) -> None:
        try:
            await asyncio.wait_for(action(), 20)  # type: ignore[arg-type]
        except Exception as exc:
            steps.failures.append(f"{name}: {exc!r}"[:300])

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    await step("create_topics", lambda: admin.create_topics(
        [NewTopic(topic, 2, 1), NewTopic(other, 1, 1, topic_configs={"cleanup.policy": "delete"})]))
    await step("create_partitions", lambda: admin.create_partitions({other: NewPartitions(2)}))
    await step("describe_configs", lambda: admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic), ConfigResource(ConfigResourceType.BROKER, "1")]))
    await step("alter_configs", lambda: admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, other, configs={"retention.ms": "600000"})]))
    await step("describe_cluster", admin.describe_cluster)

    async def produce(**config: object) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0, **config)
        await producer.start()
        try:
            if "transactional_id" in config:
                async with producer.transaction():
                    await producer.send_and_wait(topic, b"t1", partition=0)
                    await producer.send_offsets_to_transaction({tp0: OffsetAndMetadata(1, "")}, group)
                await producer.begin_transaction()
                await producer.send_and_wait(topic, b"t2", partition=0)
                await producer.abort_transaction()
            else:
                for i in range(4):
                    await producer.send_and_wait(topic, f"v{i}".encode(), key=f"k{i}".encode(),
                                                 headers=[("h", b"x")], partition=i % 2)
        finally:
            await producer.stop()

    await step("produce", lambda: produce(acks="all", compression_type="gzip"))
    await step("idempotent", lambda: produce(enable_idempotence=True))
    await step("transactions", lambda: produce(transactional_id=f"{prefix}-txn"))

    for isolation, group_id in (("read_committed", group), ("read_uncommitted", f"{group}-u")):
        async def consume(isolation: str = isolation, group_id: str = group_id) -> None:
            consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group_id,
                                        auto_offset_reset="earliest", isolation_level=isolation,
                                        enable_auto_commit=False, fetch_max_wait_ms=100, heartbeat_interval_ms=300)
            await consumer.start()
            try:
                seen, deadline = 0, time.monotonic() + 15
                while seen < 3 and time.monotonic() < deadline:
                    batches = await consumer.getmany(timeout_ms=200)
                    seen += sum(len(batch) for batch in batches.values())
                await consumer.commit()
                await consumer.committed(tp0)
                await consumer.end_offsets([tp0])
                await consumer.offsets_for_times({tp0: int(time.time() * 1000) - 60_000})
                await asyncio.sleep(1.0)  # a scenario step, not a wait for state: lets heartbeats go out
            finally:
                await consumer.stop()

        await step(f"consume_{isolation}", consume)

    await step("list_consumer_groups", admin.list_consumer_groups)
    await step("describe_consumer_groups", lambda: admin.describe_consumer_groups([group]))
    await step("list_consumer_group_offsets", lambda: admin.list_consumer_group_offsets(group))
    await step("delete_records", lambda: admin.delete_records({tp0: RecordsToDelete(1)}))
    await step("delete_topics", lambda: admin.delete_topics([other]))
    await admin.close()


def _aiokafka(bootstrap: str, prefix: str, steps: Steps) -> None:
    asyncio.run(_aiokafka_async(bootstrap, prefix, steps))


# --- kcat and kafkajs --------------------------------------------------------------------------------------------

def _kcat(bootstrap: str, prefix: str, steps: Steps) -> None:
    kcat = shutil.which("kcat")
    if kcat is None:
        raise RuntimeError("kcat is not installed (apt-get install kcat)")
    topic, group = f"{prefix}-a", f"{prefix}-g"

    def run(*args: str, stdin: str | None = None) -> None:
        result = subprocess.run([kcat, "-b", bootstrap, *args], input=stdin, capture_output=True, text=True,
                                timeout=30, check=False)
        if result.returncode != 0:
            raise RuntimeError(result.stderr[-300:])

    steps.run("metadata", lambda: run("-L", "-J"))
    steps.run("produce", lambda: run("-P", "-t", topic, "-K:", "-z", "snappy", "-H", "h=x",
                                     stdin="".join(f"k{i}:v{i}\n" for i in range(5))))
    steps.run("produce_idempotent", lambda: run("-P", "-t", topic, "-X", "enable.idempotence=true", stdin="i1\ni2\n"))
    steps.run("consume", lambda: run("-C", "-t", topic, "-o", "beginning", "-e", "-X",
                                     "isolation.level=read_uncommitted"))
    steps.run("consume_committed", lambda: run("-C", "-t", topic, "-o", "beginning", "-e", "-X",
                                               "isolation.level=read_committed"))
    steps.run("query_offsets", lambda: run("-Q", "-t", f"{topic}:0:{int(time.time() * 1000) - 60_000}"))
    steps.run("group", lambda: run("-G", group, "-o", "beginning", "-e", "-X", "heartbeat.interval.ms=300",
                                   "-X", "isolation.level=read_committed", topic))


def _kafkajs(bootstrap: str, prefix: str, steps: Steps) -> None:
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is not installed")
    result = subprocess.run([node, str(JS_SCRIPT), bootstrap, prefix], capture_output=True, text=True, timeout=180,
                            check=False)
    report = json.loads(result.stdout or "{}")
    if "error" in report or not report.get("done"):
        raise RuntimeError(f"kafkajs scenario failed: {result.stdout[-500:]} {result.stderr[-500:]}")
    steps.failures += report["failures"]


SCENARIOS: dict[str, Callable[[str, str, Steps], None]] = {
    "confluent-kafka": _confluent, "aiokafka": _aiokafka, "kafka-python": _kafka_python, "kcat": _kcat,
    "kafkajs": _kafkajs,
}


@contextlib.contextmanager
def _proxied_broker(client: str, workdir: Path) -> Iterator[RecordingProxy]:
    proxy = RecordingProxy(client)
    data_dir, log_dir = workdir / client / "data", workdir / client / "logs"
    log_dir.mkdir(parents=True)
    broker = FuzzBroker(data_dir, log_dir, overrides={"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
    broker.start()
    proxy.upstream = ("127.0.0.1", broker.port)
    try:
        yield proxy
    finally:
        broker.stop()
        proxy.close()


def record(clients: tuple[str, ...], workdir: Path) -> tuple[list[corpus.CorpusFrame], dict[str, list[str]]]:
    frames: list[corpus.CorpusFrame] = []
    failures: dict[str, list[str]] = {}
    for client in clients:
        steps = Steps(client)
        with _proxied_broker(client, workdir) as proxy:
            prefix = f"fz{uuid.uuid4().hex[:6]}"
            SCENARIOS[client](f"127.0.0.1:{proxy.port}", prefix, steps)
            with proxy._lock:
                frames += [corpus.CorpusFrame.parse(client, frame) for frame in proxy.frames if len(frame) >= 8]
        failures[client] = steps.failures
        _log.info("recorded", client=client, frames=len(proxy.frames), failed_steps=len(steps.failures))
    return frames, failures


def _confluent_security(bootstrap: str, prefix: str, steps: Steps, admin: Any, wait: Callable[[Any], None]) -> None:
    """The ACL and SCRAM admin calls (SECURITY_DISABLED and friends on this broker: the requests are what
    counts), and a SASL login attempt, whose SaslHandshake the plaintext listener refuses."""
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )
    from confluent_kafka.admin import ResourceType as AclResourceType

    binding = AclBinding(AclResourceType.TOPIC, f"{prefix}-a", ResourcePatternType.PREFIXED, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    every = AclBindingFilter(AclResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                             AclPermissionType.ANY)
    steps.run("create_acls", lambda: wait(admin.create_acls([binding])))
    steps.run("describe_acls", lambda: admin.describe_acls(every).result(timeout=15))
    steps.run("delete_acls", lambda: wait(admin.delete_acls([every])))
    upsert = UserScramCredentialUpsertion(f"{prefix}-u", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                          b"secret", b"salt")
    steps.run("alter_user_scram_credentials", lambda: wait(admin.alter_user_scram_credentials(
        [upsert, UserScramCredentialDeletion(f"{prefix}-v", ScramMechanism.SCRAM_SHA_512)])))
    steps.run("describe_user_scram_credentials", lambda: admin.describe_user_scram_credentials().result(timeout=15))
    sasl = AdminClient({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "secret"})
    steps.run("sasl_handshake", lambda: sasl.list_topics(timeout=3))


def wire_frames(prefix: str) -> list[corpus.CorpusFrame]:
    """Requests for the served APIs that none of the clients above sends here (DescribeTopicPartitions:
    librdkafka describes topics with Metadata; SaslAuthenticate: see below), encoded by minikafka's codec as
    the wire tests send them."""
    from kio.schema.describe_topic_partitions.v0.request import (
        Cursor,
        DescribeTopicPartitionsRequest,
        TopicRequest,
    )
    from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
    from minikafka.protocol.build import build
    from minikafka.protocol.codec import encode_request, request_schema

    requests: list[Any] = [
        # Clients send SaslAuthenticate only after a SaslHandshake a SASL listener accepts; the recording
        # broker listens in plaintext, so these stand in: PLAIN, and SCRAM's first message.
        SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00secret"),
        SaslAuthenticateRequest(auth_bytes=b"n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL"),
        DescribeTopicPartitionsRequest(topics=(TopicRequest(name=f"{prefix}-a"), TopicRequest(name=f"{prefix}-b")),
                                       response_partition_limit=2000),
        DescribeTopicPartitionsRequest(topics=(TopicRequest(name=f"{prefix}-a"),), response_partition_limit=1,
                                       cursor=Cursor(topic_name=f"{prefix}-a", partition_index=1)),
    ]
    requests += [build(request_schema(key, version), **fields) for key, version, fields in _admin_and_share(prefix)]
    return [corpus.CorpusFrame.parse(corpus.WIRE_CLIENT, encode_request(index, request, corpus.WIRE_CLIENT)[4:])
            for index, request in enumerate(requests, start=1)]


def _admin_and_share(prefix: str) -> list[tuple[int, int, dict[str, Any]]]:
    """Issue 48's APIs, as the wire tests send them: confluent-kafka's ShareConsumer and its telemetry need a
    share group or a subscription set up first, and the quota, log-dir and reassignment calls have no client
    API in the recorded clients, so these stand in (one request per served version that differs)."""
    topic_id = uuid.UUID(int=0x1234_5678_9ABC_DEF0_1234_5678_9ABC_DEF0)
    acks = [{"first_offset": 0, "last_offset": 2, "acknowledge_types": [1]},
            {"first_offset": 3, "last_offset": 4, "acknowledge_types": [2, 3]}]
    share_topics = [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": acks}]}]
    reassign = [{"name": f"{prefix}-a", "partitions": [{"partition_index": 0, "replicas": [1, 2]},
                                                       {"partition_index": 1, "replicas": None}]}]
    quota_entity = [{"entity_type": "client-id", "entity_name": f"{prefix}-client"},
                    {"entity_type": "user", "entity_name": None}]
    return [
        (ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": [{"topic": f"{prefix}-a", "partitions": [0, 1]}]}),
        (ApiKey.DESCRIBE_LOG_DIRS, 1, {"topics": None}),
        (ApiKey.ELECT_LEADERS, 2, {"election_type": 0, "topic_partitions": [
            {"topic": f"{prefix}-a", "partitions": [0, 1]}], "timeout_ms": 1000}),
        (ApiKey.ELECT_LEADERS, 0, {"topic_partitions": None, "timeout_ms": 1000}),
        (ApiKey.ALTER_PARTITION_REASSIGNMENTS, 1, {"timeout_ms": 1000, "allow_replication_factor_change": False,
                                                   "topics": reassign}),
        (ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 1000, "topics": reassign}),
        (ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 1000, "topics": None}),
        (ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [{"entity_type": "client-id", "match_type": 0,
                                                            "match": f"{prefix}-client"}], "strict": False}),
        (ApiKey.ALTER_CLIENT_QUOTAS, 1, {"entries": [{"entity": quota_entity, "ops": [
            {"key": "producer_byte_rate", "value": 1024.0, "remove": False},
            {"key": "request_percentage", "value": 0.0, "remove": True}]}], "validate_only": True}),
        (ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": uuid.UUID(int=0)}),
        (ApiKey.PUSH_TELEMETRY, 0, {"client_instance_id": topic_id, "subscription_id": 7, "terminating": False,
                                    "compression_type": 0, "metrics": b"\x0a\x00"}),
        (ApiKey.LIST_CONFIG_RESOURCES, 1, {"resource_types": [16, 32]}),
        (ApiKey.SHARE_GROUP_HEARTBEAT, 1, {"group_id": f"{prefix}-share", "member_id": "m" * 22, "member_epoch": 0,
                                           "rack_id": None, "subscribed_topic_names": [f"{prefix}-a"]}),
        (ApiKey.SHARE_GROUP_DESCRIBE, 1, {"group_ids": [f"{prefix}-share"], "include_authorized_operations": True}),
        (ApiKey.SHARE_FETCH, 2, {"group_id": f"{prefix}-share", "member_id": "m" * 22, "share_session_epoch": 0,
                                 "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 500,
                                 "batch_size": 500, "topics": share_topics, "forgotten_topics_data": []}),
        (ApiKey.SHARE_FETCH, 1, {"group_id": f"{prefix}-share", "member_id": "m" * 22, "share_session_epoch": 1,
                                 "max_wait_ms": 0, "max_records": 10, "batch_size": 10, "topics": share_topics,
                                 "forgotten_topics_data": [{"topic_id": topic_id, "partitions": [1]}]}),
        (ApiKey.SHARE_ACKNOWLEDGE, 2, {"group_id": f"{prefix}-share", "member_id": "m" * 22,
                                       "share_session_epoch": 2, "is_renew_ack": False, "topics": share_topics}),
        (ApiKey.SHARE_ACKNOWLEDGE, 1, {"group_id": f"{prefix}-share", "member_id": "m" * 22,
                                       "share_session_epoch": -1, "topics": share_topics}),
        (ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [{"group_id": f"{prefix}-share", "topics": [
            {"topic_name": f"{prefix}-a", "partitions": [0]}]}]}),
        (ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, {"groups": [{"group_id": f"{prefix}-share", "topics": None}]}),
        (ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": f"{prefix}-share", "topics": [
            {"topic_name": f"{prefix}-a", "partitions": [{"partition_index": 0, "start_offset": 2}]}]}),
        (ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, {"group_id": f"{prefix}-share", "topics": [
            {"topic_name": f"{prefix}-a"}]}),
    ]


def coverage(frames: list[corpus.CorpusFrame]) -> dict[str, dict[str, list[int]]]:
    table: dict[str, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
    for frame in frames:
        table[frame.client][api_name(frame.api_key)].add(frame.api_version)
    return {client: {api: sorted(versions) for api, versions in sorted(apis.items())}
            for client, apis in sorted(table.items())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=corpus.CORPUS_PATH)
    parser.add_argument("--clients", default=",".join(CLIENTS), help="comma-separated subset of " + ",".join(CLIENTS))
    args = parser.parse_args(argv)
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    clients = tuple(name for name in args.clients.split(",") if name)
    unknown = set(clients) - set(CLIENTS)
    if unknown:
        parser.error(f"unknown clients: {sorted(unknown)}")
    with tempfile.TemporaryDirectory(prefix="minikafka-record-") as tmp:
        frames, failures = record(clients, Path(tmp))
    frames += wire_frames(f"fz{uuid.uuid4().hex[:6]}")
    selected = corpus.save(frames, args.out)
    served = {api.name for api in ApiKey}
    recorded = {api_name(f.api_key) for f in selected}
    print(json.dumps({"frames_recorded": len(frames), "frames_kept": len(selected),
                      "bytes": args.out.stat().st_size, "coverage": coverage(selected),
                      "apis_not_recorded": sorted(served - recorded), "failed_steps": failures}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
