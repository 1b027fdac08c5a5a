"""Debian's kcat (librdkafka 2.0.2): metadata, produce with keys/headers/compression, consume, offset query."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from confluent_kafka import Producer
from minikafka.testing import Broker

from tests.support.clients import consume, create_topic, transactional_producer
from tests.support.names import unique_topic

KCAT = shutil.which("kcat")
pytestmark = [pytest.mark.kcat, pytest.mark.skipif(KCAT is None, reason="kcat is not installed")]


def kcat(broker: Broker, *args: str, stdin: str | None = None) -> str:
    result = subprocess.run([KCAT or "kcat", "-b", broker.bootstrap_servers, *args], input=stdin, capture_output=True,
                            text=True, timeout=30, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_metadata_json(broker: Broker) -> None:
    topic = unique_topic("kcatmeta")
    create_topic(broker.bootstrap_servers, topic, 3)
    metadata = json.loads(kcat(broker, "-L", "-J"))
    assert metadata["brokers"] == [{"id": 1, "name": broker.bootstrap_servers}]
    [entry] = [t for t in metadata["topics"] if t["topic"] == topic]
    assert [p["partition"] for p in entry["partitions"]] == [0, 1, 2]
    assert all(p["leader"] == 1 for p in entry["partitions"])


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_and_consume(broker: Broker, codec: str) -> None:
    topic = unique_topic(f"kcat{codec}")
    lines = "".join(f"key{i}:value-{i}\n" for i in range(50))
    kcat(broker, "-P", "-t", topic, "-K:", "-z", codec, "-H", "origin=kcat", stdin=lines)
    out = kcat(broker, "-C", "-t", topic, "-o", "beginning", "-e", "-J")
    messages = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [(m["offset"], m["key"], m["payload"]) for m in messages] == [
        (i, f"key{i}", f"value-{i}") for i in range(50)]
    assert messages[0]["headers"] == ["origin", "kcat"]
    assert [r.value for r in consume(broker.bootstrap_servers, topic, 50)] == [f"value-{i}".encode() for i in range(50)]


def test_consume_from_offset(broker: Broker) -> None:
    topic = unique_topic("kcatoff")
    kcat(broker, "-P", "-t", topic, stdin="".join(f"m{i}\n" for i in range(10)))
    out = kcat(broker, "-C", "-t", topic, "-o", "7", "-e", "-f", "%o=%s\\n")
    assert out.splitlines() == ["7=m7", "8=m8", "9=m9"]


def test_offset_query_by_timestamp(broker: Broker) -> None:
    topic = unique_topic("kcatq")
    create_topic(broker.bootstrap_servers, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    base = 1_700_000_000_000
    for i in range(3):
        producer.produce(topic, value=b"x", timestamp=base + i * 1000)
    assert producer.flush(10) == 0
    out = kcat(broker, "-Q", "-t", f"{topic}:0:{base + 1500}")
    assert out.split() == [topic, "[0]", "offset", "2"]


def test_consumer_offsets_topic_holds_kafka_format_records(broker: Broker) -> None:
    """A committed offset is an OffsetCommitKey v1 / OffsetCommitValue v3 record any client can read."""
    import struct

    from confluent_kafka import Consumer, TopicPartition
    from minikafka.coordinator.hashing import partition_for

    topic = unique_topic("kcatco")
    group = unique_topic("kcatgroup")
    create_topic(broker.bootstrap_servers, topic)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(topic, 0, 42)], asynchronous=False)
    consumer.close()
    partition = partition_for(group, 50)
    # Length-prefixed output: binary keys and values may contain any byte, newlines included.
    out = subprocess.run([KCAT or "kcat", "-b", broker.bootstrap_servers, "-C", "-t", "__consumer_offsets", "-p",
                          str(partition), "-o", "beginning", "-e", "-f", "%K %S %k%s"],
                         capture_output=True, timeout=30, check=True).stdout
    records = []
    pos = 0
    while pos < len(out):
        key_len_text, _, rest = out[pos:].partition(b" ")
        value_len_text, _, _ = rest.partition(b" ")
        key_len, value_len = int(key_len_text), int(value_len_text)
        start = pos + len(key_len_text) + len(value_len_text) + 2
        key = out[start:start + max(key_len, 0)]
        value = out[start + max(key_len, 0):start + max(key_len, 0) + max(value_len, 0)]
        records.append((key, value))
        pos = start + max(key_len, 0) + max(value_len, 0)
    lines = [(k, v) for k, v in records if group.encode() in k and topic.encode() in k]
    assert lines, out
    key, value = lines[-1]
    expected_key = struct.pack(">hh", 1, len(group)) + group.encode() + struct.pack(">h", len(topic)) \
        + topic.encode() + struct.pack(">i", 0)
    assert key == expected_key
    version, offset, leader_epoch, metadata_length = struct.unpack_from(">hqih", value)
    assert (version, offset, metadata_length) == (3, 42, 0)
    assert leader_epoch == -1
    (commit_timestamp,) = struct.unpack_from(">q", value, 16)
    assert commit_timestamp > 1_600_000_000_000


def test_partition_headers_nulls_and_timestamps(broker: Broker) -> None:
    topic = unique_topic("kcathdr")
    create_topic(broker.bootstrap_servers, topic, 2)
    # -Z: an empty key or value is sent as NULL
    kcat(broker, "-P", "-t", topic, "-p", "1", "-K:", "-Z", "-H", "a=1", "-H", "a=2", "-H", "b=x",
         stdin="k1:v1\n:nokey\nk3:\n")
    out = kcat(broker, "-C", "-t", topic, "-p", "1", "-o", "beginning", "-e", "-J")
    messages = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [(m["partition"], m["offset"], m["key"], m["payload"]) for m in messages] == [
        (1, 0, "k1", "v1"), (1, 1, None, "nokey"), (1, 2, "k3", None)]
    assert all(m["headers"] == ["a", "1", "a", "2", "b", "x"] for m in messages)
    assert all(m["tstype"] == "create" and m["ts"] > 1_600_000_000_000 for m in messages)
    assert [(r.key, r.value) for r in consume(broker.bootstrap_servers, topic, 3, partitions=(1,))] == [
        (b"k1", b"v1"), (None, b"nokey"), (b"k3", None)]
    from confluent_kafka import Consumer, TopicPartition

    watermarks = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "w"})
    assert watermarks.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 0), "-p 1 wrote only to 1"
    watermarks.close()


def test_relative_and_end_offsets(broker: Broker) -> None:
    topic = unique_topic("kcatrel")
    create_topic(broker.bootstrap_servers, topic)
    kcat(broker, "-P", "-t", topic, stdin="".join(f"r{i}\n" for i in range(20)))
    out = kcat(broker, "-C", "-t", topic, "-p", "0", "-o", "-3", "-e", "-f", "%o:%s\\n")
    assert out.splitlines() == ["17:r17", "18:r18", "19:r19"]
    assert kcat(broker, "-C", "-t", topic, "-p", "0", "-o", "end", "-e", "-f", "%o:%s\\n") == ""
    # -c: stop after this many messages
    out = kcat(broker, "-C", "-t", topic, "-p", "0", "-o", "5", "-c", "2", "-f", "%o:%s\\n")
    assert out.splitlines() == ["5:r5", "6:r6"]


def test_offset_query_past_the_last_timestamp(broker: Broker) -> None:
    topic = unique_topic("kcatq2")
    create_topic(broker.bootstrap_servers, topic, 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    base = 1_700_000_000_000
    for i in range(4):
        producer.produce(topic, value=b"x", partition=i % 2, timestamp=base + i * 1000)
    assert producer.flush(10) == 0
    out = kcat(broker, "-Q", "-t", f"{topic}:0:{base + 500}", "-t", f"{topic}:1:{base + 99_000}")
    lines = sorted(line.split() for line in out.splitlines() if line.strip())
    assert lines == [[topic, "[0]", "offset", "1"], [topic, "[1]", "offset", "-1"]]


def test_read_committed_drops_aborted_and_ends_at_the_open_transaction(broker: Broker) -> None:
    topic = unique_topic("kcattxn")
    create_topic(broker.bootstrap_servers, topic)

    writer = transactional_producer(broker.bootstrap_servers, unique_topic("kcat-writer"))
    for value, commit in ((b"c1", True), (b"a1", False), (b"c2", True)):
        writer.begin_transaction()
        writer.produce(topic, value, partition=0)
        writer.flush(15)
        if commit:
            writer.commit_transaction(15)
        else:
            writer.abort_transaction(15)
    holder = transactional_producer(broker.bootstrap_servers, unique_topic("kcat-open"))
    holder.begin_transaction()
    holder.produce(topic, b"open", partition=0)
    holder.flush(15)
    plain = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    plain.produce(topic, b"after-open", partition=0)
    plain.flush(15)
    try:
        # -e: kcat exits at the end of the partition, which for read_committed is the last stable offset
        committed = kcat(broker, "-C", "-t", topic, "-o", "beginning", "-e", "-X", "isolation.level=read_committed",
                         "-f", "%s\\n")
        uncommitted = kcat(broker, "-C", "-t", topic, "-o", "beginning", "-e", "-X",
                           "isolation.level=read_uncommitted", "-f", "%s\\n")
    finally:
        holder.abort_transaction(15)
    assert committed.splitlines() == ["c1", "c2"]
    assert uncommitted.splitlines() == ["c1", "a1", "c2", "open", "after-open"]
