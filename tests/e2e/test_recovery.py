"""Crash safety: kill -9 mid-stream loses no acknowledged message; a clean stop is clean."""

from __future__ import annotations

import threading

from confluent_kafka import Producer

from tests.conftest import BrokerProcess, poll_until, unique_topic

from .helpers import consume, create_topic

TOTAL = 200_000
KILL_AFTER_ACKS = 5_000


def test_kill_9_keeps_every_acknowledged_message(broker: BrokerProcess) -> None:
    topic = unique_topic("crash")
    create_topic(broker.bootstrap, topic)
    acknowledged: list[int] = []
    lock = threading.Lock()

    def report(err: object, msg: object) -> None:
        if err is None:
            with lock:
                acknowledged.append(int(msg.value()))  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": False,
                         "linger.ms": 2, "batch.num.messages": 50, "message.timeout.ms": 5000,
                         "max.in.flight.requests.per.connection": 1, "retries": 0})
    killer = threading.Thread(target=lambda: (
        poll_until(lambda: len(acknowledged) >= KILL_AFTER_ACKS, timeout=30, message="acks before the kill"),
        broker.kill9()))
    killer.start()
    for number in range(TOTAL):
        if not killer.is_alive():
            break
        while True:
            try:
                producer.produce(topic, value=str(number).encode(), on_delivery=report)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    for _ in range(600):  # delivery reports arrive only while polling
        if not killer.is_alive():
            break
        producer.poll(0.1)
    producer.flush(15)
    assert not killer.is_alive()
    acked = sorted(acknowledged)
    assert len(acked) >= KILL_AFTER_ACKS

    broker.start()  # same port and data dir, unclean: recovery runs
    assert "recovered logs after unclean shutdown" in broker.log_path.read_text()
    stored = consume(broker.bootstrap, topic, acked[-1] + 1, timeout=30)
    offsets = [r.offset for r in stored]
    values = [int(r.value) for r in stored]  # type: ignore[arg-type]
    assert offsets == list(range(len(offsets))), "offsets are contiguous from 0"
    assert values == sorted(values), "order is preserved"
    assert set(acked) <= set(values), "every acknowledged message survived"


def test_clean_stop_exits_zero_and_marks_the_log_dir(broker: BrokerProcess) -> None:
    topic = unique_topic("clean")
    create_topic(broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, value=b"kept")
    assert producer.flush(10) == 0
    assert broker.stop() == 0
    assert (broker.data_dir / ".kafka_cleanshutdown").exists()
    assert (broker.data_dir / "recovery-point-offset-checkpoint").read_text().splitlines()[:2] == ["0", "1"]
    broker.start()
    assert not (broker.data_dir / ".kafka_cleanshutdown").exists()
    assert consume(broker.bootstrap, topic, 1)[0].value == b"kept"
