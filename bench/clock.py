"""Wall time to reach a 60 s transaction timeout on the manual clock: advance, then the LSO past the abort.

    python bench/clock.py [--rounds N]

For each mode of minikafka.testing.Broker (in-process, subprocess over the admin API), a confluent-kafka
producer with transaction.timeout.ms=60000 leaves a transaction of 3 records open; the clock is advanced
70 s and the time is taken until the partition's last stable offset is past the ABORT marker
(`wait_until_lso`). Median and max over the rounds; then how long single advances of a day, a week and a
year take (every periodic check and idle connection they pass). Printed, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

from confluent_kafka import Producer
from minikafka.testing import Broker
from minikafka.testing.broker import MODES


def one_round(broker: Broker) -> float:
    topic, transactional_id = f"bench-{uuid.uuid4().hex[:8]}", f"tid-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": transactional_id,
                         "transaction.timeout.ms": 60_000, "linger.ms": 0})
    producer.init_transactions(15)
    producer.begin_transaction()
    for value in (b"a", b"b", b"c"):
        producer.produce(topic, value, partition=0)
    if producer.flush(15):
        raise RuntimeError("records not delivered")
    started = time.perf_counter()
    broker.advance_clock(70_000)
    broker.wait_until_lso(topic, 0, 4, timeout=30)
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    for mode in MODES:
        with Broker({"minikafka.clock": "manual"}, mode=mode) as broker:
            times = [one_round(broker) for _ in range(args.rounds)]
            print(f"{mode:10s} advance 70 s -> transaction aborted, LSO past the marker: "
                  f"median {statistics.median(times):.1f} ms, max {max(times):.1f} ms ({args.rounds} rounds)")
            for label, ms in (("a day", 86_400_000), ("a week", 604_800_000), ("a year", 31_536_000_000)):
                started = time.perf_counter()
                broker.advance_clock(ms)
                print(f"{mode:10s} advance {label}: {(time.perf_counter() - started) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
