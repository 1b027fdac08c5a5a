"""Transactions with aiokafka, kafka-python and kafkajs: commit, abort, offsets in the transaction,
zombie fencing, atomicity over partitions and topics, the broker aborting a transaction past its
timeout, INVALID_TRANSACTION_TIMEOUT, and the states `__transaction_state` records. What each wrote is
checked with librdkafka's read_committed/read_uncommitted. Each client's own read_committed consumer is
checked on a log of committed, aborted and open transactions, and reads `__transaction_state` itself."""

from __future__ import annotations

import asyncio
import base64
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import errors as aio_errors
from aiokafka.errors import KafkaError as AioKafkaError
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka import KafkaError as RdKafkaError
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka import errors as kp_errors
from kafka.errors import KafkaError as KpKafkaError
from kafka.structs import OffsetAndMetadata
from minikafka.coordinator.hashing import partition_for
from minikafka.coordinator.transaction.log import decode_key, encode_key
from minikafka.testing import Broker

from tests.support.clients import consume, create_topic, transactional_producer
from tests.support.names import unique_topic
from tests.support.transactions import assert_state_sequence, states_of
from tests.support.waiting import poll_until

from .test_kafkajs import JS_DIR, NODE, run_js


def committed_values(broker: Broker, topic: str, count: int, timeout: float = 4) -> list[bytes]:
    return sorted(r.value for r in consume(broker.bootstrap_servers, topic, count, isolation="read_committed",  # type: ignore[misc]
                                           timeout=timeout))


def all_values(broker: Broker, topic: str, count: int) -> list[bytes]:
    return sorted(r.value for r in consume(broker.bootstrap_servers, topic, count))  # type: ignore[misc]


def group_offset(broker: Broker, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group})
    try:
        return consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
    finally:
        consumer.close()


async def test_aiokafka_transactions(broker: Broker) -> None:
    topic, group = unique_topic("aiotx"), unique_topic("aiogroup")
    create_topic(broker.bootstrap_servers, topic)
    transactional_id = unique_topic("aiotid")
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=transactional_id)
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send_and_wait(topic, b"committed")
            await producer.send_offsets_to_transaction({AioTopicPartition(topic, 0): 7}, group)
        await producer.begin_transaction()
        await producer.send_and_wait(topic, b"aborted")
        await producer.send_offsets_to_transaction({AioTopicPartition(topic, 0): 99}, group)
        await producer.abort_transaction()
        successor = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=transactional_id)
        await successor.start()
        await successor.stop()
        with pytest.raises(AioKafkaError):
            async with producer.transaction():
                await producer.send_and_wait(topic, b"zombie")
    finally:
        await producer.stop()
    assert committed_values(broker, topic, 2) == [b"committed"]
    assert b"aborted" in all_values(broker, topic, 2)
    assert group_offset(broker, group, topic) == 7


def test_kafka_python_transactions(broker: Broker) -> None:
    topic, group = unique_topic("kptx"), unique_topic("kpgroup")
    create_topic(broker.bootstrap_servers, topic)
    transactional_id = unique_topic("kptid")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=transactional_id)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(topic, b"committed")
    producer.send_offsets_to_transaction({KpTopicPartition(topic, 0): OffsetAndMetadata(5, "", -1)}, group)
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send(topic, b"aborted").get(15)
    producer.abort_transaction()
    successor = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=transactional_id)
    successor.init_transactions()
    successor.close()
    producer.begin_transaction()
    producer.send(topic, b"zombie")
    with pytest.raises(KpKafkaError):
        producer.commit_transaction()
    producer.close(timeout=5)
    assert committed_values(broker, topic, 2) == [b"committed"]
    assert b"aborted" in all_values(broker, topic, 2)
    assert group_offset(broker, group, topic) == 5


@pytest.mark.kafkajs
@pytest.mark.skipif(NODE is None or not (JS_DIR / "node_modules" / "kafkajs").exists(), reason="kafkajs missing")
def test_kafkajs_transactions(broker: Broker) -> None:
    topic, group = unique_topic("kjstx"), unique_topic("kjsgroup")
    create_topic(broker.bootstrap_servers, topic)
    result = run_js("transactions.js", broker.bootstrap_servers, topic, group)
    assert result == {"done": True, "zombieFenced": True}
    assert committed_values(broker, topic, 2) == [b"committed"]
    assert b"aborted" in all_values(broker, topic, 2)
    assert group_offset(broker, group, topic) == 3


