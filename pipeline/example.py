"""Example pipeline: JSON events -> Spark Structured Streaming (parse, per-minute totals per user) -> Kafka.

    python -m minikafka.pipeline.example                       # starts a throwaway minikafka broker
    python -m minikafka.pipeline.example --bootstrap host:9092 # any Kafka-compatible broker

Steps: feed the input topic (plain records, one committed and one aborted transaction, a few malformed
records, then one far-future event that moves the watermark past every window), run the query until
every window is written, stop, verify the output topic with a read_committed consumer against totals
computed from the input without Spark, and print the micro-batch latency and rows/s.

The aggregation runs in append mode (Python data source sinks support only append): a (minute, user)
total is emitted once, when the watermark passes the end of its minute, so "each key exactly once in
the output" is the exactly-once check.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ACTIONS = ("view", "click", "buy")
EVENT_SCHEMA = "id LONG, user STRING, action STRING, amount_cents LONG, ts LONG"
# Event time is synthetic (10 ms apart from a fixed origin) so that runs are reproducible.
ORIGIN_MS = 1_700_000_000_000
STEP_MS = 10
WINDOW_MS = 60_000
FLUSH_USER = "_flush"


def flush_ts(count: int) -> int:
    """The event time of the feed's last event: an hour past the others, so the watermark passes them all."""
    return ORIGIN_MS + (count + 1000) * STEP_MS + 3_600_000


@contextmanager
def local_broker(data_dir: Path) -> Iterator[str]:
    """A minikafka broker subprocess on a free port (a process, not an import: the pipeline needs no broker code)."""
    log_path = data_dir / "broker.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "minikafka.broker", "serve", "--host", "127.0.0.1",
                                    "--port", "0", "--data-dir", str(data_dir / "data"), "--log-format", "json"],
                                   stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        port = None
        while port is None:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the broker did not start:\n{log_path.read_text()}")
            for line in log_path.read_text(errors="replace").splitlines():
                if '"broker ready"' in line:
                    port = json.loads(line)["port"]
            time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def event(i: int) -> dict[str, Any]:
    return {"id": i, "user": f"user-{i % 200:03d}", "action": ACTIONS[i % 3], "amount_cents": (i * 37) % 5000,
            "ts": ORIGIN_MS + i * STEP_MS}


