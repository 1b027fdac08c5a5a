"""Transactions with confluent-kafka (librdkafka): the exactly-once flows of the seeds."""

from __future__ import annotations

import struct

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from minikafka.coordinator.hashing import partition_for
from minikafka.coordinator.transaction.log import decode_key, formatter_json
from minikafka.testing import Broker

from tests.support.clients import consume, create_topic, transactional_producer
from tests.support.names import unique_topic
from tests.support.transactions import assert_state_sequence, states_of, txn_log_lines
from tests.support.waiting import poll_until


def txn_producer(broker: Broker, transactional_id: str, **extra: object) -> Producer:
    return transactional_producer(broker.bootstrap_servers, transactional_id, **{"linger.ms": 1, **extra})


def values(broker: Broker, topic: str, isolation: str, count: int, partitions: tuple[int, ...] = (0,),
           timeout: float = 10) -> list[bytes]:
    return sorted(r.value for r in consume(broker.bootstrap_servers, topic, count, partitions=partitions,  # type: ignore[misc]
                                           isolation=isolation, timeout=timeout))


def test_commit_and_abort(broker: Broker) -> None:
    topic = unique_topic("txc")
    create_topic(broker.bootstrap_servers, topic)
    producer = txn_producer(broker, unique_topic("tid"))
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, f"commit-{i}".encode())
    producer.commit_transaction(15)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, f"abort-{i}".encode())
    producer.flush(15)  # the records reach the log before the abort
    producer.abort_transaction(15)
    producer.begin_transaction()
    producer.produce(topic, b"commit-3")
    producer.commit_transaction(15)
    committed = [f"commit-{i}".encode() for i in range(4)]
    assert values(broker, topic, "read_committed", 5, timeout=4) == committed
    assert values(broker, topic, "read_uncommitted", 7) == sorted(committed + [f"abort-{i}".encode()
                                                                               for i in range(3)])


def test_open_transaction_blocks_read_committed(broker: Broker) -> None:
    topic = unique_topic("txopen")
    create_topic(broker.bootstrap_servers, topic)
    plain = Producer({"bootstrap.servers": broker.bootstrap_servers})
    plain.produce(topic, b"before")
    plain.flush(10)
    producer = txn_producer(broker, unique_topic("tid"))
    producer.begin_transaction()
    producer.produce(topic, b"in-txn")
    producer.flush(15)
    plain.produce(topic, b"after")
    plain.flush(10)
    assert values(broker, topic, "read_committed", 2, timeout=3) == [b"before"]
    producer.commit_transaction(15)
    assert values(broker, topic, "read_committed", 3) == [b"after", b"before", b"in-txn"]


def test_atomic_across_partitions_and_topics(broker: Broker) -> None:
    first, second = unique_topic("txa"), unique_topic("txb")
    create_topic(broker.bootstrap_servers, first, 3)
    create_topic(broker.bootstrap_servers, second, 2)
    producer = txn_producer(broker, unique_topic("tid"))
    producer.begin_transaction()
    for i in range(6):
        producer.produce(first, f"x{i}".encode(), partition=i % 3)
        producer.produce(second, f"y{i}".encode(), partition=i % 2)
    producer.flush(15)
    producer.abort_transaction(15)
    producer.begin_transaction()
    for i in range(6):
        producer.produce(first, f"x{i}".encode(), partition=i % 3)
        producer.produce(second, f"y{i}".encode(), partition=i % 2)
    producer.commit_transaction(15)
    assert values(broker, first, "read_committed", 6, (0, 1, 2)) == [f"x{i}".encode() for i in range(6)]
    assert values(broker, second, "read_committed", 6, (0, 1)) == [f"y{i}".encode() for i in range(6)]


def test_consume_transform_produce_offsets_move_only_on_commit(broker: Broker) -> None:
    source, sink = unique_topic("src"), unique_topic("sink")
    create_topic(broker.bootstrap_servers, source)
    create_topic(broker.bootstrap_servers, sink)
    group = unique_topic("ctp")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    producer = txn_producer(broker, unique_topic("tid"))
    tp = TopicPartition(source, 0)

    def transact(offset: int, commit: bool) -> None:
        producer.begin_transaction()
        producer.produce(sink, f"out-{offset}".encode())
        producer.send_offsets_to_transaction([TopicPartition(source, 0, offset)],
                                             consumer.consumer_group_metadata(), 15)
        if commit:
            producer.commit_transaction(15)
        else:
            producer.flush(15)
            producer.abort_transaction(15)

    transact(10, commit=True)
    assert consumer.committed([tp], timeout=10)[0].offset == 10
    transact(20, commit=False)
    assert consumer.committed([tp], timeout=10)[0].offset == 10, "an aborted transaction moves no offset"
    transact(30, commit=True)
    assert consumer.committed([tp], timeout=10)[0].offset == 30
    consumer.close()
    assert values(broker, sink, "read_committed", 3, timeout=4) == [b"out-10", b"out-30"]


