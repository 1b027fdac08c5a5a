"""`minikafka transactions` (Kafka's kafka-transactions.sh) against a broker, with confluent-kafka producers."""

from __future__ import annotations

import socket
import subprocess
import sys
from dataclasses import dataclass

from confluent_kafka import Producer
from minikafka.testing import Broker

from tests.support.clients import consume, create_topic, transactional_producer
from tests.support.names import unique_topic

TOOL_TIMEOUT_S = 60
LIST_HEADER = ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
PRODUCERS_HEADER = ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                    "CurrentTransactionStartOffset"]
HANGING_HEADER = ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                  "LastTimestamp", "Duration(min)"]


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str

    def table(self) -> list[list[str]]:
        """Kafka's prettyPrintTable: every cell padded and followed by a tab."""
        lines = self.out.splitlines()
        assert lines and all(line.endswith("\t") for line in lines), self.out
        return [[cell.rstrip(" ") for cell in line[:-1].split("\t")] for line in lines]


def transactions(broker: Broker | str, *args: str) -> Run:
    bootstrap = broker if isinstance(broker, str) else broker.bootstrap_servers
    done = subprocess.run([sys.executable, "-m", "minikafka.broker", "transactions", "--bootstrap-server", bootstrap,
                           *args], capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    return Run(done.returncode, done.stdout, done.stderr)


def ok(run: Run) -> list[list[str]]:
    assert run.code == 0 and run.err == "", run
    return run.table()


def committed_values(broker: Broker, topic: str, partition: int, expected: int) -> list[bytes | None]:
    return [r.value for r in consume(broker.bootstrap_servers, topic, expected, partitions=(partition,),
                                     isolation="read_committed", timeout=4)]


def test_open_then_committed_transaction(broker: Broker) -> None:
    topic, tid = unique_topic("txtool"), unique_topic("tid")
    create_topic(broker.bootstrap_servers, topic, 2)
    plain = Producer({"bootstrap.servers": broker.bootstrap_servers})
    plain.produce(topic, b"before", partition=1)
    plain.flush(10)
    producer = transactional_producer(broker.bootstrap_servers, tid)
    producer.begin_transaction()
    producer.produce(topic, b"in-txn", partition=1)
    producer.flush(15)

    listed = ok(transactions(broker, "list"))
    assert listed[0] == LIST_HEADER
    assert len(listed) == 2 and listed[1][0] == tid and listed[1][1] == "1" and listed[1][3] == "Ongoing"
    producer_id = listed[1][2]

    described = ok(transactions(broker, "describe", "--transactional-id", tid))
    assert described[0] == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                            "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                            "TopicPartitions"]
    row = dict(zip(described[0], described[1], strict=True))
    assert (row["CoordinatorId"], row["TransactionalId"], row["ProducerId"], row["ProducerEpoch"],
            row["TransactionState"], row["TransactionTimeoutMs"], row["TopicPartitions"]) == (
        "1", tid, producer_id, "0", "Ongoing", "60000", f"{topic}-1")
    assert int(row["CurrentTransactionStartTimeMs"]) > 0 and int(row["TransactionDurationMs"]) >= 0

    producers = ok(transactions(broker, "describe-producers", "--topic", topic, "--partition", "1"))
    assert producers[0] == PRODUCERS_HEADER
    assert [r for r in producers[1:] if r[0] == producer_id] == [
        [producer_id, "0", "-1", "0", producers[1][4], "1"]], "the transaction starts at offset 1, after 'before'"
    assert len(producers) == 2

    # Its coordinator tracks it, so it is open but not hanging (Kafka's find-hanging rule).
    assert ok(transactions(broker, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0")) == [
        HANGING_HEADER]

    producer.commit_transaction(15)
    assert ok(transactions(broker, "list"))[1:] == [[tid, "1", producer_id, "CompleteCommit"]]
    described = ok(transactions(broker, "describe", "--transactional-id", tid))
    row = dict(zip(described[0], described[1], strict=True))
    assert (row["TransactionState"], row["TopicPartitions"]) == ("CompleteCommit", "")
    after_commit = ok(transactions(broker, "describe-producers", "--topic", topic, "--partition", "1"))
    assert [r[0] for r in after_commit[1:]] == [producer_id] and after_commit[1][5] == "None"
    assert after_commit[1][2] == "0", "the commit marker records coordinator epoch 0"


def forget_transactions(broker: Broker) -> None:
    """Restart the broker without its `__transaction_state` records: the coordinator no longer knows
    the open transaction, while the data partition still holds it, the way a transaction hangs."""
    broker.stop()
    removed = 0
    for partition_dir in broker.data_dir.glob("__transaction_state-*"):
        for segment_file in partition_dir.iterdir():
            if segment_file.suffix in (".log", ".index", ".timeindex", ".snapshot", ".txnindex"):
                segment_file.unlink()
                removed += 1
    assert removed > 0
    broker.start()


def test_find_hanging_and_abort(broker: Broker) -> None:
    topic, tid = unique_topic("hang"), unique_topic("tid")
    create_topic(broker.bootstrap_servers, topic, 2)
    plain = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for partition in (0, 1):
        plain.produce(topic, b"before", partition=partition)
    plain.flush(10)
    producer = transactional_producer(broker.bootstrap_servers, tid)
    producer.begin_transaction()
    for partition in (0, 1):
        producer.produce(topic, b"in-txn", partition=partition)
    producer.flush(15)
    producer_id = ok(transactions(broker, "list"))[1][2]
    forget_transactions(broker)
    for partition in (0, 1):
        plain.produce(topic, b"after", partition=partition)
    plain.flush(15)

    assert ok(transactions(broker, "list")) == [LIST_HEADER]
    assert committed_values(broker, topic, 0, 2) == [b"before"], "the open transaction holds back read_committed"
    for scope in (["--topic", topic], ["--broker-id", "1"]):
        hanging = ok(transactions(broker, "find-hanging", *scope, "--max-transaction-timeout", "0"))
        assert hanging[0] == HANGING_HEADER
        assert [r[:6] + r[7:] for r in hanging[1:]] == [
            [topic, "0", producer_id, "0", "-1", "1", "0"], [topic, "1", producer_id, "0", "-1", "1", "0"]]
    # The default bound (15 minutes) leaves out a transaction this young, as in Kafka.
    assert ok(transactions(broker, "find-hanging", "--topic", topic)) == [HANGING_HEADER]

    aborted = transactions(broker, "abort", "--topic", topic, "--partition", "0", "--start-offset", "1")
    assert (aborted.code, aborted.out, aborted.err) == (0, "", "")
    aborted = transactions(broker, "abort", "--topic", topic, "--partition", "1", "--producer-id", producer_id,
                           "--producer-epoch", "0", "--coordinator-epoch", "-1")
    assert (aborted.code, aborted.out, aborted.err) == (0, "", "")

    for partition in (0, 1):
        assert committed_values(broker, topic, partition, 2) == [b"before", b"after"]
    assert ok(transactions(broker, "find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0")) == [
        HANGING_HEADER]
    producers = ok(transactions(broker, "describe-producers", "--topic", topic, "--partition", "0"))
    assert [(r[0], r[2], r[5]) for r in producers[1:]] == [(producer_id, "0", "None")]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_errors_are_one_line_and_exit_1(broker: Broker) -> None:
    topic = unique_topic("txerr")
    create_topic(broker.bootstrap_servers, topic)
    hint = " Enable debug logging for additional detail.\n"
    cases = {
        ("describe", "--transactional-id", "nope"):
            "Failed to describe transaction state of transactional-id `nope`: TRANSACTIONAL_ID_NOT_FOUND." + hint,
        ("describe-producers", "--topic", "absent", "--partition", "0"):
            "Failed to describe producers for partition absent-0 on leader: UNKNOWN_TOPIC_OR_PARTITION." + hint,
        ("abort", "--topic", topic, "--partition", "0"):
            "The transaction to abort must be identified either with --start-offset (for brokers on 3.0 or above) "
            "or with --producer-id, --producer-epoch, and --coordinator-epoch (for older brokers)\n",
        ("abort", "--topic", topic, "--partition", "0", "--producer-id", "7"):
            "Missing required argument --producer-epoch\n",
        ("abort", "--topic", topic, "--partition", "0", "--start-offset", "5"):
            f"Could not find any open transactions starting at offset 5 on partition {topic}-0\n",
        ("find-hanging",):
            "The `find-hanging` command requires either --topic or --broker-id to limit the scope of the search\n",
        ("find-hanging", "--topic", "absent"): "Failed to describe 1 topics: UNKNOWN_TOPIC_OR_PARTITION." + hint,
        ("find-hanging", "--broker-id", "1", "--partition", "0"):
            "The --partition argument requires --topic to be provided\n",
    }
    for args, message in cases.items():
        assert transactions(broker, *args) == Run(1, "", message)
    unreachable = transactions(f"127.0.0.1:{_free_port()}", "list")
    assert unreachable.code == 1 and unreachable.out == ""
    assert unreachable.err.startswith("Failed to list transactions: cannot connect to 127.0.0.1:")
    assert unreachable.err.count("\n") == 1 and "Traceback" not in unreachable.err
