"""The minikafka data source as a reader: batch reads, read_committed, streaming progress and restarts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Producer
from minikafka.testing import Broker
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from tests.support.names import unique_topic

from .helpers import Record, create_topics, produce, read_topic

pytestmark = pytest.mark.spark

SPARK_KAFKA_SCHEMA = StructType([
    StructField("key", BinaryType()), StructField("value", BinaryType()), StructField("topic", StringType()),
    StructField("partition", IntegerType()), StructField("offset", LongType()),
    StructField("timestamp", TimestampType()), StructField("timestampType", IntegerType()),
    StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                 StructField("value", BinaryType())]))),
])


def spark_records(df: DataFrame) -> list[Record]:
    """Rows as the reference reader's records; the timestamp compared in epoch milliseconds."""
    rows = df.selectExpr("*", "unix_millis(timestamp) AS millis").collect()
    return sorted(Record(r.topic, r.partition, r.offset, r.key, r.value,
                         tuple((h.key, h.value) for h in (r.headers or ())), r.millis, r.timestampType)
                  for r in rows)


def reader(spark: SparkSession, broker: Broker, **options: str) -> DataFrame:
    return spark.read.format("minikafka").option("kafka.bootstrap.servers",
                                                 broker.bootstrap_servers).options(**options).load()


def txn_producer(broker: Broker) -> Producer:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": unique_topic("src-tid"),
                         "linger.ms": 2})
    producer.init_transactions(15)
    return producer


def test_batch_read_matches_plain_consumer(spark: SparkSession, broker: Broker) -> None:
    prefix = unique_topic("batch")
    main, other = f"{prefix}-main", f"{prefix}-other"
    create_topics(broker.bootstrap_servers, **{main: 3, other: 1})
    produce(broker.bootstrap_servers, main, [(f"k{i % 11}".encode(), f"v{i}".encode()) for i in range(900)])
    produce(broker.bootstrap_servers, main, [(None, b"no-key"), (b"no-value", None)], partition=1,
            headers=[("h1", b"x"), ("h2", b"")])
    produce(broker.bootstrap_servers, other, [(b"o", f"other-{i}".encode()) for i in range(25)])
    # Committed transactions put markers between records: offsets with no record behind them.
    producer = txn_producer(broker)
    for round_ in range(3):
        producer.begin_transaction()
        for p in range(3):
            producer.produce(main, f"txn-{round_}-{p}".encode(), partition=p)
        producer.commit_transaction(15)

    df = reader(spark, broker, subscribe=main)
    assert df.schema == SPARK_KAFKA_SCHEMA
    expected = read_topic(broker.bootstrap_servers, main)
    assert len(expected) == 900 + 2 + 9
    got = spark_records(df)
    assert got == expected
    assert df.rdd.getNumPartitions() == 3, "one Spark partition per topic-partition"

    # subscribePattern covers both topics; like Java's Pattern.matches it must match the whole name.
    by_pattern = spark_records(reader(spark, broker, subscribePattern=f"{prefix}-.*"))
    assert by_pattern == sorted(expected + read_topic(broker.bootstrap_servers, other))
    assert spark_records(reader(spark, broker, subscribePattern=prefix)) == []

    # JSON offsets with Spark's -2 (earliest) and -1 (latest).
    starting = json.dumps({main: {"0": -2, "1": 10, "2": -1}})
    ending = json.dumps({main: {"0": 5, "1": 20, "2": -1}})
    sliced = spark_records(reader(spark, broker, subscribe=main, startingOffsets=starting, endingOffsets=ending))
    assert [(r.partition, r.offset) for r in sliced] == [(0, o) for o in range(5)] + [(1, o) for o in range(10, 20)]
    assert sliced == [r for r in expected if (r.partition == 0 and r.offset < 5) or
                      (r.partition == 1 and 10 <= r.offset < 20)]


