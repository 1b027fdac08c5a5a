"""The cost of a broker reset (Broker.reset(), POST /reset) on a broker with 100 topics.

    .venv/bin/python bench/reset_cost.py [--topics 100] [--rounds 10] [--modes inprocess,process]

Each round fills the broker as a suite's tests would leave it: `--topics` one-partition topics with a
message each, a consumer group's committed offset (so `__consumer_offsets`, 50 partitions, exists) and a
committed transaction (`__transaction_state`, 50 partitions): 200 partitions in all with the default
settings. Then the reset is timed: `took_ms`, the broker's own time from the start of the reset to its
end (what the 10 ms target is about), and the caller's wall time around `Broker.reset()` (in process mode an
HTTP request to the admin listener). Medians and maxima are printed; figures are never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from minikafka.testing import Broker

DEADLINE_S = 60.0


def fill(broker: Broker, topics: int) -> int:
    """Leave `topics` topics, a group and a transactional id behind; returns the partition count."""
    bootstrap = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [f"t-{number}" for number in range(topics)]
    for future in admin.create_topics([NewTopic(name, 1, 1) for name in names]).values():
        future.result(DEADLINE_S)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "filler"})
    producer.init_transactions(DEADLINE_S)
    producer.begin_transaction()
    for name in names:
        producer.produce(name, b"v")
    producer.commit_transaction(DEADLINE_S)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "filler", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([names[0]])
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                break
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return sum(len(topic.partitions) for topic in admin.list_topics(timeout=DEADLINE_S).topics.values())


def measure(mode: str, topics: int, rounds: int) -> None:
    took: list[float] = []
    wall: list[float] = []
    partitions = 0
    with Broker(mode=mode) as broker:  # type: ignore[arg-type]  # any mode Broker takes
        for _round in range(rounds):
            partitions = fill(broker, topics)
            started = time.perf_counter()
            report = broker.reset()
            wall.append((time.perf_counter() - started) * 1000)
            took.append(float(report["took_ms"]))
            assert report["removed"]["topics"] == topics + 2, report
    print(f"{mode:<10} {topics} topics, {partitions} partitions, {rounds} rounds: reset took_ms median "
          f"{statistics.median(took):.2f} (max {max(took):.2f}); caller's wall median {statistics.median(wall):.2f} ms "
          f"(max {max(wall):.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--modes", default="inprocess,process")
    args = parser.parse_args()
    for mode in args.modes.split(","):
        measure(mode.strip(), args.topics, args.rounds)


if __name__ == "__main__":
    main()
