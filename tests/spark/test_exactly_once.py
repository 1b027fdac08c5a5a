"""Exactly-once end to end, topic A -> Spark -> topic B, with failures injected in tasks and in the driver.

Every output record carries its input coordinates (header `src`); a read_committed consumer of B must
see each input coordinate exactly once, whatever failed in between.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from minikafka.testing import Broker
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from tests.support.names import unique_topic
from tests.support.waiting import poll_until

from .copy_job import start_copy_query
from .helpers import Record, create_topics, produce, read_topic

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
INPUT_PARTITIONS = 3
PER_PARTITION = 1000


def fill_input(broker: Broker, topic: str) -> list[Record]:
    """3 x 1000 plain records plus an aborted and a committed transaction; returns what read_committed sees."""
    create_topics(broker.bootstrap_servers, **{topic: INPUT_PARTITIONS})
    for p in range(INPUT_PARTITIONS):
        produce(broker.bootstrap_servers, topic, [(f"k{i % 50}".encode(), f"in-{p}-{i}".encode())
                                          for i in range(PER_PARTITION)], partition=p)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": unique_topic("input-tid")})
    producer.init_transactions(15)
    for commit in (False, True):
        producer.begin_transaction()
        for i in range(30):
            producer.produce(topic, f"txn-{commit}-{i}".encode(), key=b"t", partition=i % INPUT_PARTITIONS)
        producer.flush(15)
        (producer.commit_transaction if commit else producer.abort_transaction)(15)
    expected = read_topic(broker.bootstrap_servers, topic)
    assert len(expected) == INPUT_PARTITIONS * PER_PARTITION + 30
    return expected


def src_of(record: Record) -> str:
    [(name, value)] = record.headers
    assert name == "src" and value is not None
    return value.decode()


def assert_exactly_once(broker: Broker, inputs: list[Record], output_topic: str) -> list[Record]:
    outputs = read_topic(broker.bootstrap_servers, output_topic, "read_committed")
    by_src = {f"{r.partition}:{r.offset}": r for r in inputs}
    counts = Counter(src_of(r) for r in outputs)
    duplicates = {src: n for src, n in counts.items() if n > 1}
    assert not duplicates, f"{len(duplicates)} input records written more than once, e.g. {list(duplicates)[:5]}"
    missing = by_src.keys() - counts.keys()
    assert not missing, f"{len(missing)} input records never written, e.g. {sorted(missing)[:5]}"
    assert counts.keys() == by_src.keys()
    for record in outputs:
        source = by_src[src_of(record)]
        assert (record.key, record.value) == (source.key, source.value.upper() if source.value else None)
    return outputs


def markers(broker: Broker, prefix: str, groups: list[str], topic: str) -> dict[str, int]:
    """The sink's replay markers: committed offset of partition 0 of `topic` per marker group."""
    result = {}
    for suffix in groups:
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"{prefix}-{suffix}",
                             "isolation.level": "read_committed"})
        [tp] = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        consumer.close()
        result[suffix] = tp.offset
    return result


def run_to_end(query: StreamingQuery) -> list[dict]:
    try:
        query.processAllAvailable()
        return [p for p in query.recentProgress if p["numInputRows"] > 0]
    finally:
        query.stop()


def failpoint(tmp_path: Path, point: str, *, action: str = "raise", partition: int | None = None,
              batch: int | None = None) -> dict:
    return {"point": point, "action": action, "partition": partition, "batch": batch,
            "flag": str(tmp_path / f"fired-{point}-{partition}-{batch}")}


def checkpoint_batch_state(checkpoint: Path, batch: int) -> tuple[bool, bool]:
    """Whether Spark's offset log and commit log have an entry for `batch`."""
    return (checkpoint / "offsets" / str(batch)).exists(), (checkpoint / "commits" / str(batch)).exists()


def logged_end_offsets(checkpoint: Path, batch: int, topic: str) -> dict[int, int]:
    last_line = (checkpoint / "offsets" / str(batch)).read_text().strip().splitlines()[-1]
    return {int(p): o for p, o in json.loads(last_line)[topic].items()}


def test_task_mode_survives_task_crashes(spark: SparkSession, broker: Broker, tmp_path: Path) -> None:
    source, sink, prefix = unique_topic("eos-a"), unique_topic("eos-b"), unique_topic("eos-task")
    inputs = fill_input(broker, source)
    create_topics(broker.bootstrap_servers, **{sink: 2})
    faults = [
        # Raises after producing batch 0 of partition 0, before the commit: the writer aborts.
        failpoint(tmp_path, "task.before_commit", partition=0, batch=0),
        # Kills the Python worker with batch 1 of partition 1 flushed to B in an open transaction.
        failpoint(tmp_path, "task.open_transaction", action="exit", partition=1, batch=1),
        # Raises after batch 2 of partition 2 is committed: Spark retries a task whose output is in B.
        failpoint(tmp_path, "task.after_commit", partition=2, batch=2),
    ]
    progress = run_to_end(start_copy_query(spark, bootstrap=broker.bootstrap_servers, source=source, sink=sink,
                                           checkpoint=str(tmp_path / "checkpoint"), prefix=prefix,
                                           failpoints=faults))
    assert all(Path(f["flag"]).exists() for f in faults), "every injected failure fired"
    assert [p["batchId"] for p in progress] == [0, 1, 2, 3], "3030 offsets at 1000 per trigger"
    assert_exactly_once(broker, inputs, sink)

    # The crashed task's open transaction was aborted by the retry's initTransactions, not committed:
    # its records are in B's log (read_uncommitted) but not in the read_committed view.
    uncommitted = Counter(src_of(r) for r in read_topic(broker.bootstrap_servers, sink, "read_uncommitted"))
    twice = {src for src, n in uncommitted.items() if n > 1}
    assert twice, "the open transaction's records reached the log"
    assert {src.split(":")[0] for src in twice} <= {"0", "1"}, "only the failed-before-commit tasks left aborted rows"
    assert any(src.startswith("1:") for src in twice)
    assert markers(broker, prefix, ["0", "1", "2"], sink) == {"0": 4, "1": 4, "2": 4}, "batch 3 is the last"


