"""Log compaction with real clients: confluent-kafka writes keyed records to compacted topics, the
manual clock starts the log cleaner, consumers read from offset 0 and see each key's last value with
offset gaps; transactions on a compacted topic; INVALID_RECORD per message for a record without key;
a kill -9 in the middle of a segment swap; __consumer_offsets compacted on a running broker."""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kio.schema.errors import ErrorCode
from minikafka.coordinator.transaction.log import decode_value
from minikafka.protocol.records import Record, build_batch
from minikafka.testing import Broker

from tests.support.clients import create_topic, transactional_producer
from tests.support.produce import produce
from tests.support.wire import Wire, produce_raw

# The cleaner job looks for a cleanable log at start and then every log.cleaner.backoff.ms (15 s), as
# Kafka's cleaner threads do; log.initial.task.delay.ms (30 s) delays only the other periodic jobs. One
# advance past both is certain to start a cleaning.
CLEANER_DUE_MS = 30_000 + 15_000
CLEANER_BACKOFF_MS = 15_000
SEGMENT_BYTES = 4096
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES), "min.cleanable.dirty.ratio": "0.01"}
MANUAL = {"minikafka.clock": "manual"}
Row = tuple[int, bytes | None, bytes | None]


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def read_to_end(bootstrap: str, topic: str, isolation: str = "read_uncommitted", timeout: float = 15.0,
                timestamps: dict[int, int] | None = None) -> list[Row]:
    """(offset, key, value) of partition 0 from offset 0 to its end, as a consumer sees them; each
    record's timestamp goes to `timestamps` if given."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": _name("reader"), "enable.auto.commit": False,
                         "isolation.level": isolation, "fetch.wait.max.ms": 50})
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        rows: list[Row] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            position = consumer.position([TopicPartition(topic, 0)])[0].offset
            if (rows and rows[-1][0] >= high - 1) or position >= high:
                return rows
            for message in consumer.consume(num_messages=1000, timeout=0.2):
                if message.error():
                    raise KafkaException(message.error())
                rows.append((message.offset(), message.key(), message.value()))
                if timestamps is not None:
                    timestamps[message.offset()] = message.timestamp()[1]
        raise AssertionError(f"{topic}: did not reach offset {high} in {timeout}s; read {len(rows)} records")
    finally:
        consumer.close()


def wait_for(condition: Callable[[], list[Row] | None], what: str, timeout: float = 30.0) -> list[Row]:
    deadline = time.monotonic() + timeout
    last: list[Row] | None = None
    while time.monotonic() < deadline:
        last = condition()
        if last is not None:
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def produce_keyed(bootstrap: str, topic: str, items: list[tuple[bytes, bytes | None]],
                  compression: str = "none") -> None:
    """In batches of up to 50 records, so the cleaner meets batches it must split."""
    failures = produce(bootstrap, topic, [value for _key, value in items], keys=[key for key, _value in items],
                       **{"linger.ms": 5, "batch.num.messages": 50, "compression.type": compression})
    assert not failures


def roll_with_sentinel(bootstrap: str, topic: str) -> None:
    """A record as large as a segment rolls the active one: everything before it becomes cleanable."""
    produce_keyed(bootstrap, topic, [(b"sentinel", os.urandom(SEGMENT_BYTES - 200))])  # incompressible


def expected_last(items: list[tuple[bytes, bytes | None]]) -> dict[bytes, bytes | None]:
    last: dict[bytes, bytes | None] = {}
    for key, value in items:
        last[key] = value
    return last


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker(MANUAL) as running:
        yield running


def _compacted(rows: list[Row], keys: int) -> list[Row] | None:
    """The rows once the cleaner has run: one record per key (plus the sentinel)."""
    return rows if len(rows) == keys + 1 else None


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
def test_consumer_from_offset_zero_sees_the_last_value_per_key_with_gaps(broker: Broker, compression: str) -> None:
    topic = _name("compacted")
    create_topic(broker.bootstrap_servers, topic, config=COMPACTED)
    items = [(b"key-%02d" % (i % 20), b"value-%04d" % i) for i in range(1000)]
    items += [(b"key-03", None), (b"key-07", None)]  # tombstones: kept until delete.retention.ms
    produce_keyed(broker.bootstrap_servers, topic, items, compression)
    roll_with_sentinel(broker.bootstrap_servers, topic)
    written: dict[int, int] = {}
    before = read_to_end(broker.bootstrap_servers, topic, timestamps=written)
    assert len(before) == len(items) + 1

    broker.advance_clock(CLEANER_DUE_MS)
    rows = wait_for(lambda: _compacted(read_to_end(broker.bootstrap_servers, topic), 20), "the cleaned topic")
    kept: dict[int, int] = {}
    assert read_to_end(broker.bootstrap_servers, topic, timestamps=kept) == rows
    # Batches rewritten with fewer records, or with a delete horizon for their tombstones, keep every
    # record's own timestamp.
    assert kept == {offset: written[offset] for offset in kept}

    last = expected_last(items)
    assert {key: value for _offset, key, value in rows[:-1]} == last
    offsets = [offset for offset, _key, _value in rows]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    # Offsets are kept: each record is where it was written, so the log has gaps.
    original = {(key, value): offset for offset, key, value in before}
    assert all(original[(key, value)] == offset for offset, key, value in rows)
    assert offsets[-1] == len(items) and len(offsets) < offsets[-1]
    assert rows[-1][1] == b"sentinel"


def test_a_fresh_broker_compacts_within_one_cleaner_backoff(broker: Broker) -> None:
    """librdkafka's 0077: a compacted topic made just after start is cleaned within one backoff, before
    log.initial.task.delay.ms has passed (which Kafka applies to retention and flushes, not the cleaner)."""
    topic = _name("fresh")
    create_topic(broker.bootstrap_servers, topic, config={**COMPACTED, "max.compaction.lag.ms": "100"})
    items = [(b"key-%02d" % (i % 5), b"value-%04d" % i) for i in range(200)]
    produce_keyed(broker.bootstrap_servers, topic, items)
    roll_with_sentinel(broker.bootstrap_servers, topic)
    assert len(read_to_end(broker.bootstrap_servers, topic)) == len(items) + 1

    broker.advance_clock(CLEANER_BACKOFF_MS)
    rows = wait_for(lambda: _compacted(read_to_end(broker.bootstrap_servers, topic), 5), "the cleaned topic")
    assert {key: value for _offset, key, value in rows[:-1]} == expected_last(items)


def test_transactions_on_a_compacted_topic(broker: Broker) -> None:
    bootstrap = broker.bootstrap_servers
    topic = _name("compacted-txn")
    create_topic(bootstrap, topic, config=COMPACTED)
    producer = transactional_producer(bootstrap, _name("txn"))
    committed: list[tuple[bytes, bytes | None]] = []
    for round_ in range(6):
        producer.begin_transaction()
        batch = [(b"k%d" % i, b"committed-%d-%d" % (round_, i)) for i in range(5)]
        for key, value in batch:
            producer.produce(topic, key=key, value=value)
        producer.commit_transaction(15)
        committed += batch
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, key=b"k%d" % i, value=b"aborted-%d" % round_)
        producer.flush(15)
        producer.abort_transaction(15)
    roll_with_sentinel(bootstrap, topic)
    assert any(b"aborted" in (value or b"") for _o, _k, value in read_to_end(bootstrap, topic))

    broker.advance_clock(CLEANER_DUE_MS)

    def cleaned() -> list[Row] | None:
        rows = read_to_end(bootstrap, topic)
        return rows if len(rows) == 6 else None  # five keys and the sentinel

    rows = wait_for(cleaned, "aborted data removed and the topic compacted")
    last = expected_last(committed)
    assert {key: value for _offset, key, value in rows[:-1]} == last
    assert not any(b"aborted" in (value or b"") for _o, _k, value in rows)
    committed_view = read_to_end(bootstrap, topic, "read_committed")
    assert committed_view == rows
    producer.begin_transaction()  # the producer's state survived compaction: it goes on
    producer.produce(topic, key=b"k0", value=b"after")
    producer.commit_transaction(15)
    assert read_to_end(bootstrap, topic, "read_committed")[-1][1:] == (b"k0", b"after")


def test_records_without_key_get_invalid_record_in_the_delivery_report(broker: Broker) -> None:
    topic = _name("compacted-nokey")
    create_topic(broker.bootstrap_servers, topic, config=COMPACTED)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 200, "retries": 0})
    reports: dict[bytes, KafkaError | None] = {}
    sent = ((b"first", b"k1"), (b"keyless-1", None), (b"third", b"k2"), (b"keyless-2", None))
    for value, key in sent:
        producer.produce(topic, key=key, value=value,
                         on_delivery=lambda err, msg: reports.__setitem__(msg.value(), err))
    assert producer.flush(15) == 0
    codes = {value: error.code() if error is not None else None for value, error in reports.items()}
    # KIP-467: the batch is refused as a whole; the record errors name the keyless records, and
    # librdkafka tells the others apart (it does so when a batch has more than one record error).
    assert codes == {b"keyless-1": KafkaError.INVALID_RECORD, b"keyless-2": KafkaError.INVALID_RECORD,
                     b"first": KafkaError._INVALID_DIFFERENT_RECORD, b"third": KafkaError._INVALID_DIFFERENT_RECORD}
    produce_keyed(broker.bootstrap_servers, topic, [(b"k1", b"ok")])
    assert read_to_end(broker.bootstrap_servers, topic) == [(0, b"k1", b"ok")]


@pytest.mark.parametrize("point", ["after_cleaned", "after_swap", "after_delete"])
def test_kill_9_in_the_middle_of_a_cleaning_leaves_the_data_readable(point: str) -> None:
    with Broker({**MANUAL, "minikafka.cleaner.crash.point": point}, mode="process") as broker:
        topic = _name("compacted-crash")
        create_topic(broker.bootstrap_servers, topic, config=COMPACTED)
        items = [(b"key-%02d" % (i % 15), b"value-%04d" % i) for i in range(800)]
        produce_keyed(broker.bootstrap_servers, topic, items)
        roll_with_sentinel(broker.bootstrap_servers, topic)
        before = read_to_end(broker.bootstrap_servers, topic)
        with contextlib.suppress(Exception):  # the process may die before it answers
            broker.advance_clock(CLEANER_DUE_MS)
        assert broker.wait_exited(timeout=30) == -9
        assert "cleaner crash point reached" in broker.logs()

        del broker.config["minikafka.cleaner.crash.point"]
        # First what recovery alone leaves: the cleaner's pass at start would write temporary files of its own.
        broker.config["log.cleaner.enable"] = "false"
        broker.start()
        after = read_to_end(broker.bootstrap_servers, topic)
        # Readable, each key's last value there, nothing written was lost or moved.
        assert {k: v for _o, k, v in after[:-1]} == expected_last(items)
        original = {(key, value): offset for offset, key, value in before}
        assert all(original[(key, value)] == offset for offset, key, value in after)
        assert after[-1] == before[-1]
        data_dir = broker.data_dir
        assert not [p for p in data_dir.rglob("*") if p.name.endswith((".cleaned", ".swap"))]
        # And the cleaning finishes after a restart with the cleaner on.
        del broker.config["log.cleaner.enable"]
        broker.restart()
        broker.advance_clock(CLEANER_DUE_MS)
        rows = wait_for(lambda: _compacted(read_to_end(broker.bootstrap_servers, topic), 15), "the cleaned topic")
        assert {k: v for _o, k, v in rows[:-1]} == expected_last(items)


def test_consumer_offsets_are_compacted_on_a_running_broker() -> None:
    config = {**MANUAL, "log.segment.bytes": "2048", "log.cleaner.min.cleanable.ratio": "0.01",
              "offsets.topic.num.partitions": "1"}
    with Broker(config) as broker:
        bootstrap = broker.bootstrap_servers
        topic = _name("source")
        create_topic(bootstrap, topic)
        produce_keyed(bootstrap, topic, [(b"k", b"v%d" % i) for i in range(5)])
        group = _name("group")
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            for offset in range(1, 201):
                consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
        finally:
            consumer.close()
        before = read_to_end(bootstrap, "__consumer_offsets")
        assert len(before) >= 200
        broker.advance_clock(CLEANER_DUE_MS)
        rows = wait_for(lambda: (lambda r: r if len(r) < 50 else None)(read_to_end(bootstrap, "__consumer_offsets")),
                        "__consumer_offsets compacted")
        assert len(rows) < len(before)
        broker.restart()
        checker = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        try:
            committed = checker.committed([TopicPartition(topic, 0)], timeout=15)
        finally:
            checker.close()
        assert committed[0].offset == 200


def test_produce_response_carries_kip_467_record_errors(broker: Broker) -> None:
    """What librdkafka reads its per-message errors from: Produce v8+ record_errors and error_message."""
    topic = _name("compacted-wire")
    create_topic(broker.bootstrap_servers, topic, config=COMPACTED)
    now = int(time.time() * 1000)
    batch = build_batch([Record(b"k", b"1", (), now), Record(None, b"2", (), now), Record(None, b"3", (), now)])
    wire = Wire(broker)
    try:
        answer = produce_raw(wire, 1, topic, batch)
    finally:
        wire.close()
    message = f"Compacted topic cannot accept message without key in topic partition {topic}-0"
    assert answer.error_code == ErrorCode.invalid_record  # type: ignore[attr-defined]
    assert [(e.batch_index, e.batch_index_error_message) for e in answer.record_errors] == [  # type: ignore[attr-defined]
        (1, message), (2, message)]
    assert answer.error_message == (  # type: ignore[attr-defined]
        "One or more records have been rejected due to 2 record errors in total, and only showing the first "
        f"three errors at most: [RecordError(batchIndex=1, message='{message}'), "
        f"RecordError(batchIndex=2, message='{message}')]")


def test_transaction_state_is_compacted_on_a_running_broker() -> None:
    config = {**MANUAL, "log.segment.bytes": "2048", "log.cleaner.min.cleanable.ratio": "0.01",
              "transaction.state.log.num.partitions": "1"}
    with Broker(config) as broker:
        bootstrap = broker.bootstrap_servers
        topic = _name("txn-source")
        create_topic(bootstrap, topic)
        transactional_id = _name("txn-id")
        producer = transactional_producer(bootstrap, transactional_id)
        for i in range(40):
            producer.begin_transaction()
            producer.produce(topic, key=b"k", value=b"%d" % i)
            producer.commit_transaction(15)
        before = read_to_end(bootstrap, "__transaction_state")
        assert len(before) >= 120  # Ongoing, PrepareCommit and CompleteCommit per transaction
        broker.advance_clock(CLEANER_DUE_MS)
        rows = wait_for(lambda: (lambda r: r if len(r) < 40 else None)(read_to_end(bootstrap, "__transaction_state")),
                        "__transaction_state compacted")
        assert len({key for _o, key, _v in rows}) == 1, "one transactional id: one key"
        kept = decode_value(rows[-1][2])
        assert kept is not None
        broker.restart()
        # The coordinator replayed what was kept: the id is known and its producer goes on, fenced
        # by a new epoch as after any restart.
        again = transactional_producer(bootstrap, transactional_id)
        again.begin_transaction()
        again.produce(topic, key=b"k", value=b"after restart")
        again.commit_transaction(15)
        assert read_to_end(bootstrap, topic, "read_committed")[-1][1:] == (b"k", b"after restart")
        latest = decode_value(read_to_end(bootstrap, "__transaction_state")[-1][2])
        assert latest is not None
        assert (latest.producer_id, latest.producer_epoch) == (kept.producer_id, kept.producer_epoch + 1)


def test_tombstones_stay_for_delete_retention_ms_then_go(broker: Broker) -> None:
    bootstrap = broker.bootstrap_servers
    topic = _name("compacted-tombstones")
    create_topic(bootstrap, topic, config={**COMPACTED, "delete.retention.ms": "60000"})
    items: list[tuple[bytes, bytes | None]] = [(b"key-%02d" % (i % 10), b"value-%04d" % i) for i in range(400)]
    items += [(b"key-01", None), (b"key-02", None)]
    produce_keyed(bootstrap, topic, items)
    roll_with_sentinel(bootstrap, topic)
    broker.advance_clock(CLEANER_DUE_MS)
    rows = wait_for(lambda: _compacted(read_to_end(bootstrap, topic), 10), "the first cleaning")
    assert {key: value for _o, key, value in rows[:-1]}[b"key-01"] is None, "a tombstone stays at first"

    broker.advance_clock(60_001)  # past delete.retention.ms
    produce_keyed(bootstrap, topic, [(b"key-05", b"newer-%d" % i) for i in range(100)])  # dirty again
    roll_with_sentinel(bootstrap, topic)
    broker.advance_clock(15_000)  # log.cleaner.backoff.ms

    def tombstones_gone() -> list[Row] | None:
        read = read_to_end(bootstrap, topic)
        keys = [key for _o, key, _v in read]
        return read if b"key-01" not in keys and b"key-02" not in keys else None

    rows = wait_for(tombstones_gone, "the tombstones removed")
    last = expected_last([*items, (b"key-05", b"newer-99")])
    # The first sentinel stays until the second, in the active segment, is cleaned too.
    assert {key: value for _o, key, value in rows if key != b"sentinel"} == {
        k: v for k, v in last.items() if v is not None}
