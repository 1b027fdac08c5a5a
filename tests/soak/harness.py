"""Crash soak: kill -9 the broker under real-client load, restart it on the same data, check every cycle.

Run with `make soak CYCLES=200 SEED=1` or `.venv/bin/python -m tests.soak.harness --cycles N --seed S`.
Each cycle starts four confluent-kafka workers against one broker subprocess (tests/support/broker_process.py's
BrokerProcess, same port and data dir for the whole run):

- plain: acks=all, not idempotent, numbered values round-robin over the partitions of `soak-plain`;
- idempotent: acks=all, enable.idempotence, values over `soak-idem` and the pipeline's input `soak-eos-in`;
- transactional: transactions of random size over `soak-txn`, a seeded quarter of them aborted on purpose;
- pipeline: tests/e2e/test_transactions_crash.py's consume-transform-produce Pipeline (read_committed
  consumer of `soak-eos-in`, transactional producer to `soak-eos-out`, send_offsets_to_transaction).
  Its transform is the identity; input values are unique, so each output names the one input it came from.

Once every worker has made progress, the broker is killed with SIGKILL after a seeded random delay and
restarted on the same port and data (in a seeded quarter of the cycles killed once more while it starts,
mostly in the middle of recovering from the first kill); once every worker has made progress again
after the restart, the workers stop, both transactional ids are
fenced (init_transactions resolves whatever a dead instance left open), and the whole log is read back
with real consumers and checked against what the clients were told:

- lost / moved: every delivery report ever acknowledged is at its offset with its value;
- offset_reused: no offset is acknowledged twice for different values;
- duplicate: no value written by an idempotent or transactional producer is in the log twice;
- aborted_visible / committed_lost / partial_transaction: read_committed shows every committed
  transaction whole, no aborted one, and a transaction of unknown outcome whole or not at all;
- eos_*: the committed output holds each input record below the group's committed offset exactly once
  and nothing beyond it, and the committed offset never goes back;
- restart_failed, kill_not_seen (no unclean recovery logged), stall_*, worker_crash, producer_fatal,
  settle_failed, read_incomplete, open_transaction: the cycle could not be checked as it should.

The seed fixes every random choice (kill delays, second kills, batch and transaction sizes, which
transactions abort);
thread scheduling and the exact instruction the kill lands on are not reproducible. A clean run exits 0
and removes its data; a violation stops the run (unless --keep-going), keeps the data dir and broker logs,
prints the seed and cycle, and exits 1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import structlog
from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from tests.e2e.test_transactions_crash import Pipeline
from tests.support.broker_process import BrokerProcess
from tests.support.clients import create_topic

log = structlog.get_logger("soak")

PLAIN_TOPIC, IDEMPOTENT_TOPIC, TXN_TOPIC = "soak-plain", "soak-idem", "soak-txn"
EOS_INPUT, EOS_OUTPUT, EOS_GROUP = "soak-eos-in", "soak-eos-out", "soak-eos-group"
TXN_ID, EOS_TXN_ID = "soak-txn-producer", "soak-eos-pipeline"
PARTITIONS = {PLAIN_TOPIC: 3, IDEMPOTENT_TOPIC: 3, TXN_TOPIC: 2, EOS_INPUT: 1, EOS_OUTPUT: 1}
# Values in these topics come from producers with idempotence on, so each may be in the log only once.
# The pipeline's output is not among them: an aborted attempt and its retry legitimately both stay in it.
NO_DUPLICATE_TOPICS = (IDEMPOTENT_TOPIC, EOS_INPUT, TXN_TOPIC)
# Small segments so that kills land around segment rolls and recovery crosses several segments.
BROKER_OVERRIDES = {"log.segment.bytes": "262144"}

PROGRESS_DEADLINE_S = 60.0
HEALTH_DEADLINE_S = 10.0
STOP_DEADLINE_S = 90.0
READ_DEADLINE_S = 60.0
CLIENT_TIMEOUT_S = 30.0
END_TXN_ATTEMPTS = 4
ABORT_SHARE = 0.25
PRODUCE_PAUSE_S = 0.05
RETRY_PAUSE_S = 0.2
# A seeded share of cycles kill the restarted broker again this long into its start, which takes about
# 0.6 s here (most of it imports): aimed at the recovery of the first crash and the moments after ready.
SECOND_KILL_SHARE = 0.25
SECOND_KILL_WINDOW_S = (0.25, 0.75)
UNCLEAN_RECOVERY = "recovered logs after unclean shutdown"

CLIENT_CONFIG: dict[str, object] = {
    "acks": "all",
    "linger.ms": 5,
    # Longer than a restart, so in-flight batches are retried into the restarted broker (where a
    # broker that forgot producer state would write duplicates) rather than failed.
    "message.timeout.ms": 30000,
    "socket.timeout.ms": 5000,
    "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 500,
    # librdkafka >= 2.10 re-bootstraps when its only broker vanishes and can then hang on a cached
    # coordinator handle (librdkafka #5511, #5456); see tests/e2e/test_transactions_crash.py.
    "metadata.recovery.strategy": "none",
}


# ------------------------------------------------------------------------------------------- ledger


@dataclass
class Transaction:
    values: list[bytes]
    outcome: str = "unknown"  # "committed" or "aborted" once the client said so
    began: float = field(default_factory=time.monotonic)
    ended: float = float("inf")


@dataclass
class Ledger:
    """What the clients were told, for the whole run; the broker's log is checked against it."""

    acked: dict[tuple[str, int], dict[int, bytes]] = field(default_factory=lambda: defaultdict(dict))
    transactions: dict[str, Transaction] = field(default_factory=dict)
    acked_by_role: Counter[str] = field(default_factory=Counter)
    reused: list[str] = field(default_factory=list)
    eos_committed_offset: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ack(self, role: str, message: Message) -> None:
        key = (message.topic(), message.partition())
        offset, value = message.offset(), message.value()
        assert isinstance(value, bytes)
        with self.lock:
            previous = self.acked[key].setdefault(offset, value)
            if previous != value:
                self.reused.append(f"{key[0]}-{key[1]}@{offset}: {previous!r} then {value!r}")
            self.acked_by_role[role] += 1

    @property
    def total_acked(self) -> int:
        return sum(len(offsets) for offsets in self.acked.values())


