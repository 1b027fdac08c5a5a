"""Crash safety: kill -9 mid-stream loses no acknowledged message; torn tails and lost indexes are
recovered; a clean stop is clean."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from minikafka.testing import Broker

from tests.support.clients import Received, consume, create_topic
from tests.support.names import unique_topic
from tests.support.produce import produce
from tests.support.waiting import poll_until

TOTAL = 200_000
KILL_AFTER_ACKS = 5_000


def produce_until_killed(broker: Broker, topic: str, partitions: int, kill_after: int,
                         **config: object) -> dict[int, list[int]]:
    """Send numbered values round-robin over the partitions with acks=all until a timer thread
    kill -9s the broker once every partition has its share of `kill_after` acknowledgements; returns the
    acknowledged numbers per partition."""
    acknowledged: dict[int, list[int]] = {p: [] for p in range(partitions)}
    count = [0]
    lock = threading.Lock()

    def report(err: object, msg: object) -> None:
        if err is None:
            with lock:
                acknowledged[msg.partition()].append(int(msg.value()))  # type: ignore[attr-defined]
                count[0] += 1

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all", "enable.idempotence": False,
                         "linger.ms": 2, "batch.num.messages": 50, "message.timeout.ms": 5000,
                         "max.in.flight.requests.per.connection": 1, "retries": 0, **config})
    killer = threading.Thread(target=lambda: (
        # Per partition: under load librdkafka can deliver to some partitions long before others, and a
        # kill before a partition holds anything would test nothing there.
        poll_until(lambda: all(len(numbers) >= kill_after // partitions for numbers in acknowledged.values()),
                   timeout=60, message="acks on every partition before the kill"),
        broker.kill()))
    killer.start()
    for number in range(TOTAL):
        if not killer.is_alive():
            break
        while True:
            try:
                producer.produce(topic, value=str(number).encode(), partition=number % partitions,
                                 on_delivery=report)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    killer.join(60)
    assert not killer.is_alive()
    producer.flush(15)  # every remaining message fails (broker gone) or was already reported
    assert producer.flush(15) == 0
    assert count[0] >= kill_after
    return acknowledged


def assert_intact(stored: list[Received], acknowledged: list[int]) -> None:
    offsets = [r.offset for r in stored]
    values = [int(r.value) for r in stored]  # type: ignore[arg-type]
    assert offsets == list(range(len(offsets))), "offsets are contiguous from 0"
    assert all(a < b for a, b in itertools.pairwise(values)), "send order is kept, no duplicates"
    missing = sorted(set(acknowledged) - set(values))
    assert not missing, f"{len(missing)} acknowledged messages lost, first {missing[:10]}"


def watermarks(broker: Broker, topic: str, partition: int = 0) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "wm"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        consumer.close()


def produce_values(broker: Broker, topic: str, values: list[bytes], *, one_per_batch: bool = False,
                   timestamps: list[int] | None = None) -> None:
    """Acknowledged by every replica (acks=all), no idempotence: what the broker wrote is all there is."""
    errors = produce(broker.bootstrap_servers, topic, values, timestamps=timestamps, flush_each=one_per_batch,
                     timeout=20, **{"enable.idempotence": False, "acks": "all"})
    assert not errors, errors


def test_kill_9_keeps_every_acknowledged_message(broker: Broker) -> None:
    topic = unique_topic("crash")
    create_topic(broker.bootstrap_servers, topic)
    acked = produce_until_killed(broker, topic, 1, KILL_AFTER_ACKS)[0]

    broker.start()  # same port and data dir, unclean: recovery runs
    assert "recovered logs after unclean shutdown" in broker.run_log()
    # Batches written but not yet acknowledged at the kill survive too (as in Kafka), so the log may
    # hold more than the acknowledged prefix: read all of it, up to the high watermark.
    low, high = watermarks(broker, topic)
    assert low == 0 and high > max(acked)
    stored = consume(broker.bootstrap_servers, topic, high, timeout=30)
    assert len(stored) == high
    assert_intact(stored, acked)
    produce_values(broker, topic, [b"999999999"])
    assert consume(broker.bootstrap_servers, topic, 1,
                   offset=high)[0].value == b"999999999", "appends continue at the end"


def test_kill_9_with_small_segments_compression_and_partitions(broker_factory) -> None:
    broker = broker_factory(**{"log.segment.bytes": "1024"})
    topic = unique_topic("crashseg")
    create_topic(broker.bootstrap_servers, topic, 3)
    acked = produce_until_killed(broker, topic, 3, 6_000, **{"compression.type": "lz4"})
    assert len(list((broker.data_dir / f"{topic}-0").glob("*.log"))) > 1, "the crash happened over rolled segments"

    broker.start()
    for partition in range(3):
        stored = consume(broker.bootstrap_servers, topic, max(acked[partition]) // 3 + 1, partitions=(partition,),
                         timeout=30)
        assert all(int(r.value) % 3 == partition for r in stored)  # type: ignore[arg-type]
        assert_intact(stored, acked[partition])


def _active_segment(broker: Broker, topic: str) -> Path:
    return max((broker.data_dir / f"{topic}-0").glob("*.log"))


def test_torn_tail_is_truncated_on_recovery(broker: Broker) -> None:
    topic = unique_topic("torn")
    create_topic(broker.bootstrap_servers, topic)
    values = [f"torn-{i}".encode() for i in range(100)]
    produce_values(broker, topic, values, one_per_batch=True)
    broker.kill()
    segment = _active_segment(broker, topic)
    intact_size = segment.stat().st_size
    with open(segment, "ab") as log_file:
        # the start of a batch header (base offset 100, length 500) and then nothing: a torn write
        log_file.write((100).to_bytes(8, "big") + (500).to_bytes(4, "big") + b"\x00\x00\x00\x00\x02\xde\xad")
    broker.start()
    assert segment.stat().st_size == intact_size, "the torn tail was cut off"
    assert watermarks(broker, topic) == (0, 100)
    assert [r.value for r in consume(broker.bootstrap_servers, topic, 100)] == values
    produce_values(broker, topic, [b"after"])
    assert [(r.offset, r.value) for r in consume(broker.bootstrap_servers, topic, 1, offset=100)] == [(100, b"after")]


def test_corrupt_last_batch_is_dropped_on_recovery(broker: Broker) -> None:
    topic = unique_topic("corrupt")
    create_topic(broker.bootstrap_servers, topic)
    produce_values(broker, topic, [f"c-{i}".encode() for i in range(10)], one_per_batch=True)
    broker.kill()
    segment = _active_segment(broker, topic)
    data = bytearray(segment.read_bytes())
    data[-1] ^= 0xFF  # inside the last record of the last batch: its CRC no longer matches
    segment.write_bytes(bytes(data))
    broker.start()
    stored = consume(broker.bootstrap_servers, topic, 9)
    assert [(r.offset, r.value) for r in stored] == [(i, f"c-{i}".encode()) for i in range(9)]
    assert watermarks(broker, topic) == (0, 9), "only the corrupt batch (offset 9, sent alone) is gone"


def test_lost_indexes_are_rebuilt(broker_factory) -> None:
    broker = broker_factory(**{"log.segment.bytes": "4096", "log.index.interval.bytes": "256"})
    topic = unique_topic("reindex")
    create_topic(broker.bootstrap_servers, topic)
    base = 1_700_000_000_000
    produce_values(broker, topic, [f"{i:04d}".encode() * 10 for i in range(400)], one_per_batch=True,
                   timestamps=[base + i for i in range(400)])
    assert broker.stop() == 0
    partition_dir = broker.data_dir / f"{topic}-0"
    assert len(list(partition_dir.glob("*.log"))) > 5
    removed = list(partition_dir.glob("*.index")) + list(partition_dir.glob("*.timeindex"))
    assert len(removed) > 5
    for path in removed:
        path.unlink()
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    tp = TopicPartition(topic, 0)
    found = admin.list_offsets({tp: OffsetSpec.for_timestamp(base + 321)})[tp].result(10)
    assert (found.offset, found.timestamp) == (321, base + 321)
    newest = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(10)
    assert (newest.offset, newest.timestamp) == (399, base + 399)
    stored = consume(broker.bootstrap_servers, topic, 150, offset=250)
    assert [(r.offset, r.value) for r in stored] == [(i, f"{i:04d}".encode() * 10) for i in range(250, 400)]


def test_clean_stop_exits_zero_and_marks_the_log_dir(broker: Broker) -> None:
    topic = unique_topic("clean")
    create_topic(broker.bootstrap_servers, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce(topic, value=b"kept")
    assert producer.flush(10) == 0
    assert broker.stop() == 0
    assert (broker.data_dir / ".kafka_cleanshutdown").exists()
    assert (broker.data_dir / "recovery-point-offset-checkpoint").read_text().splitlines()[:2] == ["0", "1"]
    broker.start()
    assert "recovered logs after unclean shutdown" not in broker.run_log()
    assert not (broker.data_dir / ".kafka_cleanshutdown").exists()
    assert consume(broker.bootstrap_servers, topic, 1)[0].value == b"kept"


def test_kill_9_leaves_no_clean_shutdown_marker(broker: Broker) -> None:
    topic = unique_topic("unclean")
    create_topic(broker.bootstrap_servers, topic)
    produce_values(broker, topic, [b"a", b"b"])
    broker.kill()
    assert not (broker.data_dir / ".kafka_cleanshutdown").exists()
    broker.start()
    assert "recovered logs after unclean shutdown" in broker.run_log()
    assert [r.value for r in consume(broker.bootstrap_servers, topic, 2)] == [b"a", b"b"]
