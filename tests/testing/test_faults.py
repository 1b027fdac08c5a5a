"""Fault rules through Broker.add_fault / faults / clear_faults, against real clients over real sockets.

Every test checks both sides: the rule fired (it is gone from faults() once its count is used up, or
its `fired` counter moved) and the client got through it correctly (the log holds every message once).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from minikafka.broker.control.faults import FaultSpecError
from minikafka.testing import Broker, Mode

from tests.support.clients import create_topic
from tests.support.produce import Client, produce

pytestmark = pytest.mark.e2e

MODES: tuple[Mode, ...] = ("inprocess", "process")
MESSAGES = 20
DEADLINE_S = 30.0
IDEMPOTENT = {"enable.idempotence": True, "linger.ms": 5}


@pytest.fixture(scope="module", params=MODES)
def module_broker(request: pytest.FixtureRequest) -> Iterator[Broker]:
    with Broker({"num.partitions": 1}, mode=request.param) as broker:
        yield broker


@pytest.fixture
def broker(module_broker: Broker) -> Iterator[Broker]:
    """The module's broker of one mode; each test uses its own topics and groups, and leaves no rule."""
    yield module_broker
    module_broker.clear_faults()


@pytest.fixture
def inprocess_broker() -> Iterator[Broker]:
    with Broker({"num.partitions": 1}) as broker:
        yield broker


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _read_all(broker: Broker, topic: str, count: int, partition: int = 0) -> list[bytes]:
    """Every record of one partition from offset 0, read until `count` arrived or the deadline passed."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": _name("reader"),
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        # Anything beyond `count` would be a duplicate: give it one more poll to show up.
        extra = consumer.poll(0.5)
        if extra is not None and extra.error() is None:
            values.append(extra.value())
        return values
    finally:
        consumer.close()


def _expected(count: int = MESSAGES) -> list[bytes]:
    return [str(n).encode() for n in range(count)]


def _wait_until_fired(broker: Broker, fault_id: int) -> None:
    """Poll until the rule with `fault_id` has used up its count (and so left the table)."""
    deadline = time.monotonic() + DEADLINE_S
    while any(rule["id"] == fault_id for rule in broker.faults()):
        assert time.monotonic() < deadline, f"fault {fault_id} did not fire: {broker.faults()}"
        time.sleep(0.05)


# --- idempotent producers retry through NOT_LEADER_OR_FOLLOWER and write every message once ------------


def test_confluent_idempotent_producer_retries_through_not_leader(broker: Broker) -> None:
    topic = _name("nl-confluent")
    create_topic(broker.bootstrap_servers, topic)
    rule = broker.add_fault(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=3, topic=topic)
    assert rule["remaining"] == 3 and rule["error_code"] == 6 and rule["api_key"] == 0
    assert produce(broker.bootstrap_servers, topic, _expected(), timeout=DEADLINE_S, **IDEMPOTENT) == []
    assert broker.faults() == []  # all three answers were given
    assert _read_all(broker, topic, MESSAGES) == _expected()
    assert broker.state()["topics"][topic]["partitions"]["0"]["high_watermark"] == MESSAGES


@pytest.mark.parametrize("client", ["aiokafka", "kafka-python"])
def test_python_idempotent_producers_retry_through_not_leader(inprocess_broker: Broker, client: Client) -> None:
    broker = inprocess_broker
    topic = _name("nl-py")
    create_topic(broker.bootstrap_servers, topic)
    broker.add_fault(api=0, error=6, count=3, topic=topic)  # numbers work as well as Kafka's names
    produce(broker.bootstrap_servers, topic, _expected(), client=client, timeout=DEADLINE_S, enable_idempotence=True,
            retry_backoff_ms=20)
    assert broker.faults() == []
    assert _read_all(broker, topic, MESSAGES) == _expected()
    partition = broker.state()["topics"][topic]["partitions"]["0"]
    assert partition["high_watermark"] == MESSAGES
    assert [producer["last_sequence"] for producer in partition["producers"]] == [MESSAGES - 1]


# --- the other kinds of fault ------------------------------------------------------------------------


@pytest.mark.parametrize("drop", ["before", "after"])
def test_dropped_connection_is_survived_exactly_once(broker: Broker, drop: str) -> None:
    """"after" is the hard case: the batch is written, its acknowledgement lost; the retry must be
    recognised as a duplicate by the idempotent producer state."""
    topic = _name(f"drop-{drop}")
    create_topic(broker.bootstrap_servers, topic)
    broker.add_fault("Produce", drop=drop, count=1, topic=topic)  # type: ignore[arg-type]
    assert produce(broker.bootstrap_servers, topic, _expected(), timeout=DEADLINE_S, **IDEMPOTENT) == []
    assert broker.faults() == []
    assert _read_all(broker, topic, MESSAGES) == _expected()
    assert "connection dropped " + drop + " handling" in broker.logs()


def test_delay_is_survived(broker: Broker) -> None:
    topic = _name("delay")
    create_topic(broker.bootstrap_servers, topic)
    broker.add_fault("Produce", delay_ms=1500, count=1, topic=topic)
    assert produce(broker.bootstrap_servers, topic, _expected(), timeout=DEADLINE_S, **IDEMPOTENT) == []
    assert broker.faults() == []
    assert _read_all(broker, topic, MESSAGES) == _expected()


def test_delay_past_the_request_timeout_is_retried_exactly_once(inprocess_broker: Broker) -> None:
    """The client gives up on the delayed request and sends it again on a new connection; the delayed one
    is still written when its delay ends, and the sequence numbers keep the log free of the duplicate."""
    broker = inprocess_broker
    topic = _name("delay-timeout")
    create_topic(broker.bootstrap_servers, topic)
    broker.add_fault("Produce", delay_ms=2500, count=1, topic=topic)
    assert produce(broker.bootstrap_servers, topic, _expected(), timeout=DEADLINE_S, **IDEMPOTENT,
                   **{"request.timeout.ms": 1000}) == []
    assert broker.faults() == []
    assert _read_all(broker, topic, MESSAGES) == _expected()


def test_throttle_reaches_confluent_throttle_cb(broker: Broker) -> None:
    topic = _name("throttle")
    create_topic(broker.bootstrap_servers, topic)
    throttled: list[float] = []
    broker.add_fault("Produce", throttle_ms=700, count=1, topic=topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0,
                         "throttle_cb": lambda event: throttled.append(event.throttle_time)})
    producer.produce(topic, b"v")
    assert producer.flush(DEADLINE_S) == 0
    deadline = time.monotonic() + DEADLINE_S
    while not throttled and time.monotonic() < deadline:
        producer.poll(0.1)  # throttle events are served by poll
    assert throttled == [0.7]
    assert broker.faults() == []


def test_error_goes_only_to_the_matched_partition(inprocess_broker: Broker) -> None:
    """One Produce for partitions 0 and 1, a rule for partition 1: partition 0 is written, 1 is not."""
    broker = inprocess_broker
    topic = _name("split")
    create_topic(broker.bootstrap_servers, topic, partitions=2)
    # A permanent error, so the client reports it instead of retrying (librdkafka retries a leader change
    # whatever its `retries`).
    broker.add_fault("Produce", "TOPIC_AUTHORIZATION_FAILED", count=1, topic=topic, partition=1)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 200})
    producer.list_topics(topic, timeout=DEADLINE_S)  # metadata first, so both records go in one request
    results: dict[int, KafkaError | None] = {}
    for partition in (0, 1):
        producer.produce(topic, b"v", partition=partition,
                         on_delivery=lambda err, msg: results.__setitem__(msg.partition(), err))
    assert producer.flush(DEADLINE_S) == 0
    assert results[0] is None
    error = results[1]
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    partitions = broker.state()["topics"][topic]["partitions"]
    assert (partitions["0"]["high_watermark"], partitions["1"]["high_watermark"]) == (1, 0)
    assert broker.faults() == []


def test_client_id_filter(inprocess_broker: Broker) -> None:
    broker = inprocess_broker
    topic = _name("client")
    create_topic(broker.bootstrap_servers, topic)
    rule = broker.add_fault("Produce", "TOPIC_AUTHORIZATION_FAILED", count=None, client_id="the-bad-one")
    for client_id, expected in (("a-good-one", None), ("the-bad-one", KafkaError.TOPIC_AUTHORIZATION_FAILED)):
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": client_id,
                             "linger.ms": 0})
        errors: list[KafkaError] = []
        producer.produce(topic, b"v", on_delivery=lambda err, _msg, errors=errors: errors.append(err))
        producer.flush(DEADLINE_S)
        assert [error.code() if error is not None else None for error in errors] == [expected]
    [active] = broker.faults()  # count=None: still there, until removed
    assert active["id"] == rule["id"] and active["remaining"] is None and active["fired"] >= 1
    assert broker.remove_fault(rule["id"]) is True
    assert broker.remove_fault(rule["id"]) is False
    assert broker.faults() == []


# --- a consumer group survives coordinator errors ------------------------------------------------------


def test_consumer_survives_coordinator_errors(broker: Broker) -> None:
    topic, group = _name("grp"), _name("g")
    create_topic(broker.bootstrap_servers, topic)
    assert produce(broker.bootstrap_servers, topic, _expected(), timeout=DEADLINE_S, **IDEMPOTENT) == []
    rules = [
        broker.add_fault("FindCoordinator", "COORDINATOR_LOAD_IN_PROGRESS", count=2, group_id=group),
        broker.add_fault("JoinGroup", "NOT_COORDINATOR", count=1, group_id=group),
        broker.add_fault("Heartbeat", "NOT_COORDINATOR", count=1, group_id=group),
        broker.add_fault("OffsetCommit", "NOT_COORDINATOR", count=1, group_id=group),
        broker.add_fault("OffsetCommit", "COORDINATOR_LOAD_IN_PROGRESS", count=1, group_id=group),
    ]
    # fetch.wait.max.ms: after the injected NOT_COORDINATOR on OffsetCommit, librdkafka's FindCoordinator
    # waits behind the consumer's parked Fetch on the same connection (Kafka serves a connection's
    # requests one at a time too). With the default 500 ms wait, librdkafka could then close its
    # coordinator connection for the "nodename change" under the retried commit, mark the coordinator
    # dead again, and loop without heartbeats until the session timed out (librdkafka issue #3645):
    # with both cores kept busy, 5 of 110 runs ended in UNKNOWN_MEMBER_ID, against 0 of 110 with 10 ms.
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "heartbeat.interval.ms": 100, "session.timeout.ms": 6000, "fetch.wait.max.ms": 10})
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(values) < MESSAGES and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
        assert values == _expected()
        # A commit answered NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS is retried by librdkafka after
        # it looked the coordinator up again; a synchronous commit returns once one went through.
        committed = consumer.commit(asynchronous=False)
        assert committed is not None and [tp.offset for tp in committed] == [MESSAGES]
        # Keep polling (heartbeats go on) until every rule fired, the Heartbeat one included.
        while broker.faults() and time.monotonic() < deadline:
            consumer.poll(0.1)
        assert broker.faults() == [], f"rules that never fired: {broker.faults()}"
        assert [tp.offset for tp in consumer.committed([TopicPartition(topic, 0)], timeout=DEADLINE_S)] == [MESSAGES]
    finally:
        consumer.close()
    state = broker.state()["groups"][group]
    assert state["committed"] == {topic: {"0": MESSAGES}}
    assert state["generation"] >= 1
    assert len(rules) == 5


# --- the same validation in both modes --------------------------------------------------------------


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"api": "Produc", "error": "NOT_LEADER_OR_FOLLOWER"}, "unknown API"),
    ({"api": "Produce", "error": "NOT_A_REAL_ERROR"}, "unknown Kafka error"),
    ({"api": "Produce", "error": "NONE"}, "NONE is not an error"),
    ({"api": "Produce", "error": 6, "count": 0}, "count"),
    ({"api": "Produce", "error": 6, "partition": 1}, "partition: needs topic"),
    ({"api": "Produce"}, "at least one of"),
    ({"api": "Produce", "drop": "sideways"}, "drop"),
    ({"api": "Produce", "delay_ms": -1}, "delay_ms"),
    ({"api": 999, "error": 6}, "not an API minikafka serves"),
])
def test_bad_rules_are_refused(broker: Broker, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(FaultSpecError, match=message):
        broker.add_fault(**kwargs)  # type: ignore[arg-type]
    assert broker.faults() == []


def test_list_and_clear(broker: Broker) -> None:
    first = broker.add_fault("find_coordinator", "coordinator_not_available", count=None, group_id="x")
    second = broker.add_fault("FETCH", delay_ms=10, count=4)
    listed = broker.faults()
    assert [rule["id"] for rule in listed] == [first["id"], second["id"]]
    assert (listed[0]["api"], listed[0]["error"], listed[1]["api"]) == (
        "FindCoordinator", "COORDINATOR_NOT_AVAILABLE", "Fetch")
    assert broker.clear_faults() == 2
    assert broker.faults() == []


def test_rules_end_with_the_broker_run() -> None:
    with Broker() as broker:
        broker.add_fault("Produce", "NOT_LEADER_OR_FOLLOWER", count=None)
        broker.restart()
        assert broker.faults() == []


# --- a transaction retries through CONCURRENT_TRANSACTIONS and COORDINATOR_NOT_AVAILABLE -------------


def test_transaction_commits_through_coordinator_errors(broker: Broker) -> None:
    topic, transactional_id = _name("txn"), _name("tx")
    create_topic(broker.bootstrap_servers, topic)
    for api, error in (("FindCoordinator", "COORDINATOR_NOT_AVAILABLE"),
                       ("AddPartitionsToTxn", "CONCURRENT_TRANSACTIONS"), ("EndTxn", "CONCURRENT_TRANSACTIONS")):
        broker.add_fault(api, error, count=2, transactional_id=transactional_id)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": transactional_id,
                         "linger.ms": 5})
    producer.init_transactions(DEADLINE_S)
    producer.begin_transaction()
    for value in _expected():
        producer.produce(topic, value)
    producer.commit_transaction(DEADLINE_S)
    assert broker.faults() == []
    partition = broker.state()["topics"][topic]["partitions"]["0"]
    # The records and the commit marker; nothing left open.
    assert partition["last_stable_offset"] == partition["high_watermark"] == MESSAGES + 1
    assert [p["open_transaction_first_offset"] for p in partition["producers"]] == [None]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": _name("rc"),
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(values) < MESSAGES and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
        assert values == _expected()
    finally:
        consumer.close()


def test_aiokafka_consumer_survives_coordinator_errors(inprocess_broker: Broker) -> None:
    broker = inprocess_broker
    topic, group = _name("grp-aio"), _name("g")
    create_topic(broker.bootstrap_servers, topic)
    assert produce(broker.bootstrap_servers, topic, _expected(), timeout=DEADLINE_S, **IDEMPOTENT) == []
    broker.add_fault("FindCoordinator", "COORDINATOR_LOAD_IN_PROGRESS", count=2, group_id=group)
    broker.add_fault("Heartbeat", "NOT_COORDINATOR", count=1, group_id=group)
    broker.add_fault("OffsetCommit", "NOT_COORDINATOR", count=1, group_id=group)
    broker.add_fault("OffsetCommit", "COORDINATOR_LOAD_IN_PROGRESS", count=1, group_id=group)

    async def run() -> list[bytes]:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    heartbeat_interval_ms=100, retry_backoff_ms=20)
        await consumer.start()
        try:
            values: list[bytes] = []
            async with asyncio.timeout(DEADLINE_S):
                while len(values) < MESSAGES:
                    batch = await consumer.getmany(timeout_ms=200)
                    values += [record.value for records in batch.values() for record in records]
                await consumer.commit()
                # Heartbeats go on in the background until the Heartbeat rule fired too.
                while broker.faults():
                    await asyncio.sleep(0.05)
            return values
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == _expected()
    assert broker.state()["groups"][group]["committed"] == {topic: {"0": MESSAGES}}


def test_throttle_mutes_the_connection_after_the_response(inprocess_broker: Broker) -> None:
    """As Kafka mutes a throttled channel (KIP-219): the throttled response comes at once, the request
    pipelined behind it is answered only after throttle_ms."""
    from kio.schema.api_versions.v0.request import ApiVersionsRequest
    from kio.schema.metadata.v12.request import MetadataRequest
    from minikafka.protocol.codec import decode_response, encode_request

    from tests.support.wire import Wire

    throttle_ms = 400
    inprocess_broker.add_fault("Metadata", throttle_ms=throttle_ms, count=1)
    wire = Wire(inprocess_broker)
    metadata = MetadataRequest(topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    wire.send(encode_request(1, metadata) + encode_request(2, ApiVersionsRequest()))
    corr, response = decode_response(wire.receive(), 3, 12)
    throttled_at = time.monotonic()
    assert (corr, response.throttle_time.total_seconds()) == (1, throttle_ms / 1000)
    assert decode_response(wire.receive(), 18, 0)[0] == 2
    # A lower bound only: the mute must last at least throttle_ms; how much longer depends on the machine.
    assert time.monotonic() - throttled_at >= throttle_ms / 1000 * 0.9
    wire.close()
    assert inprocess_broker.faults() == []