# ------------------------------------------------------------------------------------------ workers


class Worker(threading.Thread):
    """A client loop that runs until `stop`; `progress` counts acknowledged steps for the harness."""

    role = "worker"

    def __init__(self, broker: BrokerProcess, ledger: Ledger, cycle_rng: random.Random, stop: threading.Event,
                 cycle: int) -> None:
        super().__init__(name=f"soak-{self.role}", daemon=True)
        self.broker, self.ledger, self.stop, self.cycle = broker, ledger, stop, cycle
        self.rng = random.Random(cycle_rng.random())
        self.progress = 0
        self.restarts = 0  # client instances rebuilt after an error, as an application would
        self.failures: list[tuple[str, str]] = []

    def run(self) -> None:
        try:
            self.work()
        except Exception as exc:  # a harness or client defect: reported as a violation, never hidden
            log.exception("soak worker crashed", role=self.role)
            self.failures.append(("worker_crash", f"{self.role}: {exc!r}"))

    def work(self) -> None:
        raise NotImplementedError

    def config(self, **extra: object) -> dict[str, object]:
        return {"bootstrap.servers": self.broker.bootstrap, **CLIENT_CONFIG, "error_cb": self._on_error, **extra}

    def _on_error(self, error: KafkaError) -> None:
        if error.fatal():
            self.failures.append(("producer_fatal", f"{self.role}: {error}"))


