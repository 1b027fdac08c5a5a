"""Smoke-test an installed minikafka with confluent-kafka; run by check_install.sh inside a fresh venv.

    VENV/bin/python -I tests/install/roundtrip.py --minikafka VENV/bin/minikafka --work-dir DIR

Imports every installed module, starts the installed `minikafka serve --port 0` on 127.0.0.1, and checks
a round trip a new user would try: idempotent produce, a consumer group (subscribe, consume, commit,
committed offsets, a restarted member resuming there), transactions (committed, aborted, and a
consume-transform-produce commit with the group's offsets) read back with read_committed. Any mismatch
exits 1; the broker is stopped with SIGTERM (and must exit 0) or killed, whatever happened.
Run with `-I` so that neither the checkout nor the script's folder can stand in for the installed package.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

READY_DEADLINE_S = 30.0
STOP_DEADLINE_S = 20.0
CLIENT_TIMEOUT_S = 30.0
# Modules of the `spark` extra's packages: minikafka.pipeline needs them, the base install does not. pytest:
# minikafka.testing.plugin is loaded by pytest itself (its pytest11 entry point), so pytest is there then.
# The spark, test and tls extras.
OPTIONAL_IMPORTS = {"pyspark", "pyarrow", "py4j", "pytest", "cryptography"}

PLAIN_TOPIC = "install-plain"
PLAIN_PARTITIONS = 3
PLAIN_RECORDS = 300
OUT_TOPIC = "install-txn-out"
OUT_PARTITIONS = 2
GROUP = "install-group"
CTP_GROUP = "install-ctp"
TRANSACTIONAL_ID = "install-txn"

T = TypeVar("T")


class CheckFailed(Exception):
    """The installed broker did not behave as a Kafka broker must."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def say(message: str) -> None:
    print(f"roundtrip: {message}", flush=True)


def poll_until(produce_value: Callable[[], T | None], what: str, timeout: float = CLIENT_TIMEOUT_S) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = produce_value()
        if value is not None:
            return value
        time.sleep(0.05)
    raise CheckFailed(f"timed out after {timeout}s waiting for {what}")


def import_every_module() -> tuple[int, list[str]]:
    """Import each module the installed distribution lists; returns (imported, skipped for a missing extra)."""
    files = importlib.metadata.files("minikafka") or []
    modules = sorted(
        ".".join(PurePosixPath(str(file)).with_suffix("").parts).removesuffix(".__init__")
        for file in files
        if str(file).startswith("minikafka/") and str(file).endswith(".py")
    )
    check(len(modules) > 0, "the installed distribution lists no minikafka modules")
    imported, skipped = 0, []
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if (exc.name or "").partition(".")[0] in OPTIONAL_IMPORTS:
                skipped.append(name)
                continue
            raise CheckFailed(f"import {name}: {exc!r}") from exc
        origin = Path(module.__file__ or "")
        check(origin.is_relative_to(sys.prefix), f"{name} was imported from {origin}, not from the venv {sys.prefix}")
        imported += 1
    return imported, skipped


@contextmanager
def running_broker(minikafka: Path, work_dir: Path) -> Iterator[str]:
    """The installed console script on a free port; yields the bootstrap address."""
    log_path = work_dir / "broker.log"
    args = [str(minikafka), "serve", "--host", "127.0.0.1", "--port", "0", "--data-dir", str(work_dir / "data"),
            "--log-format", "json"]
    with open(log_path, "wb") as log_file:
        broker = subprocess.Popen(args, stdout=log_file, stderr=subprocess.STDOUT, cwd=work_dir,
                                  start_new_session=True)
    # check_install.sh kills this pid if this script dies before its own cleanup runs.
    (work_dir / "broker.pid").write_text(str(broker.pid))
    stopped = False
    try:
        def ready_port() -> int | None:
            if broker.poll() is not None:
                raise CheckFailed(f"broker exited with {broker.returncode} before it was ready")
            for line in log_path.read_text(errors="replace").splitlines():
                if '"broker ready"' in line:
                    return int(json.loads(line)["port"])
            return None

        port = poll_until(ready_port, "the broker ready line", READY_DEADLINE_S)
        say(f"broker pid {broker.pid} ready on 127.0.0.1:{port}")
        yield f"127.0.0.1:{port}"
        broker.send_signal(signal.SIGTERM)
        code = broker.wait(STOP_DEADLINE_S)
        stopped = True
        check(code == 0, f"broker exited with {code} after SIGTERM")
        say("broker stopped cleanly on SIGTERM")
    except BaseException:
        print(f"---- broker log (last 60 lines of {log_path}) ----", file=sys.stderr)
        print("\n".join(log_path.read_text(errors="replace").splitlines()[-60:]), file=sys.stderr)
        raise
    finally:
        if not stopped and broker.poll() is None:
            broker.kill()
            broker.wait(10)