# What a read_committed consumer may see of the log `mixed_log` writes, in order; the records after
# them sit behind an open transaction (the last stable offset) and must not be delivered.
READ_COMMITTED_VALUES = [b"c1", b"c2", b"p1", b"c3"]
BEYOND_WAIT_S = 3.0


@pytest.fixture
def mixed_log(broker: Broker):  # type: ignore[no-untyped-def]
    """committed, aborted, plain and committed records, then an open transaction and a plain record."""
    topic = unique_topic("mixed")
    create_topic(broker.bootstrap_servers, topic)

    def transactional(name: str) -> Producer:
        return transactional_producer(broker.bootstrap_servers, unique_topic(name))

    writer = transactional("mixed-writer")
    writer.begin_transaction()
    writer.produce(topic, b"c1", partition=0)
    writer.produce(topic, b"c2", partition=0)
    writer.commit_transaction(15)
    writer.begin_transaction()
    writer.produce(topic, b"a1", partition=0)
    writer.produce(topic, b"a2", partition=0)
    writer.flush(15)
    writer.abort_transaction(15)
    plain = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    plain.produce(topic, b"p1", partition=0)
    plain.flush(15)
    writer.begin_transaction()
    writer.produce(topic, b"c3", partition=0)
    writer.commit_transaction(15)
    holder = transactional("mixed-open")
    holder.begin_transaction()
    holder.produce(topic, b"open", partition=0)
    holder.flush(15)
    plain.produce(topic, b"after-open", partition=0)
    plain.flush(15)
    assert sorted(all_values(broker, topic, 8)) == sorted([b"c1", b"c2", b"a1", b"a2", b"p1", b"c3", b"open",
                                                            b"after-open"])
    yield topic
    holder.abort_transaction(15)


async def test_aiokafka_read_committed_drops_aborted_and_stops_at_lso(broker: Broker, mixed_log: str) -> None:
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, isolation_level="read_committed",
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    seen: list[bytes] = []
    try:
        consumer.assign([AioTopicPartition(mixed_log, 0)])
        deadline = time.monotonic() + BEYOND_WAIT_S
        while time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                seen.extend(r.value for r in records)
    finally:
        await consumer.stop()
    assert seen == READ_COMMITTED_VALUES


def test_kafka_python_read_committed_drops_aborted_and_stops_at_lso(broker: Broker, mixed_log: str) -> None:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, isolation_level="read_committed",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=int(BEYOND_WAIT_S * 1000))
    try:
        consumer.assign([KpTopicPartition(mixed_log, 0)])
        seen = [record.value for record in consumer]  # ends after consumer_timeout_ms without records
    finally:
        consumer.close()
    assert seen == READ_COMMITTED_VALUES


@pytest.mark.kafkajs
@pytest.mark.skipif(NODE is None or not (JS_DIR / "node_modules" / "kafkajs").exists(), reason="kafkajs missing")
def test_kafkajs_read_committed_drops_aborted_and_stops_at_lso(broker: Broker, mixed_log: str) -> None:
    result = run_js("read_committed.js", broker.bootstrap_servers, mixed_log, str(len(READ_COMMITTED_VALUES)),
                    str(int(BEYOND_WAIT_S * 1000)))
    assert [v.encode() for v in result["values"]] == READ_COMMITTED_VALUES


# --- scenarios the confluent-kafka tests cover, with each of the other clients ----------------------

KAFKAJS_MISSING = NODE is None or not (JS_DIR / "node_modules" / "kafkajs").exists()