class ProducerWorker(Worker):
    """Numbered values in small seeded bursts over `targets`; every delivery report goes to the ledger."""

    def __init__(self, *args: object, idempotent: bool, targets: list[tuple[str, int]]) -> None:
        self.role = "idempotent" if idempotent else "plain"
        super().__init__(*args)  # type: ignore[arg-type]
        self.idempotent, self.targets = idempotent, targets

    def work(self) -> None:
        producer = Producer(self.config(**{"enable.idempotence": self.idempotent}))
        sequence = 0
        while not self.stop.is_set() and not self.failures:
            for _ in range(self.rng.randint(1, 6)):
                topic, partition = self.targets[sequence % len(self.targets)]
                value = f"{self.role}:{self.cycle}:{sequence}".encode()
                try:
                    producer.produce(topic, value, partition=partition, on_delivery=self._report)
                    sequence += 1
                except BufferError:
                    break
            producer.poll(0)
            self.stop.wait(PRODUCE_PAUSE_S)  # paces the load, so the log read back each cycle stays small
        producer.flush(CLIENT_TIMEOUT_S)

    def _report(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.ledger.ack(self.role, message)
            self.progress += 1


class TransactionalWorker(Worker):
    role = "transactional"

    def work(self) -> None:
        producer: Producer | None = None
        number = 0
        while not self.stop.is_set():
            try:
                if producer is None:
                    # The same id every time: a new instance fences the last one and resolves its transaction.
                    producer = Producer(self.config(**{"transactional.id": TXN_ID, "transaction.timeout.ms": 60000}))
                    producer.init_transactions(CLIENT_TIMEOUT_S)
                size, abort = self.rng.randint(1, 12), self.rng.random() < ABORT_SHARE
                key = f"txn:{self.cycle}:{number}"
                number += 1
                transaction = Transaction([f"{key}:{i}".encode() for i in range(size)])
                self.ledger.transactions[key] = transaction
                producer.begin_transaction()
                for index, value in enumerate(transaction.values):
                    producer.produce(TXN_TOPIC, value, partition=index % PARTITIONS[TXN_TOPIC],
                                     on_delivery=self._report)
                    if index == len(transaction.values) // 2:
                        # Most of the time is spent inside the transaction, so most kills land in one.
                        self.stop.wait(PRODUCE_PAUSE_S)
                transaction.outcome = self._end(producer, commit=not abort)
                transaction.ended = time.monotonic()
                if transaction.outcome != "unknown":
                    self.progress += 1
                else:
                    producer = None
                    self.restarts += 1
            except KafkaException as exc:
                log.info("soak transaction failed", error=str(exc.args[0]), cycle=self.cycle)
                producer = None  # its transaction stays "unknown": all of it visible or none
                self.restarts += 1
                self.stop.wait(RETRY_PAUSE_S)
        if producer is not None:
            producer.flush(CLIENT_TIMEOUT_S)

    def _end(self, producer: Producer, *, commit: bool) -> str:
        """Commit or abort as librdkafka documents: retry what is retriable, abort what requires it."""
        for _attempt in range(END_TXN_ATTEMPTS):
            try:
                if commit:
                    producer.commit_transaction(CLIENT_TIMEOUT_S)
                    return "committed"
                producer.abort_transaction(CLIENT_TIMEOUT_S)
                return "aborted"
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if commit and error.txn_requires_abort():
                    commit = False
                elif not error.retriable():
                    raise
        return "unknown"

    def _report(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.ledger.ack(self.role, message)


class SoakPipeline(Pipeline):
    """test_transactions_crash's Pipeline (its step and close) with the soak's client settings: its own
    clients keep librdkafka's reconnect backoff of up to 10 s, which times out a transaction after most
    restarts and would double each cycle's length."""

    def __init__(self, broker: BrokerProcess) -> None:  # the parent's __init__, with CLIENT_CONFIG added
        common = {key: value for key, value in CLIENT_CONFIG.items() if key.startswith(("reconnect", "socket"))}
        self.consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": EOS_GROUP, **common,
                                  "enable.auto.commit": False, "isolation.level": "read_committed",
                                  "auto.offset.reset": "earliest"})
        self.consumer.assign([TopicPartition(EOS_INPUT, 0, self._committed(EOS_INPUT))])
        self.producer = Producer({"bootstrap.servers": broker.bootstrap, **CLIENT_CONFIG,
                                  "transactional.id": EOS_TXN_ID, "transaction.timeout.ms": 10000,
                                  "message.timeout.ms": 9000})
        self.producer.init_transactions(20)
        self.sink = EOS_OUTPUT