def create_topics(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(PLAIN_TOPIC, PLAIN_PARTITIONS, 1), NewTopic(OUT_TOPIC, OUT_PARTITIONS, 1)],
                                  operation_timeout=10)
    for future in futures.values():
        future.result(timeout=CLIENT_TIMEOUT_S)


def produce_plain(bootstrap: str) -> dict[tuple[int, int], bytes]:
    """Idempotent acks=all produce; returns each acknowledged record's value by (partition, offset)."""
    acknowledged: dict[tuple[int, int], bytes] = {}
    failures: list[str] = []

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append(str(error))
        else:
            acknowledged[(message.partition(), message.offset())] = message.value()

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5})
    for i in range(PLAIN_RECORDS):
        producer.produce(PLAIN_TOPIC, value=f"v{i}".encode(), key=f"k{i}".encode(), partition=i % PLAIN_PARTITIONS,
                         on_delivery=on_delivery)
    check(producer.flush(CLIENT_TIMEOUT_S) == 0, "produce: records still unacknowledged after flush")
    check(not failures, f"produce: delivery failures {failures[:5]}")
    check(len(acknowledged) == PLAIN_RECORDS, f"produce: {len(acknowledged)} acknowledgements for {PLAIN_RECORDS}")
    return acknowledged


def end_offsets(acknowledged: dict[tuple[int, int], bytes]) -> dict[int, int]:
    return {partition: 1 + max(offset for p, offset in acknowledged if p == partition)
            for partition, _ in acknowledged}


def drain(consumer: Consumer, partitions: int, what: str) -> dict[tuple[int, int], bytes]:
    """Consume until every one of `partitions` partitions has reported its end (enable.partition.eof)."""
    received: dict[tuple[int, int], bytes] = {}
    at_end: set[int] = set()
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while len(at_end) < partitions:
        check(time.monotonic() < deadline, f"{what}: {len(at_end)} of {partitions} partitions read to their end "
                                           f"after {CLIENT_TIMEOUT_S}s ({len(received)} records)")
        for message in consumer.consume(num_messages=500, timeout=0.2):
            error = message.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                at_end.add(message.partition())
            elif error is not None:
                raise KafkaException(error)
            else:
                at_end.discard(message.partition())
                key = (message.partition(), message.offset())
                check(key not in received, f"{what}: offset {key} delivered twice")
                received[key] = message.value()
    return received


def group_consumer(bootstrap: str, group: str, **extra: object) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "enable.partition.eof": True, "fetch.wait.max.ms": 100,
                     **extra})


def committed_offsets(consumer: Consumer, topic: str, partitions: int) -> dict[int, int]:
    committed = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=CLIENT_TIMEOUT_S)
    for tp in committed:
        check(tp.error is None, f"committed offsets of {topic}[{tp.partition}]: {tp.error}")
    return {tp.partition: tp.offset for tp in committed}


def check_consumer_group(bootstrap: str, acknowledged: dict[tuple[int, int], bytes]) -> None:
    consumer = group_consumer(bootstrap, GROUP)
    try:
        consumer.subscribe([PLAIN_TOPIC])
        received = drain(consumer, PLAIN_PARTITIONS, "group consume")
        check(received == acknowledged, f"group consume: {len(received)} records differ from the "
                                        f"{len(acknowledged)} acknowledged")
        commits = consumer.commit(asynchronous=False) or []
        check(all(tp.error is None for tp in commits), f"commit: {[str(tp.error) for tp in commits]}")
        committed = committed_offsets(consumer, PLAIN_TOPIC, PLAIN_PARTITIONS)
        check(committed == end_offsets(acknowledged),
              f"committed offsets {committed}, expected the end offsets {end_offsets(acknowledged)}")
    finally:
        consumer.close()
    # A new member of the group must resume at the committed offsets: the first record it sees is
    # one produced after the commit, not a replay from the beginning.
    consumer = group_consumer(bootstrap, GROUP, **{"enable.partition.eof": False})
    try:
        consumer.subscribe([PLAIN_TOPIC])

        def next_record() -> Message | None:
            message = consumer.poll(0.1)
            if message is not None and message.error() is not None:
                raise KafkaException(message.error())
            return message

        def record_or_assigned() -> Message | str | None:
            message = next_record()
            if message is not None:
                return message
            return "assigned" if consumer.assignment() else None

        # A record seen while waiting for the assignment can only be a replay, and fails the check below.
        first = poll_until(record_or_assigned, "the group assignment")
        if isinstance(first, str):
            producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
            producer.produce(PLAIN_TOPIC, value=b"after-commit", partition=0)
            check(producer.flush(CLIENT_TIMEOUT_S) == 0, "produce after commit: not acknowledged")
            first = poll_until(next_record, "the record produced after the commit")
        check((first.partition(), first.offset(), first.value()) == (0, end_offsets(acknowledged)[0], b"after-commit"),
              f"resumed group member first read {first.partition()}:{first.offset()} {first.value()!r}")
    finally:
        consumer.close()


