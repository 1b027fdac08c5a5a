"""Fetches of big record sets, which the broker sends from its log files with sendfile (broker/wire/connection.py):
every client reads back exactly what was produced, batch after batch of several hundred KiB in two
partitions, with consumers whose fetch sizes cut the last batch of an answer short."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Producer
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaPythonTopicPartition
from minikafka.testing import Broker

from tests.support.clients import consume, create_topic
from tests.support.names import unique_topic

DEADLINE_S = 60.0
PARTITIONS = 2
VALUES_PER_PARTITION = 120
VALUE_BYTES = 20_000  # ~2.4 MB a partition, in batches up to batch.size
KCAT = shutil.which("kcat")
NODE = shutil.which("node")
JS_DIR = Path(__file__).parent / "js"
KAFKAJS_MISSING = NODE is None or not (JS_DIR / "node_modules" / "kafkajs").exists()


@pytest.fixture
def produced(broker: Broker) -> tuple[str, dict[int, list[bytes]]]:
    """A topic with random values produced in big batches; the values of each partition in order."""
    topic = unique_topic("big")
    create_topic(broker.bootstrap_servers, topic, PARTITIONS)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 200, "batch.size": 1_000_000,
                         "compression.type": "none", "message.max.bytes": 2_000_000})
    # Random, in hex: no two alike, and no newline in them for kcat's one value a line.
    values = {partition: [os.urandom(VALUE_BYTES // 2).hex().encode() for _ in range(VALUES_PER_PARTITION)]
              for partition in range(PARTITIONS)}
    for index in range(VALUES_PER_PARTITION):
        for partition in range(PARTITIONS):
            producer.produce(topic, values[partition][index], partition=partition)
    assert producer.flush(30) == 0
    return topic, values


def test_confluent_reads_big_batches_back(broker: Broker, produced: tuple[str, dict[int, list[bytes]]]) -> None:
    topic, values = produced
    received = consume(broker.bootstrap_servers, topic, PARTITIONS * VALUES_PER_PARTITION,
                       partitions=tuple(range(PARTITIONS)), timeout=DEADLINE_S)
    assert {partition: [r.value for r in received if r.partition == partition]
            for partition in range(PARTITIONS)} == values


def test_kafka_python_reads_big_batches_back(broker: Broker,
                                             produced: tuple[str, dict[int, list[bytes]]]) -> None:
    topic, values = produced
    # A partition fetch size below the data held: each answer ends in part of a batch.
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None, enable_auto_commit=False,
                             max_partition_fetch_bytes=1_500_000, fetch_max_bytes=3_000_000)
    consumer.assign([KafkaPythonTopicPartition(topic, partition) for partition in range(PARTITIONS)])
    consumer.seek_to_beginning()
    received: dict[int, list[bytes]] = {partition: [] for partition in range(PARTITIONS)}
    deadline = time.monotonic() + DEADLINE_S
    try:
        while sum(map(len, received.values())) < PARTITIONS * VALUES_PER_PARTITION and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=200).items():
                received[tp.partition].extend(record.value for record in records)
    finally:
        consumer.close()
    assert received == values


async def test_aiokafka_reads_big_batches_back(broker: Broker,
                                               produced: tuple[str, dict[int, list[bytes]]]) -> None:
    topic, values = produced
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None, enable_auto_commit=False,
                                max_partition_fetch_bytes=3_000_000)
    await consumer.start()
    received: dict[int, list[bytes]] = {partition: [] for partition in range(PARTITIONS)}
    try:
        partitions = [AioTopicPartition(topic, partition) for partition in range(PARTITIONS)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        async with asyncio.timeout(DEADLINE_S):
            while sum(map(len, received.values())) < PARTITIONS * VALUES_PER_PARTITION:
                for tp, records in (await consumer.getmany(timeout_ms=200)).items():
                    received[tp.partition].extend(record.value for record in records)  # type: ignore[misc]
    finally:
        await consumer.stop()
    assert received == values


@pytest.mark.kcat
@pytest.mark.skipif(KCAT is None and os.environ.get("CI") != "true", reason="kcat is not installed")
def test_kcat_reads_big_batches_back(broker: Broker, produced: tuple[str, dict[int, list[bytes]]]) -> None:
    topic, values = produced
    for partition in range(PARTITIONS):
        result = subprocess.run([KCAT or "kcat", "-b", broker.bootstrap_servers, "-C", "-t", topic, "-p",
                                 str(partition),
                                 "-o", "beginning", "-e", "-q", "-f", "%s\\n",
                                 "-X", "fetch.message.max.bytes=1000000"],
                                capture_output=True, timeout=DEADLINE_S, check=True)
        assert result.stdout.split(b"\n")[:-1] == values[partition]


@pytest.mark.kafkajs
@pytest.mark.skipif(KAFKAJS_MISSING and os.environ.get("CI") != "true", reason="kafkajs is not installed (make js)")
def test_kafkajs_reads_big_batches_back(broker: Broker, produced: tuple[str, dict[int, list[bytes]]]) -> None:
    topic, values = produced
    result = subprocess.run([NODE or "node", str(JS_DIR / "consume_values.js"), broker.bootstrap_servers, topic,
                             str(PARTITIONS * VALUES_PER_PARTITION), "1500000"],
                            capture_output=True, text=True, timeout=DEADLINE_S, check=False)
    output = json.loads(result.stdout or "{}")
    assert result.returncode == 0 and "error" not in output, (output, result.stderr)
    assert {int(partition): [value.encode() for value in read] for partition, read in output["partitions"].items()} \
        == values