def test_read_committed_drops_aborted_records(spark: SparkSession, broker: Broker) -> None:
    topic = unique_topic("rc")
    create_topics(broker.bootstrap_servers, **{topic: 2})
    producer = txn_producer(broker)
    plain = Producer({"bootstrap.servers": broker.bootstrap_servers})

    def transaction(tag: str, commit: bool) -> None:
        producer.begin_transaction()
        for i in range(10):
            producer.produce(topic, f"{tag}-{i}".encode(), partition=i % 2)
        producer.flush(15)  # the records reach the log before an abort
        (producer.commit_transaction if commit else producer.abort_transaction)(15)

    transaction("c1", commit=True)
    transaction("a1", commit=False)
    plain.produce(topic, b"plain-1", partition=0)
    plain.flush(10)
    transaction("c2", commit=True)
    transaction("a2", commit=False)
    # An open transaction, then a plain record after it: read_committed stops at the open one (the LSO).
    producer.begin_transaction()
    producer.produce(topic, b"open-0", partition=0)
    producer.produce(topic, b"open-1", partition=1)
    producer.flush(15)
    plain.produce(topic, b"plain-after-open", partition=0)
    plain.flush(10)

    committed = spark_records(reader(spark, broker, subscribe=topic))
    uncommitted = spark_records(reader(spark, broker, subscribe=topic, **{"kafka.isolation.level": "read_uncommitted"}))
    values = sorted(r.value for r in committed)
    assert values == sorted([f"c1-{i}".encode() for i in range(10)] + [f"c2-{i}".encode() for i in range(10)]
                            + [b"plain-1"])
    assert committed == read_topic(broker.bootstrap_servers, topic, "read_committed")
    assert uncommitted == read_topic(broker.bootstrap_servers, topic, "read_uncommitted")
    assert {b"a1-0", b"a2-9", b"open-0", b"open-1", b"plain-after-open"} <= {r.value for r in uncommitted}
    assert len(uncommitted) == 10 * 4 + 1 + 2 + 1

    producer.commit_transaction(15)
    after = sorted(r.value for r in spark_records(reader(spark, broker, subscribe=topic)))
    assert after == sorted([*values, b"open-0", b"open-1", b"plain-after-open"])


def test_streaming_read_advances_and_resumes_from_checkpoint(spark: SparkSession, broker: Broker,
                                                             tmp_path: Path) -> None:
    topic = unique_topic("stream")
    create_topics(broker.bootstrap_servers, **{topic: 2})
    produce(broker.bootstrap_servers, topic, [(f"k{i}".encode(), f"first-{i}".encode()) for i in range(100)])
    seen: list[tuple[int, int, int, bytes]] = []  # (batch id, partition, offset, value)

    def collect(batch: DataFrame, batch_id: int) -> None:
        seen.extend((batch_id, r.partition, r.offset, r.value) for r in batch.collect())

    def run() -> list[dict]:
        stream = (spark.readStream.format("minikafka").option("kafka.bootstrap.servers", broker.bootstrap_servers)
                  .option("subscribe", topic).option("startingOffsets", "earliest")
                  .option("maxOffsetsPerTrigger", "30").load())
        query = (stream.writeStream.foreachBatch(collect)
                 .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
        try:
            query.processAllAvailable()
            return [p for p in query.recentProgress if p["numInputRows"] > 0]
        finally:
            query.stop()

    first = run()
    assert sorted(v for *_, v in seen) == sorted(f"first-{i}".encode() for i in range(100))
    assert len(first) >= 4 and all(p["numInputRows"] <= 30 for p in first), "maxOffsetsPerTrigger=30"
    assert sum(p["numInputRows"] for p in first) == 100
    ends = json.loads(first[-1]["sources"][0]["endOffset"])
    assert {p: ends[topic][str(p)] for p in (0, 1)} == {p: sum(1 for s in seen if s[1] == p) for p in (0, 1)}

    # While the query is down: more records, including an aborted transaction and a committed one.
    produce(broker.bootstrap_servers, topic, [(None, f"second-{i}".encode()) for i in range(40)])
    producer = txn_producer(broker)
    for commit in (False, True):
        producer.begin_transaction()
        for i in range(6):
            producer.produce(topic, f"{'kept' if commit else 'dropped'}-{i}".encode(), partition=i % 2)
        producer.flush(15)
        (producer.commit_transaction if commit else producer.abort_transaction)(15)
    first_batches = {b for b, *_ in seen}
    seen_before = len(seen)

    second = run()
    resumed = seen[seen_before:]
    assert min(b for b, *_ in resumed) > max(first_batches), "the restarted query continues the batch ids"
    assert sorted(v for *_, v in resumed) == sorted([f"second-{i}".encode() for i in range(40)]
                                                    + [f"kept-{i}".encode() for i in range(6)])
    coordinates = [(p, o) for _, p, o, _ in seen]
    assert len(coordinates) == len(set(coordinates)) == 146, "nothing read twice across the restart"
    assert all(p["numInputRows"] <= 30 for p in second)