def check_transactions(bootstrap: str, acknowledged: dict[tuple[int, int], bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": TRANSACTIONAL_ID, "linger.ms": 5})
    producer.init_transactions(CLIENT_TIMEOUT_S)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(OUT_TOPIC, value=f"commit-{i}".encode(), partition=i % OUT_PARTITIONS)
    producer.commit_transaction(CLIENT_TIMEOUT_S)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(OUT_TOPIC, value=f"abort-{i}".encode(), partition=i % OUT_PARTITIONS)
    check(producer.flush(CLIENT_TIMEOUT_S) == 0, "aborted transaction: records not written before the abort")
    producer.abort_transaction(CLIENT_TIMEOUT_S)

    # Consume-transform-produce: the group's offsets commit atomically with the output.
    source = group_consumer(bootstrap, CTP_GROUP, **{"isolation.level": "read_committed"})
    try:
        source.subscribe([PLAIN_TOPIC])
        consumed = drain(source, PLAIN_PARTITIONS, "consume-transform-produce input")
        check(set(acknowledged.items()) <= set(consumed.items()), "consume-transform-produce input lacks records")
        producer.begin_transaction()
        for (partition, _), value in sorted(consumed.items()):
            producer.produce(OUT_TOPIC, value=b"out-" + value, partition=partition % OUT_PARTITIONS)
        producer.send_offsets_to_transaction(source.position(source.assignment()), source.consumer_group_metadata(),
                                             CLIENT_TIMEOUT_S)
        producer.commit_transaction(CLIENT_TIMEOUT_S)
        expected_ctp_offsets = {tp.partition: tp.offset for tp in source.position(source.assignment())}
    finally:
        source.close()

    committed_values = sorted([f"commit-{i}".encode() for i in range(10)] +
                              [b"out-" + value for value in consumed.values()])
    by_isolation: dict[str, list[bytes]] = {}
    for isolation in ("read_committed", "read_uncommitted"):
        reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"install-reader-{isolation}",
                           "enable.auto.commit": False, "enable.partition.eof": True, "isolation.level": isolation,
                           "fetch.wait.max.ms": 100})
        try:
            reader.assign([TopicPartition(OUT_TOPIC, p, 0) for p in range(OUT_PARTITIONS)])
            by_isolation[isolation] = sorted(drain(reader, OUT_PARTITIONS, f"{isolation} read").values())
        finally:
            reader.close()
    check(by_isolation["read_committed"] == committed_values,
          f"read_committed returned {len(by_isolation['read_committed'])} records, expected exactly the "
          f"{len(committed_values)} committed ones")
    # The aborted records are on the log: read_committed above filtered them rather than never seeing them.
    aborted_values = sorted(committed_values + [f"abort-{i}".encode() for i in range(5)])
    check(by_isolation["read_uncommitted"] == aborted_values,
          f"read_uncommitted returned {len(by_isolation['read_uncommitted'])} records, expected "
          f"{len(aborted_values)}")

    checker = group_consumer(bootstrap, CTP_GROUP)
    try:
        ctp_committed = committed_offsets(checker, PLAIN_TOPIC, PLAIN_PARTITIONS)
    finally:
        checker.close()
    check(ctp_committed == expected_ctp_offsets,
          f"offsets committed with the transaction {ctp_committed}, expected {expected_ctp_offsets}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minikafka", type=Path, required=True, help="the installed console script")
    parser.add_argument("--work-dir", type=Path, required=True, help="broker data, log and pid file go here")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        imported, skipped = import_every_module()
        say(f"imported {imported} installed modules from {sys.prefix}"
            + (f" ({len(skipped)} need the spark extra or pytest: {', '.join(skipped)})" if skipped else ""))
        os.chdir(args.work_dir)
        with running_broker(args.minikafka, args.work_dir) as bootstrap:
            create_topics(bootstrap)
            acknowledged = produce_plain(bootstrap)
            say(f"produced {len(acknowledged)} records (idempotent, acks=all)")
            check_consumer_group(bootstrap, acknowledged)
            say("consumer group: consumed all, committed, committed offsets match, a new member resumes there")
            check_transactions(bootstrap, acknowledged)
            say("transactions: committed and consume-transform-produce visible to read_committed, aborted not")
    except (CheckFailed, KafkaException) as exc:
        print(f"roundtrip: FAILED: {exc}", file=sys.stderr)
        return 1
    say(f"passed in {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