def feed(bootstrap: str, topic: str, count: int) -> None:
    """`count` events as plain records, plus a committed and an aborted transaction and malformed records."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        while True:
            try:
                producer.produce(topic, json.dumps(event(i)).encode(), key=f"user-{i % 200:03d}".encode())
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 9_999:
            producer.produce(topic, b"{not json", key=b"garbage")  # parsed to null and dropped by the query
    assert producer.flush(30) == 0
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"example-feeder-{topic}"})
    txn.init_transactions(30)
    for commit, first in ((False, count), (True, count + 500)):
        txn.begin_transaction()
        for i in range(first, first + 500):
            txn.produce(topic, json.dumps(event(i)).encode())
        txn.flush(30)
        # The aborted 500 must not be counted: the source reads read_committed.
        (txn.commit_transaction if commit else txn.abort_transaction)(30)
    flush = {**event(count + 1000), "id": -1, "user": FLUSH_USER, "ts": flush_ts(count)}
    producer.produce(topic, json.dumps(flush).encode(), key=FLUSH_USER.encode())
    assert producer.flush(30) == 0


def read_committed(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) of every record up to the end, as a plain read_committed consumer sees them."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "example-verifier", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    pending, records = set(partitions), []
    deadline = time.monotonic() + 60
    try:
        while pending and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=5000, timeout=0.2):
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(error)
                    pending.discard(message.partition())
                else:
                    records.append((message.key(), message.value()))
    finally:
        consumer.close()
    if pending:
        raise TimeoutError(f"{topic}: partitions {sorted(pending)} did not reach their end")
    return records


def expected_totals(bootstrap: str, topic: str) -> dict[str, dict[str, int]]:
    """The (user, minute) totals computed without Spark, from what a read_committed consumer reads."""
    totals: dict[str, dict[str, int]] = {}
    for _, value in read_committed(bootstrap, topic):
        try:
            parsed = json.loads(value or b"")
        except json.JSONDecodeError:
            continue
        if parsed["user"] == FLUSH_USER:
            continue  # its own window stays open: nothing comes after it
        window = parsed["ts"] - parsed["ts"] % WINDOW_MS
        entry = totals.setdefault(f"{parsed['user']}@{window}", {"events": 0, "amount_cents": 0, "buys": 0})
        entry["events"] += 1
        entry["amount_cents"] += parsed["amount_cents"]
        entry["buys"] += parsed["action"] == "buy"
    return totals


@dataclass
class Measurements:
    batches: int
    input_rows: int
    first_batch_s: float
    batch_latency_s: list[float]  # triggerExecution of the data batches after the first
    rows_per_s: float
    wall_rows_per_s: float
    catch_up_s: float
    live_batch_s: list[float]  # triggerExecution of the small live micro-batches
    live_visible_s: list[float]  # produce -> the micro-batch holding the burst completed



def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))] if ordered else float("nan")


def run(args: argparse.Namespace, bootstrap: str, workdir: Path) -> bool:
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from minikafka.pipeline import MiniKafkaDataSource
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    source, sink = f"{args.prefix}-events", f"{args.prefix}-user-totals"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(source, args.partitions, 1), NewTopic(sink, 2, 1)]).values():
        future.result(30)
    started = time.monotonic()
    feed(bootstrap, source, args.events)
    print(f"fed {args.events} events (+1000 transactional, 500 of them aborted, + malformed) into {source} "
          f"in {time.monotonic() - started:.1f}s")

    spark = (SparkSession.builder.master(args.master).appName("minikafka-example")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.host", "127.0.0.1").config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(MiniKafkaDataSource)
    events = (spark.readStream.format("minikafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", source).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger)).load())
    totals = (events.selectExpr(f"from_json(CAST(value AS STRING), '{EVENT_SCHEMA}') AS e")
              .where("e.id IS NOT NULL AND e.user IS NOT NULL")
              .selectExpr("e.*", "timestamp_millis(e.ts) AS event_time")
              .withWatermark("event_time", "2 minutes")
              .groupBy(F.window("event_time", "1 minute"), "user")
              .agg(F.count("*").alias("events"), F.sum("amount_cents").alias("amount_cents"),
                   F.sum(F.when(F.col("action") == "buy", 1).otherwise(0)).alias("buys"))
              .selectExpr("concat(user, '@', unix_millis(window.start)) AS key",
                          "to_json(named_struct('user', user, 'window_start', window.start, 'events', events, "
                          "'amount_cents', amount_cents, 'buys', buys)) AS value"))
    query = (totals.writeStream.format("minikafka").outputMode("append")
             .option("kafka.bootstrap.servers", bootstrap).option("topic", sink).option("sink.mode", args.mode)
             .option("sink.transactionalIdPrefix", f"{args.prefix}-job")
             .option("checkpointLocation", str(workdir / "checkpoint")).start())
    expected = expected_totals(bootstrap, source)
    started = time.monotonic()
    query.processAllAvailable()
    # The windows closed by the last batch's watermark are written by one more (no-data) batch.
    deadline = time.monotonic() + 120
    while len(read_committed(bootstrap, sink)) < len(expected) and time.monotonic() < deadline:
        if query.exception() is not None:
            break
        query.awaitTermination(1)  # returns early if the query dies
    catch_up_s = time.monotonic() - started
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    live_batch_s, live_visible_s = live_bursts(query, bootstrap, source, args.events, args.live_bursts)
    query.stop()
    spark.stop()

    data = progress
    durations = [p["durationMs"]["triggerExecution"] / 1000 for p in data]
    input_rows = sum(p["numInputRows"] for p in data)
    measured = Measurements(
        batches=len(data), input_rows=input_rows, first_batch_s=durations[0], batch_latency_s=durations[1:],
        rows_per_s=sum(p["numInputRows"] for p in data[1:]) / max(1e-9, sum(durations[1:])),
        wall_rows_per_s=input_rows / catch_up_s, catch_up_s=catch_up_s, live_batch_s=live_batch_s,
        live_visible_s=live_visible_s)
    # The feed's plain events and its committed transaction, not the aborted one.
    return report(bootstrap, sink, measured, expected, expected_events=args.events + 500)


def live_bursts(query: Any, bootstrap: str, source: str, count: int, bursts: int,
                size: int = 100) -> tuple[list[float], list[float]]:
    """Bursts of `size` events once the query has caught up: the micro-batch latency of a live stream.

    Their event time lies between the watermark and the flush event, so they are neither late (dropped)
    nor able to move the watermark: their minutes stay open and the output does not change.
    """
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    origin = flush_ts(count) - 60_000
    assert bursts * size * STEP_MS < 60_000, "live events must stay before the flush event"
    batch_s, visible_s = [], []
    for burst in range(bursts):
        last = query.lastProgress
        before = last["batchId"] if last else -1
        for i in range(size):
            live = {**event(i), "user": f"live-{i % 10}", "ts": origin + (burst * size + i) * STEP_MS}
            producer.produce(source, json.dumps(live).encode())
        producer.flush(10)
        sent = time.monotonic()
        while True:
            last = query.lastProgress
            if last and last["batchId"] > before and last["numInputRows"] > 0:
                break
            if time.monotonic() - sent > 60 or query.exception() is not None:
                raise RuntimeError(f"live burst {burst} was not processed: {query.exception()}")
            time.sleep(0.01)  # polling Spark's progress; nothing to block on
        visible_s.append(time.monotonic() - sent)
        batch_s.append(last["durationMs"]["triggerExecution"] / 1000)
    return batch_s, visible_s


def report(bootstrap: str, sink: str, m: Measurements, expected: dict[str, dict[str, int]],
           expected_events: int) -> bool:
    output = read_committed(bootstrap, sink)
    written: dict[str, dict[str, int]] = {}
    for key, value in output:
        assert key is not None and value is not None
        parsed = json.loads(value)
        written[key.decode()] = {k: parsed[k] for k in ("events", "amount_cents", "buys")}
    checks = {
        "each (user, minute) total written exactly once": len(output) == len(written),
        "the totals equal those computed from the input without Spark": written == expected,
        "every committed event counted once, the aborted ones not at all":
            sum(t["events"] for t in written.values()) == expected_events,
    }
    steady = m.batch_latency_s
    print(f"\nmicro-batches with data: {m.batches}, input rows: {m.input_rows}, "
          f"caught up and written in {m.catch_up_s:.1f}s")
    print(f"first micro-batch (Python workers start): {m.first_batch_s:.2f}s")
    if steady:
        print(f"micro-batch latency after the first: median {statistics.median(steady):.3f}s, "
              f"p95 {percentile(steady, 0.95):.3f}s, max {max(steady):.3f}s")
    print(f"throughput: {m.rows_per_s:,.0f} rows/s in micro-batch time (after the first), "
          f"{m.wall_rows_per_s:,.0f} rows/s wall clock (incl. the first batch)")
    if m.live_batch_s:
        print(f"live stream, {len(m.live_batch_s)} bursts of 100 events: micro-batch median "
              f"{statistics.median(m.live_batch_s):.3f}s (max {max(m.live_batch_s):.3f}s); produce -> micro-batch "
              f"committed median {statistics.median(m.live_visible_s):.3f}s (max {max(m.live_visible_s):.3f}s)")
    print(f"output: {len(output)} records in {sink} ({len(expected)} expected)")
    for name, ok in checks.items():
        print(f"  [{'ok' if ok else 'FAILED'}] {name}")
    return all(checks.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", help="an existing broker; default: start minikafka on a free port")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--max-offsets-per-trigger", type=int, default=20_000)
    parser.add_argument("--mode", choices=("task", "driver"), default="task")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--live-bursts", type=int, default=10, help="small bursts after catching up (latency)")
    parser.add_argument("--prefix", default=f"example-{int(time.time())}")
    args = parser.parse_args(argv)
    if shutil.which("java") is None:
        print("Spark needs Java 17: apt-get install -y openjdk-17-jre-headless", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="minikafka-pipeline-"))
    try:
        if args.bootstrap:
            ok = run(args, args.bootstrap, workdir)
        else:
            with local_broker(workdir) as bootstrap:
                print(f"minikafka broker on {bootstrap}, data in {workdir / 'data'}")
                ok = run(args, bootstrap, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print("verification passed" if ok else "verification FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