def test_pending_transactional_offsets_are_unstable_for_require_stable(broker: Broker) -> None:
    """librdkafka's read_committed consumer fetches offsets with require_stable (KIP-447)."""
    source = unique_topic("stable")
    create_topic(broker.bootstrap_servers, source)
    group = unique_topic("stable-group")
    tp = TopicPartition(source, 0)

    def consumer(isolation: str) -> Consumer:
        return Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": isolation})

    stable, unstable = consumer("read_committed"), consumer("read_uncommitted")
    producer = txn_producer(broker, unique_topic("tid"))
    producer.begin_transaction()
    producer.send_offsets_to_transaction([TopicPartition(source, 0, 42)], stable.consumer_group_metadata(), 15)
    with pytest.raises(KafkaException) as pending:
        stable.committed([tp], timeout=3)  # retried on UNSTABLE_OFFSET_COMMIT until the timeout
    assert pending.value.args[0].code() in (KafkaError._TIMED_OUT, KafkaError.UNSTABLE_OFFSET_COMMIT)
    assert unstable.committed([tp], timeout=10)[0].offset < 0, "no committed offset yet"
    producer.commit_transaction(15)
    assert stable.committed([tp], timeout=10)[0].offset == 42
    assert unstable.committed([tp], timeout=10)[0].offset == 42
    stable.close()
    unstable.close()


def test_offsets_of_a_stale_generation_are_refused(broker: Broker) -> None:
    """KIP-447: a transformer that lost its partitions in a rebalance cannot commit their offsets."""
    source = unique_topic("gen")
    create_topic(broker.bootstrap_servers, source, 2)
    group = unique_topic("gen-group")
    config = {"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "enable.auto.commit": False,
              "session.timeout.ms": 6000, "heartbeat.interval.ms": 200}
    first = Consumer(config)
    first.subscribe([source])
    poll_until(lambda: first.poll(0.1) is None and bool(first.assignment()), timeout=20,
               message="the first consumer's assignment")
    stale = first.consumer_group_metadata()
    second = Consumer(config)
    second.subscribe([source])

    def rebalanced() -> bool:
        first.poll(0.1)
        second.poll(0.1)
        return bool(second.assignment()) and bool(first.assignment())

    poll_until(rebalanced, timeout=30, message="a rebalance over both consumers")
    producer = txn_producer(broker, unique_topic("tid"))
    producer.begin_transaction()
    with pytest.raises(KafkaException) as refused:
        producer.send_offsets_to_transaction([TopicPartition(source, 0, 5)], stale, 15)
    assert refused.value.args[0].code() == KafkaError.ILLEGAL_GENERATION
    producer.abort_transaction(15)
    producer.begin_transaction()
    producer.send_offsets_to_transaction([TopicPartition(source, 0, 7)], first.consumer_group_metadata(), 15)
    producer.commit_transaction(15)
    assert first.committed([TopicPartition(source, 0)], timeout=10)[0].offset == 7
    first.close()
    second.close()


def test_zombie_is_fenced(broker: Broker) -> None:
    topic = unique_topic("txz")
    create_topic(broker.bootstrap_servers, topic)
    transactional_id = unique_topic("tid")
    zombie = txn_producer(broker, transactional_id)
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie")
    zombie.flush(15)
    successor = txn_producer(broker, transactional_id)  # aborts the zombie's open transaction
    successor.begin_transaction()
    successor.produce(topic, b"successor")
    successor.commit_transaction(15)
    with pytest.raises(KafkaException) as fenced:
        zombie.commit_transaction(15)
    assert fenced.value.args[0].fatal() or "fenced" in str(fenced.value).lower()
    assert values(broker, topic, "read_committed", 2, timeout=3) == [b"successor"]