class PipelineWorker(Worker):
    """The consume-transform-produce loop of test_transactions_crash, rebuilt after any client error."""

    role = "pipeline"

    def work(self) -> None:
        pipeline: Pipeline | None = None
        try:
            while not self.stop.is_set():
                try:
                    if pipeline is None:
                        pipeline = SoakPipeline(self.broker)
                    if pipeline.step() >= 0:
                        self.progress += 1
                except KafkaException as exc:
                    log.info("soak pipeline restarts", error=str(exc.args[0]), cycle=self.cycle)
                    self.restarts += 1
                    if pipeline is not None:
                        pipeline.close()
                    pipeline = None
        finally:
            if pipeline is not None:
                pipeline.close()


# ------------------------------------------------------------------------------------------ reading


@dataclass
class LogView:
    """One topic read from offset 0 to its end: partition -> offset -> value."""

    records: dict[int, dict[int, bytes]]
    complete: bool
    behind: list[str]  # partitions whose read_committed end stayed below the high watermark

    def values(self) -> Counter[bytes]:
        return Counter(value for offsets in self.records.values() for value in offsets.values())


def read_topic(bootstrap: str, topic: str, isolation: str) -> LogView:
    partitions = range(PARTITIONS[topic])
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "soak-verifier", "enable.auto.commit": False,
                         "isolation.level": isolation, "enable.partition.eof": True, "fetch.wait.max.ms": 50})
    records: dict[int, dict[int, bytes]] = {p: {} for p in partitions}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        pending = set(partitions)
        deadline = time.monotonic() + READ_DEADLINE_S
        while pending and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=5000, timeout=0.2):
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(error)
                    pending.discard(message.partition())
                    continue
                value = message.value()
                assert isinstance(value, bytes)
                records[message.partition()][message.offset()] = value
        return LogView(records, complete=not pending, behind=stable_offset_lag(bootstrap, topic)
                       if isolation == "read_committed" else [])
    finally:
        consumer.close()


