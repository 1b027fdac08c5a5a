"""A real full disk under a real broker: the data dir is a 2 MiB tmpfs, filled up with a file.

Produce is refused with KAFKA_STORAGE_ERROR and leaves nothing half-written, what is on disk stays
readable, a group coordinator write is answered NOT_COORDINATOR, writes resume once space is freed,
and a broker stopped while the disk is full recovers every acknowledged record on restart.

Needs root to mount the tmpfs (these machines run tests as root); under CI=true a failed mount
fails the test instead of skipping it.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from minikafka.protocol.codec import decode_response, encode_request
from minikafka.protocol.errors import ErrorCode

from tests.support.brokers import process_broker
from tests.support.clients import consume, create_topic
from tests.support.names import unique_topic

DISK_BYTES = 2 * 1024 * 1024
# Larger than the slack a tmpfs page can leave at the end of the segment file, so the write
# needs space the full disk does not have.
BIG_VALUE = b"x" * 64 * 1024
FILL_CHUNK = 64 * 1024
COMMIT_METADATA_BYTES = 3000  # two of these outgrow any one page's slack (offset.metadata.max.bytes is 4096)


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(mount_point)],
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        reason = f"cannot mount a tmpfs here: {result.stderr.strip()}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill(disk: Path) -> Path:
    """Write a file until the filesystem is full; returns it (delete it to free the space)."""
    filler = disk / "filler"
    chunk = b"\0" * FILL_CHUNK
    with open(filler, "wb", buffering=0) as handle:
        for _ in range(DISK_BYTES // 512):  # bounded: far more chunks than the disk can hold
            try:
                handle.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
        else:
            raise AssertionError("the tmpfs never filled up")
        for size in (4096, 512, 1):  # the last partial chunks, so not even a page is left
            while True:
                try:
                    handle.write(b"\0" * size)
                except OSError:
                    break
    return filler


def produce(bootstrap: str, topic: str, values: list[bytes]) -> list[tuple[Any, int]]:
    """(error, offset) per value, from delivery reports; no retries, so an error is the broker's answer."""
    reports: list[tuple[Any, int]] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0, "linger.ms": 0,
                         "enable.idempotence": False, "message.timeout.ms": 15000})
    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=lambda err, msg: reports.append((err, msg.offset())))
        producer.flush(20)
    assert producer.flush(20) == 0
    return reports


def end_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "disk-faults-watermarks"})
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()
    return int(high)


def raw_round_trip(port: int, request: Any, api_key: int, version: int) -> Any:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(encode_request(1, request))
        header = sock.recv(4, socket.MSG_WAITALL)
        (size,) = struct.unpack(">i", header)
        body = b""
        while len(body) < size:
            chunk = sock.recv(size - len(body))
            assert chunk, "the broker closed the connection"
            body += chunk
    return decode_response(body, api_key, version)[1]


def commit_offset(port: int, group: str, topic: str, metadata: str = "") -> ErrorCode:
    request = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                  group_instance_id=None, topics=(OffsetCommitRequestTopic(name=topic, partitions=(
                                      OffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                                   committed_leader_epoch=-1,
                                                                   committed_metadata=metadata),)),))
    response = raw_round_trip(port, request, 8, 8)
    return ErrorCode(response.topics[0].partitions[0].error_code)


def test_full_disk_refuses_writes_keeps_reads_and_recovers(tiny_disk: Path, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    broker = process_broker(tiny_disk / "data", logs, {"offsets.topic.num.partitions": "1",
                                                        "transaction.state.log.num.partitions": "1"})
    broker.start()
    try:
        topic = unique_topic("disk")
        create_topic(broker.bootstrap_servers, topic)
        acked = [f"v{i}".encode() for i in range(20)]
        assert [err for err, _ in produce(broker.bootstrap_servers, topic, acked)] == [None] * 20
        # The group coordinator's topic exists before the disk fills (FindCoordinator creates it).
        found = raw_round_trip(broker.port, FindCoordinatorRequest(key_type=0, coordinator_keys=("g",)), 10, 4)
        assert found.coordinators[0].error_code == ErrorCode.none
        assert commit_offset(broker.port, "g", topic) == ErrorCode.none

        filler = fill(tiny_disk)
        [(error, _offset)] = produce(broker.bootstrap_servers, topic, [BIG_VALUE])
        assert error is not None and error.code() == KafkaError.KAFKA_STORAGE_ERROR
        assert end_offset(broker.bootstrap_servers, topic) == 20, "a failed append must not advance the log end"
        assert [r.value for r in consume(broker.bootstrap_servers, topic, 20)] == acked, "reads keep working"
        # A commit may still fit in the slack of the offsets segment's last page; two such cannot.
        commits = [commit_offset(broker.port, "g", topic, "m" * COMMIT_METADATA_BYTES) for _ in range(2)]
        assert commits[-1] == ErrorCode.not_coordinator and set(commits) <= {ErrorCode.none, ErrorCode.not_coordinator}

        filler.unlink()
        [(error, offset)] = produce(broker.bootstrap_servers, topic, [b"after"])
        assert (error, offset) == (None, 20), "writes resume, with no hole or torn batch before them"
        acked.append(b"after")

        # Full again, and stopped while full: the next start recovers whatever was acknowledged.
        filler = fill(tiny_disk)
        [(error, _offset)] = produce(broker.bootstrap_servers, topic, [BIG_VALUE])
        assert error is not None and error.code() == KafkaError.KAFKA_STORAGE_ERROR
        assert broker.stop() == 0
        filler.unlink()
        broker.start()
        assert [r.value for r in consume(broker.bootstrap_servers, topic, 21)] == acked
        assert end_offset(broker.bootstrap_servers, topic) == 21
        [(error, offset)] = produce(broker.bootstrap_servers, topic, [b"later"])
        assert (error, offset) == (None, 21)
        assert "Traceback" not in broker.logs(), "disk faults are expected errors, not crashes"
    finally:
        try:
            broker.stop()
        except Exception:
            broker.kill()
