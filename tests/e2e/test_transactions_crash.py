"""kill -9 at random points of a consume-transform-produce loop: exactly once survives.

A confluent-kafka pipeline copies numbered records from an input topic to an output topic, one
transaction per batch with the consumed offsets sent to the transaction. The broker is killed with
SIGKILL at random moments a bounded number of times and restarted on the same port and data. After
the loop, a read_committed consumer must see every input number exactly once in the output.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from minikafka.testing import Broker

from tests.support.clients import consume, create_topic
from tests.support.names import unique_topic

INPUT_RECORDS = 3000
KILLS = 3
DEADLINE_S = 240


def fill_input(broker: Broker, topic: str) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True})
    for number in range(INPUT_RECORDS):
        producer.produce(topic, str(number).encode(), partition=0)
    assert producer.flush(30) == 0


class Pipeline:
    """One instance of the transformer; rebuilt from scratch after any failure, as an app would."""

    def __init__(self, broker: Broker, source: str, sink: str, group: str, transactional_id: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                                  "enable.auto.commit": False, "isolation.level": "read_committed",
                                  "auto.offset.reset": "earliest", "socket.timeout.ms": 5000})
        self.consumer.assign([TopicPartition(source, 0, self._committed(source))])
        # metadata.recovery.strategy=none: when the only broker goes away, librdkafka >= 2.10 re-bootstraps
        # and decommissions it; a group coordinator cached on that decommissioned handle then makes the next
        # send_offsets_to_transaction hang past its timeout (librdkafka issues #5511 and #5456, open).
        self.producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": transactional_id,
                                  "transaction.timeout.ms": 10000, "socket.timeout.ms": 5000,
                                  "message.timeout.ms": 9000, "metadata.recovery.strategy": "none"})
        self.producer.init_transactions(20)
        self.sink = sink

    def _committed(self, source: str) -> int:
        offset = self.consumer.committed([TopicPartition(source, 0)], timeout=15)[0].offset
        return offset if offset >= 0 else 0

    def step(self) -> int:
        """One transaction; returns the next input offset (or -1 when nothing was read)."""
        messages = [m for m in self.consumer.consume(40, 0.5) if m.error() is None]
        if not messages:
            return -1
        self.producer.begin_transaction()
        for message in messages:
            self.producer.produce(self.sink, message.value())
        next_offset = messages[-1].offset() + 1
        self.producer.send_offsets_to_transaction([TopicPartition(messages[-1].topic(), 0, next_offset)],
                                                  self.consumer.consumer_group_metadata(), 20)
        self.producer.commit_transaction(20)
        return next_offset

    def close(self) -> None:
        for closing in (self.consumer.close, lambda: self.producer.flush(1)):
            with contextlib.suppress(Exception):
                closing()


def test_exactly_once_across_kill_9(broker: Broker) -> None:
    source, sink = unique_topic("eos-in"), unique_topic("eos-out")
    group, transactional_id = unique_topic("eos-group"), unique_topic("eos-tid")
    create_topic(broker.bootstrap_servers, source)
    create_topic(broker.bootstrap_servers, sink)
    fill_input(broker, source)

    rng = random.Random(20261122)
    # Kill when the pipeline passes random input positions, after a random few milliseconds, so the
    # crash lands at a different phase of a transaction each time (produce, offsets, end, markers).
    kill_points = sorted(rng.sample(range(300, INPUT_RECORDS - 300), KILLS))
    kills_done = 0
    progress = [0]
    stop = threading.Event()

    def killer() -> None:
        nonlocal kills_done
        for point in kill_points:
            while progress[0] < point:
                if stop.wait(0.005):
                    return
            time.sleep(rng.uniform(0, 0.03))  # a random phase, not a wait for state
            broker.kill()
            broker.start()
            kills_done += 1

    killing = threading.Thread(target=killer)
    killing.start()
    position = 0
    started = time.monotonic()
    deadline = started + DEADLINE_S
    pipeline: Pipeline | None = None
    failures: list[str] = []  # each rebuild's cause, for the failure message
    try:
        while position < INPUT_RECORDS and time.monotonic() < deadline:
            try:
                if pipeline is None:
                    pipeline = Pipeline(broker, source, sink, group, transactional_id)
                advanced = pipeline.step()
                if advanced >= 0:
                    position = progress[0] = advanced
            except KafkaException as exc:
                failures.append(f"{time.monotonic() - started:.1f}s at {position}: {exc}")
                if pipeline is not None:
                    pipeline.close()
                pipeline = None  # a new instance fences the old one and resumes from committed offsets
    finally:
        stop.set()
        killing.join(60)
        if pipeline is not None:
            pipeline.close()
    # A failure says where the pipeline was and why it was rebuilt: seen once (at -n 4), one kill of three
    # with no cause found.
    situation = (f"pipeline at {position} of {INPUT_RECORDS} after {time.monotonic() - started:.1f}s, "
                 f"killer alive: {killing.is_alive()}, rebuilds: {failures}")
    assert kills_done == KILLS, f"the broker was killed {kills_done} of {KILLS} times; {situation}"
    assert position == INPUT_RECORDS, f"pipeline stopped at {position} before its deadline; {situation}"

    output = consume(broker.bootstrap_servers, sink, INPUT_RECORDS + 1, isolation="read_committed", timeout=10)
    numbers = sorted(int(r.value) for r in output)  # type: ignore[arg-type]
    assert numbers == list(range(INPUT_RECORDS)), (
        f"{len(numbers)} records, {len(set(numbers))} distinct: every input exactly once")