def test_driver_killed_between_sink_commit_and_commit_log(spark: SparkSession, broker: Broker,
                                                          tmp_path: Path) -> None:
    source, sink, prefix = unique_topic("kill-a"), unique_topic("kill-b"), unique_topic("eos-kill")
    inputs = fill_input(broker, source)
    create_topics(broker.bootstrap_servers, **{sink: 2})
    checkpoint = tmp_path / "checkpoint"
    hang = failpoint(tmp_path, "driver.after_sink_commit", action="hang", batch=1)
    args = [sys.executable, "-m", "tests.spark.copy_job", "--bootstrap", broker.bootstrap_servers, "--source", source,
            "--sink", sink, "--checkpoint", str(checkpoint), "--prefix", prefix, "--mode", "task",
            "--failpoints", json.dumps([hang])]
    with open(tmp_path / "driver.log", "wb") as log:
        driver = subprocess.Popen(args, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        poll_until(lambda: Path(hang["flag"]).exists() or driver.poll() is not None, timeout=120,
                   message="the driver to reach the sink commit of batch 1")
        assert driver.poll() is None, (tmp_path / "driver.log").read_text()[-3000:]
    finally:
        # -9 on the whole process group: the JVM, its Python workers, the driver script.
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(30)
    assert checkpoint_batch_state(checkpoint, 1) == (True, False), "batch 1 planned, not in Spark's commit log"
    ends = logged_end_offsets(checkpoint, 1, source)
    written = {src_of(r) for r in read_topic(broker.bootstrap_servers, sink)}
    assert written == {f"{r.partition}:{r.offset}" for r in inputs if r.offset < ends[r.partition]}, \
        "B holds batches 0 and 1 exactly: the sink committed batch 1 before the driver died"

    progress = run_to_end(start_copy_query(spark, bootstrap=broker.bootstrap_servers, source=source, sink=sink,
                                           checkpoint=str(checkpoint), prefix=prefix))
    assert progress[0]["batchId"] == 1, "Spark replays the batch missing from its commit log"
    assert checkpoint_batch_state(checkpoint, 1) == (True, True)
    assert_exactly_once(broker, inputs, sink)


def test_driver_mode_replay_after_failure_between_sink_commit_and_commit_log(
        spark: SparkSession, broker: Broker, tmp_path: Path) -> None:
    source, sink, prefix = unique_topic("drv-a"), unique_topic("drv-b"), unique_topic("eos-driver")
    inputs = fill_input(broker, source)
    create_topics(broker.bootstrap_servers, **{sink: 2})
    checkpoint = tmp_path / "checkpoint"
    faults = [
        # A task fails before handing its rows to the driver: Spark retries it, nothing is in Kafka yet.
        failpoint(tmp_path, "task.before_commit", partition=1, batch=0),
        # The driver fails after batch 1's Kafka transaction committed, before Spark's commit log.
        failpoint(tmp_path, "driver.after_sink_commit", batch=1),
    ]
    query = start_copy_query(spark, bootstrap=broker.bootstrap_servers, source=source, sink=sink,
                             checkpoint=str(checkpoint), prefix=prefix, mode="driver", failpoints=faults)
    with pytest.raises(StreamingQueryException, match=r"injected failure at driver\.after_sink_commit"):
        query.awaitTermination(180)
    assert all(Path(f["flag"]).exists() for f in faults)
    assert checkpoint_batch_state(checkpoint, 1) == (True, False)
    ends = logged_end_offsets(checkpoint, 1, source)
    assert {src_of(r) for r in read_topic(broker.bootstrap_servers, sink)} == {
        f"{r.partition}:{r.offset}" for r in inputs if r.offset < ends[r.partition]}

    progress = run_to_end(start_copy_query(spark, bootstrap=broker.bootstrap_servers, source=source, sink=sink,
                                           checkpoint=str(checkpoint), prefix=prefix, mode="driver"))
    assert progress[0]["batchId"] == 1
    outputs = assert_exactly_once(broker, inputs, sink)
    assert markers(broker, prefix, ["driver"], sink) == {"driver": 4}
    assert len(outputs) == len(inputs)