def stable_offset_lag(bootstrap: str, topic: str) -> list[str]:
    """Partitions whose last stable offset is below the high watermark: a transaction is still open."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = [TopicPartition(topic, p) for p in range(PARTITIONS[topic])]
    ends = {}
    for isolation in (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED):
        futures = admin.list_offsets({tp: OffsetSpec.latest() for tp in partitions}, isolation_level=isolation)
        ends[isolation] = {tp.partition: future.result(CLIENT_TIMEOUT_S).offset for tp, future in futures.items()}
    stable, high = ends[IsolationLevel.READ_COMMITTED], ends[IsolationLevel.READ_UNCOMMITTED]
    return [f"{topic}-{p}: last stable offset {stable[p]}, high watermark {high[p]}" for p in stable
            if stable[p] != high[p]]


def committed_offset(bootstrap: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": EOS_GROUP, "enable.auto.commit": False})
    try:
        offset = consumer.committed([TopicPartition(EOS_INPUT, 0)], timeout=CLIENT_TIMEOUT_S)[0].offset
        return max(offset, 0)
    finally:
        consumer.close()


def settle_transactions(bootstrap: str) -> None:
    """A fresh instance of each transactional id: init_transactions ends what a dead instance left open."""
    for transactional_id in (TXN_ID, EOS_TXN_ID):
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
        producer.init_transactions(CLIENT_TIMEOUT_S)
        producer.flush(CLIENT_TIMEOUT_S)


# ------------------------------------------------------------------------------------------ checking


Violations = list[tuple[str, str]]


def check(bootstrap: str, ledger: Ledger) -> tuple[Violations, int]:
    """Every invariant of the module docstring; returns the violations and the acked records verified."""
    violations: Violations = [("offset_reused", entry) for entry in ledger.reused]
    ledger.reused.clear()
    logs = {topic: read_topic(bootstrap, topic, "read_uncommitted") for topic in PARTITIONS}
    committed = {topic: read_topic(bootstrap, topic, "read_committed") for topic in (TXN_TOPIC, EOS_OUTPUT)}
    for name, view in [*((f"{t} read_uncommitted", v) for t, v in logs.items()),
                       *((f"{t} read_committed", v) for t, v in committed.items())]:
        if not view.complete:
            violations.append(("read_incomplete", f"{name}: no end of partition within {READ_DEADLINE_S}s"))
        violations += [("open_transaction", entry) for entry in view.behind]

    verified = 0
    with ledger.lock:
        acked = {key: dict(offsets) for key, offsets in ledger.acked.items()}
    for (topic, partition), offsets in acked.items():
        stored = logs[topic].records[partition]
        where = {value: offset for offset, value in stored.items()}
        for offset, value in offsets.items():
            if stored.get(offset) == value:
                verified += 1
            elif value in where:
                violations.append(("moved", f"{topic}-{partition}: {value!r} acked at {offset}, "
                                            f"found at {where[value]}"))
            else:
                violations.append(("lost", f"{topic}-{partition}: {value!r} acked at {offset}, "
                                           f"log has {stored.get(offset)!r} there"))

    for topic in NO_DUPLICATE_TOPICS:
        violations += [("duplicate", f"{topic}: {value!r} {count} times")
                       for value, count in logs[topic].values().items() if count > 1]

    visible = committed[TXN_TOPIC].values()
    known: set[bytes] = set()
    for key, transaction in ledger.transactions.items():
        known.update(transaction.values)
        shown = sum(1 for value in transaction.values if visible[value])
        if transaction.outcome == "aborted" and shown:
            violations.append(("aborted_visible", f"{key}: {shown} of {len(transaction.values)} records"))
        elif transaction.outcome == "committed" and shown != len(transaction.values):
            violations.append(("committed_lost", f"{key}: {shown} of {len(transaction.values)} records"))
        elif transaction.outcome == "unknown" and shown not in (0, len(transaction.values)):
            violations.append(("partial_transaction", f"{key}: {shown} of {len(transaction.values)} records"))
    violations += [("unexpected_record", f"{TXN_TOPIC}: {value!r}") for value in visible if value not in known]

    violations += check_exactly_once(bootstrap, ledger, logs[EOS_INPUT], committed[EOS_OUTPUT])
    return violations, verified


def check_exactly_once(bootstrap: str, ledger: Ledger, source: LogView, sink: LogView) -> Violations:
    violations: Violations = []
    offset = committed_offset(bootstrap)
    if offset < ledger.eos_committed_offset:
        violations.append(("eos_offset_regressed", f"committed {offset} after {ledger.eos_committed_offset}"))
    ledger.eos_committed_offset = offset
    inputs = source.records[0]
    if offset > 0 and offset - 1 not in inputs:
        violations.append(("eos_offset_beyond_input", f"committed {offset}, input ends before it"))
    expected = Counter(value for input_offset, value in inputs.items() if input_offset < offset)
    output = sink.values()
    for value, count in output.items():
        if value not in expected:
            violations.append(("eos_beyond_committed_offset", f"{value!r} in the committed output"))
        elif count > 1:
            violations.append(("eos_duplicate", f"{value!r} {count} times in the committed output"))
    violations += [("eos_missing", f"{value!r} below offset {offset} not in the committed output")
                   for value in expected if value not in output]
    return violations


# ------------------------------------------------------------------------------------------ cycles


@dataclass
class CycleResult:
    violations: Violations
    verified: int
    kill_delay_s: float
    seconds: float
    client_restarts: int = 0
    transactions_across_kill: int = 0
    second_kill_s: float | None = None
    second_kill_phase: str = ""


def wait_for_progress(workers: list[Worker], marks: list[int], deadline_s: float) -> list[str]:
    """Poll until each worker moved past its mark; returns the roles that did not within the deadline."""
    deadline = time.monotonic() + deadline_s
    while True:
        stuck = [w for w, mark in zip(workers, marks, strict=True) if w.progress <= mark]
        if not stuck or time.monotonic() >= deadline or not any(w.is_alive() for w in stuck):
            return [w.role for w in stuck]
        time.sleep(0.05)


def unanswered_metadata(bootstrap: str) -> str | None:
    """None when the broker answers Metadata within the deadline, else why not: a broker that logs
    ready and then fails every request would otherwise cost every deadline of the cycle in turn."""
    try:
        AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=HEALTH_DEADLINE_S)
    except KafkaException as exc:
        return str(exc.args[0])
    return None


def kill_while_starting(broker: BrokerProcess, delay_s: float) -> bool:
    """Start the broker and kill it again `delay_s` later, in the middle of recovering from the last
    crash or just after it is ready; returns whether it died before it was ready."""
    timer = threading.Timer(delay_s, broker.kill9)
    timer.start()
    try:
        broker.start()
        died_starting = False
    except RuntimeError:
        died_starting = True
    finally:
        timer.join()
    broker.kill9()  # the timer may have fired before start() spawned the process, which then lived on
    return died_starting


def run_cycle(broker: BrokerProcess, ledger: Ledger, seed: int, cycle: int, max_kill_delay_s: float) -> CycleResult:
    started = time.monotonic()
    rng = random.Random(f"{seed}:{cycle}")
    stop = threading.Event()
    arguments = (broker, ledger, rng, stop, cycle)
    workers: list[Worker] = [
        ProducerWorker(*arguments, idempotent=False, targets=[(PLAIN_TOPIC, p) for p in range(3)]),
        ProducerWorker(*arguments, idempotent=True,
                       targets=[(IDEMPOTENT_TOPIC, 0), (EOS_INPUT, 0), (IDEMPOTENT_TOPIC, 1), (IDEMPOTENT_TOPIC, 2)]),
        TransactionalWorker(*arguments),
        PipelineWorker(*arguments),
    ]
    kill_delay_s = rng.uniform(0.0, max_kill_delay_s)
    second_kill_s = rng.uniform(*SECOND_KILL_WINDOW_S) if rng.random() < SECOND_KILL_SHARE else None
    violations: Violations = []
    killed_at = float("inf")
    second_kill_phase = ""
    for worker in workers:
        worker.start()
    try:
        violations += [("stall_before_kill", role)
                       for role in wait_for_progress(workers, [0] * len(workers), PROGRESS_DEADLINE_S)]
        time.sleep(kill_delay_s)  # a seeded random phase of the workload, not a wait for state
        marks = [worker.progress for worker in workers]
        killed_at = time.monotonic()
        broker.kill9()
        try:
            if second_kill_s is not None:
                second_kill_phase = "before ready" if kill_while_starting(broker, second_kill_s) else "after ready"
            broker.start()
        except (RuntimeError, TimeoutError) as exc:
            violations.append(("restart_failed", str(exc)[-2000:]))
        else:
            if UNCLEAN_RECOVERY not in broker.log_path.read_text(errors="replace"):
                violations.append(("kill_not_seen", f"no {UNCLEAN_RECOVERY!r} in {broker.log_path}"))
            if (problem := unanswered_metadata(broker.bootstrap)) is not None:
                violations.append(("restart_failed", f"ready, but Metadata unanswered: {problem}"))
            else:
                violations += [("stall_after_restart", role)
                               for role in wait_for_progress(workers, marks, PROGRESS_DEADLINE_S)]
    finally:
        stop.set()
        deadline = time.monotonic() + STOP_DEADLINE_S
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
    for worker in workers:
        violations += worker.failures
        if worker.is_alive():
            violations.append(("stall_on_stop", worker.role))
    restarts = sum(worker.restarts for worker in workers)
    # Begun before the kill and ended, either way, after the restart.
    spanning = sum(1 for t in ledger.transactions.values() if started <= t.began < killed_at < t.ended)
    if any(worker.is_alive() for worker in workers) or any(kind == "restart_failed" for kind, _ in violations):
        # No broker, or a hung client thread that would keep writing into the next cycle: nothing to check.
        return CycleResult(violations, 0, kill_delay_s, time.monotonic() - started, restarts, spanning,
                           second_kill_s, second_kill_phase)
    try:
        settle_transactions(broker.bootstrap)
    except KafkaException as exc:
        violations.append(("settle_failed", str(exc.args[0])))
    found, verified = check(broker.bootstrap, ledger)
    return CycleResult(violations + found, verified, kill_delay_s, time.monotonic() - started, restarts,
                       spanning, second_kill_s, second_kill_phase)


@dataclass
class Summary:
    cycles: int = 0
    verified_last: int = 0
    record_checks: int = 0
    violations: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    slowest_cycle_s: float = 0.0
    acked: int = 0
    acked_by_role: Counter[str] = field(default_factory=Counter)
    transactions: Counter[str] = field(default_factory=Counter)
    eos_committed_offset: int = 0
    client_restarts: int = 0
    transactions_across_kill: int = 0
    second_kills: Counter[str] = field(default_factory=Counter)
    broker_log_levels: Counter[str] = field(default_factory=Counter)
    data_dir: Path | None = None


def create_topics(bootstrap: str) -> None:
    for topic, partitions in PARTITIONS.items():
        create_topic(bootstrap, topic, partitions)


def run_soak(cycles: int, seed: int, data_dir: Path, *, max_kill_delay_s: float = 2.0, keep_going: bool = False,
             out: Callable[[str], None] = print) -> Summary:
    started = time.monotonic()
    log_dir = data_dir / "broker-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    broker = BrokerProcess(data_dir / "data", log_dir, BROKER_OVERRIDES)
    ledger = Ledger()
    summary = Summary(data_dir=data_dir)
    broker.start()
    try:
        create_topics(broker.bootstrap)
        for cycle in range(1, cycles + 1):
            acked_before = ledger.total_acked
            result = run_cycle(broker, ledger, seed, cycle, max_kill_delay_s)
            summary.cycles = cycle
            summary.verified_last = result.verified
            summary.record_checks += result.verified
            summary.slowest_cycle_s = max(summary.slowest_cycle_s, result.seconds)
            summary.client_restarts += result.client_restarts
            summary.transactions_across_kill += result.transactions_across_kill
            kinds = Counter(kind for kind, _detail in result.violations)
            summary.violations.update(kinds)
            outcomes = Counter(t.outcome for t in ledger.transactions.values())
            again = "" if result.second_kill_s is None else (
                f" and {result.second_kill_s:4.2f}s into restart ({result.second_kill_phase})")
            summary.second_kills[result.second_kill_phase] += result.second_kill_s is not None
            out(f"cycle {cycle:3d}/{cycles} kill after {result.kill_delay_s:4.2f}s{again}  "
                f"acked +{ledger.total_acked - acked_before:5d} = {ledger.total_acked:7d}  "
                f"verified {result.verified:7d}  txns {outcomes['committed']}c/{outcomes['aborted']}a/"
                f"{outcomes['unknown']}u  eos offset {ledger.eos_committed_offset:6d}  "
                f"txns across kill {result.transactions_across_kill}  client restarts {result.client_restarts:2d}  "
                f"violations {sum(kinds.values())}  {result.seconds:5.1f}s")
            for kind, detail in result.violations[:20]:
                out(f"  VIOLATION {kind}: {detail}")
            if result.violations and not keep_going:
                out(f"stopping at the first violation: reproduce with --seed {seed} (cycle {cycle}); "
                    f"data and broker logs kept in {data_dir}")
                break
    finally:
        broker.kill9()
    summary.seconds = time.monotonic() - started
    summary.acked = ledger.total_acked
    summary.acked_by_role = ledger.acked_by_role
    summary.transactions = Counter(t.outcome for t in ledger.transactions.values())
    summary.eos_committed_offset = ledger.eos_committed_offset
    summary.broker_log_levels = broker_log_levels(log_dir)
    return summary


def broker_log_levels(log_dir: Path) -> Counter[str]:
    """Lines per log level over every broker start: warnings and errors are worth a look even when clean."""
    levels: Counter[str] = Counter()
    for path in log_dir.glob("broker-*.log"):
        for line in path.read_text(errors="replace").splitlines():
            try:
                levels[str(json.loads(line).get("level", "none"))] += 1
            except (json.JSONDecodeError, AttributeError):
                levels["not json"] += 1
    return levels


def format_summary(summary: Summary, seed: int) -> str:
    violations = ", ".join(f"{kind} {count}" for kind, count in sorted(summary.violations.items())) or "none"
    roles = ", ".join(f"{role} {count}" for role, count in sorted(summary.acked_by_role.items()))
    transactions = ", ".join(f"{outcome} {count}" for outcome, count in sorted(summary.transactions.items()))
    seconds, before = summary.second_kills.total(), summary.second_kills["before ready"]
    levels = ", ".join(f"{level} {count}" for level, count in sorted(summary.broker_log_levels.items()))
    return "\n".join([
        f"soak seed {seed}: {summary.cycles} cycles, {summary.cycles + seconds} kill -9 "
        f"({seconds} of them into a restart: {before} before ready) in {summary.seconds:.0f}s "
        f"(slowest cycle {summary.slowest_cycle_s:.1f}s)",
        f"records acked: {summary.acked} ({roles})",
        f"records verified: {summary.verified_last} after the last restart; {summary.record_checks} "
        f"record checks over all cycles",
        f"transactions: {transactions}; pipeline committed input offset {summary.eos_committed_offset}; "
        f"transactions open at a kill: {summary.transactions_across_kill}; "
        f"client instances rebuilt after errors: {summary.client_restarts}",
        f"broker log lines by level: {levels}",
        f"violations: {violations}",
    ])


def unpack_code(revision: str, target: Path) -> tuple[str, Path]:
    """Unpack `revision` under `target`; returns what was unpacked (its commit, where) and the folder to put
    first on PYTHONPATH for a broker subprocess to import minikafka from it: a regular `minikafka` package
    there is found before the editable install's finder, which comes last in meta_path."""
    repository = Path(__file__).resolve().parents[2]
    commit = subprocess.run(["git", "-C", str(repository), "rev-parse", "--verify", f"{revision}^{{commit}}"],
                            capture_output=True, text=True, check=True).stdout.strip()
    source, package = target / "source", target / "path" / "minikafka"
    source.mkdir(parents=True, exist_ok=True)
    package.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(repository), "archive", commit], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True)
    (package / "__init__.py").touch()
    # tools/ exists from the house's layout on; older commits lack it.
    for name in ("protocol", "storage", "coordinator", "tools", "broker", "pipeline", "testing"):
        if (source / name).is_dir():
            (package / name).symlink_to(source / name)
    where = subprocess.run([sys.executable, "-c", "import minikafka.broker as b; print(b.__file__)"],
                           env={**os.environ, "PYTHONPATH": str(package.parent)},
                           capture_output=True, text=True, check=True).stdout.strip()
    if not where.startswith(str(package)):
        raise RuntimeError(f"the broker would still import {where}")
    return f"{commit} from {source}", package.parent