def test_broker_aborts_a_timed_out_transaction(broker_factory) -> None:
    broker = broker_factory(**{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
                               "log.initial.task.delay.ms": "0"})
    topic = unique_topic("txto")
    create_topic(broker.bootstrap_servers, topic)
    producer = txn_producer(broker, unique_topic("tid"), **{"transaction.timeout.ms": 1000})
    producer.begin_transaction()
    producer.produce(topic, b"too-slow")
    producer.flush(15)
    reader = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "x",
                       "isolation.level": "read_committed"})
    # Once the coordinator's abort marker is written, the last stable offset passes the record.
    poll_until(lambda: reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[1] >= 2, timeout=20,
               message="the timed-out transaction to be aborted")
    reader.close()
    with pytest.raises(KafkaException):
        producer.commit_transaction(15)
    assert values(broker, topic, "read_uncommitted", 1) == [b"too-slow"]
    assert values(broker, topic, "read_committed", 1, timeout=3) == []


def test_invalid_transaction_timeout(broker_factory) -> None:
    broker = broker_factory(**{"transaction.max.timeout.ms": "5000"})
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": unique_topic("tid"),
                         "transaction.timeout.ms": 10000})
    with pytest.raises(KafkaException) as error:
        producer.init_transactions(15)
    assert "INVALID_TRANSACTION_TIMEOUT" in str(error.value) or "timeout" in str(error.value).lower()


def test_transaction_state_log_shows_the_state_sequence(broker: Broker) -> None:
    topic = unique_topic("txlog")
    create_topic(broker.bootstrap_servers, topic)
    transactional_id = unique_topic("tid")
    producer = txn_producer(broker, transactional_id)
    producer.begin_transaction()
    producer.produce(topic, b"v")
    producer.commit_transaction(15)
    partition = partition_for(transactional_id, 50)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "dump",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("__transaction_state", partition, 0)])
    records: list[tuple[bytes, bytes | None]] = []

    def collect() -> bool:
        for message in consumer.consume(100, 0.2):
            if message.error() is None and decode_key(message.key()) == transactional_id:
                records.append((message.key(), message.value()))
        return states_of(records)[-1:] == ["CompleteCommit"]

    poll_until(collect, timeout=15, message="CompleteCommit in __transaction_state")
    consumer.close()
    assert_state_sequence(records, transactional_id, topic)
    # `minikafka txn-log` prints from the data directory what TransactionLogMessageFormatter prints of
    # the records the client consumed: the seeds' dump, one JSON line per state.
    assert txn_log_lines(broker.data_dir, transactional_id) == [formatter_json(k, v) for k, v in records]
    raw_key = struct.pack(">hh", 0, len(transactional_id)) + transactional_id.encode()
    assert decode_key(raw_key) == transactional_id


def test_transaction_version_1_writes_flexible_state_records_that_survive_a_restart(broker_factory) -> None:  # type: ignore[no-untyped-def]
    broker = broker_factory(**{"transaction.version": "1"})
    topic, transactional_id = unique_topic("tv1"), unique_topic("tv1-tid")
    create_topic(broker.bootstrap_servers, topic)
    producer = txn_producer(broker, transactional_id)
    producer.begin_transaction()
    producer.produce(topic, b"v1")
    producer.commit_transaction(15)
    producer.flush(5)

    def dumped() -> list[dict]:  # type: ignore[type-arg]
        return txn_log_lines(broker.data_dir, transactional_id)

    poll_until(lambda: len(dumped()) == 4, timeout=15, message="CompleteCommit written")
    first = dumped()
    assert [e["value"]["version"] for e in first] == [1, 1, 1, 1]
    assert [e["value"]["data"]["transactionStatus"] for e in first] == [0, 1, 2, 4]
    epoch = first[-1]["value"]["data"]["producerEpoch"]

    broker.stop()
    broker.start()  # replays the v1 records: the id is known, so a new instance bumps its epoch
    successor = txn_producer(broker, transactional_id)
    successor.begin_transaction()
    successor.produce(topic, b"after-restart")
    successor.commit_transaction(15)
    poll_until(lambda: len(dumped()) >= 8, timeout=15, message="the successor's transaction written")
    after = dumped()
    assert {e["value"]["data"]["producerId"] for e in after} == {first[0]["value"]["data"]["producerId"]}
    assert after[4]["value"]["data"]["producerEpoch"] == epoch + 1
    assert values(broker, topic, "read_committed", 2) == [b"after-restart", b"v1"]