def read_to_end(broker: Broker, topic: str, partitions: tuple[int, ...], isolation: str,
                timeout: float = 20) -> list[tuple[int, bytes]]:
    """(partition, value) of every record a librdkafka consumer of `isolation` is given from offset 0 up
    to each partition's end (the last stable offset for read_committed), sorted; no waiting past it."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "e2e-reader",
                         "enable.auto.commit": False,
                         "isolation.level": isolation, "fetch.wait.max.ms": 100, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    received: list[tuple[int, bytes]] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while at_end != set(partitions):
            assert time.monotonic() < deadline, f"{topic} {isolation}: end of {set(partitions) - at_end} not reached"
            for message in consumer.consume(num_messages=1000, timeout=0.2):
                error = message.error()
                if error is not None and error.code() == RdKafkaError._PARTITION_EOF:
                    at_end.add(message.partition())  # type: ignore[arg-type]
                elif error is not None:
                    raise KafkaException(error)
                else:
                    received.append((message.partition(), message.value()))  # type: ignore[arg-type]
    finally:
        consumer.close()
    return sorted(received)


# Atomicity: one transaction over all partitions of two topics, committed; then one over the same
# partitions, aborted (its records are in the log before the abort).
ATOMIC_PARTITIONS = {"first": 3, "second": 2}


def atomic_records(first: str, second: str, prefix: str) -> list[tuple[str, int, bytes]]:
    """(topic, partition, value): six records over the 3 partitions of `first`, six over the 2 of `second`."""
    return ([(first, i % 3, f"{prefix}-x{i}".encode()) for i in range(6)]
            + [(second, i % 2, f"{prefix}-y{i}".encode()) for i in range(6)])


def atomic_topics(broker: Broker, client: str) -> tuple[str, str]:
    first, second = unique_topic(f"{client}-atoma"), unique_topic(f"{client}-atomb")
    create_topic(broker.bootstrap_servers, first, ATOMIC_PARTITIONS["first"])
    create_topic(broker.bootstrap_servers, second, ATOMIC_PARTITIONS["second"])
    return first, second


def assert_atomic_outcome(broker: Broker, first: str, second: str) -> None:
    for topic, partitions in ((first, (0, 1, 2)), (second, (0, 1))):
        committed = sorted((p, v) for t, p, v in atomic_records(first, second, "c") if t == topic)
        aborted = sorted((p, v) for t, p, v in atomic_records(first, second, "a") if t == topic)
        assert read_to_end(broker, topic, partitions, "read_committed") == committed, topic
        assert read_to_end(broker, topic, partitions, "read_uncommitted") == sorted(committed + aborted), topic


async def test_aiokafka_atomic_across_partitions_and_topics(broker: Broker) -> None:
    first, second = atomic_topics(broker, "aio")
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=unique_topic("aiotid"))
    await producer.start()
    try:
        async with producer.transaction():
            for topic, partition, value in atomic_records(first, second, "c"):
                await producer.send(topic, value, partition=partition)
        await producer.begin_transaction()
        sent = [await producer.send(topic, value, partition=partition)
                for topic, partition, value in atomic_records(first, second, "a")]
        await asyncio.gather(*sent)  # in the log before the abort
        await producer.abort_transaction()
    finally:
        await producer.stop()
    assert_atomic_outcome(broker, first, second)


def test_kafka_python_atomic_across_partitions_and_topics(broker: Broker) -> None:
    first, second = atomic_topics(broker, "kp")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=unique_topic("kptid"))
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for topic, partition, value in atomic_records(first, second, "c"):
            producer.send(topic, value, partition=partition)
        producer.commit_transaction()
        producer.begin_transaction()
        for topic, partition, value in atomic_records(first, second, "a"):
            producer.send(topic, value, partition=partition)
        producer.flush(15)  # in the log before the abort
        producer.abort_transaction()
    finally:
        producer.close(timeout=5)
    assert_atomic_outcome(broker, first, second)


@pytest.mark.kafkajs
@pytest.mark.skipif(KAFKAJS_MISSING, reason="kafkajs missing")
def test_kafkajs_atomic_across_partitions_and_topics(broker: Broker) -> None:
    first, second = atomic_topics(broker, "kjs")
    assert run_js("transactions_atomic.js", broker.bootstrap_servers, first, second) == {"done": True}
    assert_atomic_outcome(broker, first, second)


# The broker aborts a transaction open longer than the producer's transaction timeout: its timeout
# check runs every transaction.abort.timed.out.transaction.cleanup.interval.ms, the first time after
# log.initial.task.delay.ms.
TXN_TIMEOUT_MS = 2000
ABORT_DEADLINE_S = 20.0


def timeout_broker(broker_factory) -> Broker:  # type: ignore[no-untyped-def]
    return broker_factory(**{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
                             "log.initial.task.delay.ms": "0"})


def wait_for_abort_marker(broker: Broker, topic: str) -> None:
    """One record at offset 0 of an open transaction: the end offset read_committed sees (the last
    stable offset) passes 1 only once the coordinator wrote the abort marker after it."""
    reader = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "lso",
                       "isolation.level": "read_committed"})
    try:
        poll_until(lambda: reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[1] >= 2,
                   timeout=ABORT_DEADLINE_S, interval=0.1, message="the broker to abort the timed-out transaction")
    finally:
        reader.close()


def assert_timed_out_record_aborted(broker: Broker, topic: str) -> None:
    assert read_to_end(broker, topic, (0,), "read_committed") == []
    assert read_to_end(broker, topic, (0,), "read_uncommitted") == [(0, b"too-slow")]


async def test_aiokafka_broker_aborts_a_timed_out_transaction(broker_factory) -> None:  # type: ignore[no-untyped-def]
    broker = timeout_broker(broker_factory)
    topic = unique_topic("aiotxto")
    create_topic(broker.bootstrap_servers, topic)
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=unique_topic("aiotid"),
                                transaction_timeout_ms=TXN_TIMEOUT_MS)
    await producer.start()
    try:
        await producer.begin_transaction()
        await producer.send_and_wait(topic, b"too-slow", partition=0)
        await asyncio.to_thread(wait_for_abort_marker, broker, topic)
        # Kafka fences the epoch of a transaction it aborted on timeout: EndTxn is PRODUCER_FENCED
        # (INVALID_PRODUCER_EPOCH below v2), which aiokafka raises as ProducerFenced.
        with pytest.raises(aio_errors.ProducerFenced):
            await producer.commit_transaction()
    finally:
        await producer.stop()
    assert_timed_out_record_aborted(broker, topic)


def test_kafka_python_broker_aborts_a_timed_out_transaction(broker_factory) -> None:  # type: ignore[no-untyped-def]
    broker = timeout_broker(broker_factory)
    topic = unique_topic("kptxto")
    create_topic(broker.bootstrap_servers, topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=unique_topic("kptid"),
                             transaction_timeout_ms=TXN_TIMEOUT_MS)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"too-slow", partition=0).get(15)
        wait_for_abort_marker(broker, topic)
        with pytest.raises(kp_errors.ProducerFencedError):  # EndTxn: PRODUCER_FENCED, as Kafka
            producer.commit_transaction()
    finally:
        producer.close(timeout=5)
    assert_timed_out_record_aborted(broker, topic)


@pytest.mark.kafkajs
@pytest.mark.skipif(KAFKAJS_MISSING, reason="kafkajs missing")
def test_kafkajs_broker_aborts_a_timed_out_transaction(broker_factory) -> None:  # type: ignore[no-untyped-def]
    broker = timeout_broker(broker_factory)
    topic = unique_topic("kjstxto")
    create_topic(broker.bootstrap_servers, topic)
    # The script polls the end offset itself (deadline ABORT_DEADLINE_S), then commits.
    result = run_js("transaction_timeout.js", broker.bootstrap_servers, topic, str(TXN_TIMEOUT_MS),
                    str(int(ABORT_DEADLINE_S * 1000)))
    assert int(result["endOffset"]) >= 2, "the broker did not abort the timed-out transaction"
    error = result["commitError"]
    assert error is not None, "the commit of a transaction the broker aborted succeeded"
    # kafkajs sends EndTxn v1, for which Kafka answers the fenced epoch with INVALID_PRODUCER_EPOCH.
    assert {error.get("type"), error.get("originalType")} & {"PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"}, error
    assert_timed_out_record_aborted(broker, topic)


# transaction.timeout.ms above the broker's transaction.max.timeout.ms: InitProducerId fails with
# INVALID_TRANSACTION_TIMEOUT; the largest allowed timeout is accepted.
MAX_TXN_TIMEOUT_MS = 5000
TOO_LONG_TXN_TIMEOUT_MS = 60000


def max_timeout_broker(broker_factory) -> Broker:  # type: ignore[no-untyped-def]
    return broker_factory(**{"transaction.max.timeout.ms": str(MAX_TXN_TIMEOUT_MS)})


async def test_aiokafka_invalid_transaction_timeout(broker_factory) -> None:  # type: ignore[no-untyped-def]
    broker = max_timeout_broker(broker_factory)
    refused = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=unique_topic("aiotid"),
                               transaction_timeout_ms=TOO_LONG_TXN_TIMEOUT_MS)
    try:
        with pytest.raises(aio_errors.InvalidTransactionTimeout):
            await asyncio.wait_for(refused.start(), 20)
    finally:
        await refused.stop()
    accepted = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=unique_topic("aiotid"),
                                transaction_timeout_ms=MAX_TXN_TIMEOUT_MS)
    await asyncio.wait_for(accepted.start(), 20)
    await accepted.stop()


def test_kafka_python_invalid_transaction_timeout(broker_factory) -> None:  # type: ignore[no-untyped-def]
    broker = max_timeout_broker(broker_factory)
    refused = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=unique_topic("kptid"),
                            transaction_timeout_ms=TOO_LONG_TXN_TIMEOUT_MS, max_block_ms=20000)
    try:
        # kafka-python turns InitProducerId errors it does not handle into a plain KafkaError that names
        # the broker's error: "Unexpected error in InitProducerIdResponse: [Error 50] InvalidTransactionTimeoutError".
        with pytest.raises(KpKafkaError, match=r"\[Error 50\] InvalidTransactionTimeoutError"):
            refused.init_transactions()
    finally:
        refused.close(timeout=5)
    accepted = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=unique_topic("kptid"),
                             transaction_timeout_ms=MAX_TXN_TIMEOUT_MS, max_block_ms=20000)
    try:
        accepted.init_transactions()
    finally:
        accepted.close(timeout=5)


@pytest.mark.kafkajs
@pytest.mark.skipif(KAFKAJS_MISSING, reason="kafkajs missing")
def test_kafkajs_invalid_transaction_timeout(broker_factory) -> None:  # type: ignore[no-untyped-def]
    broker = max_timeout_broker(broker_factory)
    refused = run_js("invalid_txn_timeout.js", broker.bootstrap_servers, unique_topic("kjstid"),
                     str(TOO_LONG_TXN_TIMEOUT_MS))["failure"]
    assert refused is not None, "a transaction timeout above transaction.max.timeout.ms was accepted"
    assert "INVALID_TRANSACTION_TIMEOUT" in (refused.get("type"), refused.get("originalType")), refused
    assert run_js("invalid_txn_timeout.js", broker.bootstrap_servers, unique_topic("kjstid"),
                  str(MAX_TXN_TIMEOUT_MS)) == {"failure": None}


# `__transaction_state`, read with each client's own consumer: one committed transaction of one record
# is recorded as Empty (InitProducerId), Ongoing (AddPartitionsToTxn), PrepareCommit and CompleteCommit.
TXN_STATE_TOPIC = "__transaction_state"
TXN_STATE_PARTITIONS = 50
TXN_LOG_DEADLINE_S = 15.0


async def test_aiokafka_transaction_state_log_shows_the_state_sequence(broker: Broker) -> None:
    topic, transactional_id = unique_topic("aiotxlog"), unique_topic("aiotid")
    create_topic(broker.bootstrap_servers, topic)
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=transactional_id)
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send_and_wait(topic, b"v", partition=0)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False,
                                auto_offset_reset="earliest")
    await consumer.start()
    records: list[tuple[bytes, bytes | None]] = []
    try:
        consumer.assign([AioTopicPartition(TXN_STATE_TOPIC, partition_for(transactional_id, TXN_STATE_PARTITIONS))])
        deadline = time.monotonic() + TXN_LOG_DEADLINE_S
        while states_of(records)[-1:] != ["CompleteCommit"] and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=200)).values():
                records.extend((r.key, r.value) for r in batch if decode_key(r.key) == transactional_id)
    finally:
        await consumer.stop()
    assert_state_sequence(records, transactional_id, topic)


def test_kafka_python_transaction_state_log_shows_the_state_sequence(broker: Broker) -> None:
    topic, transactional_id = unique_topic("kptxlog"), unique_topic("kptid")
    create_topic(broker.bootstrap_servers, topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=transactional_id)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"v", partition=0)
        producer.commit_transaction()
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    records: list[tuple[bytes, bytes | None]] = []
    try:
        consumer.assign([KpTopicPartition(TXN_STATE_TOPIC, partition_for(transactional_id, TXN_STATE_PARTITIONS))])
        deadline = time.monotonic() + TXN_LOG_DEADLINE_S
        while states_of(records)[-1:] != ["CompleteCommit"] and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                records.extend((r.key, r.value) for r in batch if decode_key(r.key) == transactional_id)
    finally:
        consumer.close()
    assert_state_sequence(records, transactional_id, topic)


@pytest.mark.kafkajs
@pytest.mark.skipif(KAFKAJS_MISSING, reason="kafkajs missing")
def test_kafkajs_transaction_state_log_shows_the_state_sequence(broker: Broker) -> None:
    topic, transactional_id = unique_topic("kjstxlog"), unique_topic("kjstid")
    create_topic(broker.bootstrap_servers, topic)
    key = encode_key(transactional_id)
    expected = 4
    # The script commits one transaction with kafkajs, then reads the partition of the transactional
    # id with a kafkajs consumer until `expected` records of that key arrived (or the deadline).
    result = run_js("txn_state_log.js", broker.bootstrap_servers, topic, transactional_id,
                    str(partition_for(transactional_id, TXN_STATE_PARTITIONS)), base64.b64encode(key).decode(),
                    str(expected), str(int(TXN_LOG_DEADLINE_S * 1000)))
    offsets = [int(r["offset"]) for r in result["records"]]
    assert offsets == sorted(offsets), "log order"
    records = [(base64.b64decode(r["key"]), None if r["value"] is None else base64.b64decode(r["value"]))
               for r in result["records"]]
    assert_state_sequence(records, transactional_id, topic)