def freeze_code(revision: str, target: Path) -> str:
    """Make every broker subprocess started from now on import minikafka from `revision` (unpack_code)."""
    unpacked, python_path = unpack_code(revision, target)
    os.environ["PYTHONPATH"] = str(python_path)
    return unpacked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-kill-delay", type=float, default=2.0,
                        help="seconds: the kill lands a seeded random time up to this after all workers progress")
    parser.add_argument("--data-dir", type=Path, help="kept afterwards; default: a temporary dir, removed if clean")
    parser.add_argument("--keep-going", action="store_true", help="do not stop at the first cycle with violations")
    parser.add_argument("--code", metavar="REV",
                        help="run the broker from `git archive REV` instead of the working tree, which the "
                             "editable install would otherwise load afresh at every restart")
    parser.add_argument("--client-logs", action="store_true",
                        help="librdkafka and worker logs on stderr; by default they go to client.log in the data dir")
    args = parser.parse_args(argv)
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="minikafka-soak-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    if not args.client_logs:
        # librdkafka logs from C straight to fd 2 (every refused reconnect while the broker is down):
        # keep them, with the workers' own logs, next to the broker logs instead of in the report.
        with open(data_dir / "client.log", "ab") as client_log:
            os.dup2(client_log.fileno(), sys.stderr.fileno())
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=sys.stderr))
    if args.code:
        print(f"broker code: {freeze_code(args.code, data_dir / 'code')}", flush=True)
    # SIGTERM unwinds like Ctrl-C, so the broker subprocess is killed rather than left behind.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(128 + signal.SIGTERM))
    summary = run_soak(args.cycles, args.seed, data_dir, max_kill_delay_s=args.max_kill_delay,
                       keep_going=args.keep_going, out=lambda line: print(line, flush=True))
    print(format_summary(summary, args.seed), flush=True)
    if summary.violations:
        print(f"data and broker logs kept in {data_dir}", flush=True)
        return 1
    if args.data_dir is None:
        with contextlib.suppress(OSError):
            shutil.rmtree(data_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
