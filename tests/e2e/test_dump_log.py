"""`minikafka dump-log` on the files a broker wrote while real clients (confluent-kafka) ran a
committed and an aborted transaction and a consumer group committed offsets."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from minikafka.coordinator.hashing import partition_for
from minikafka.testing import Broker

from tests.support.clients import create_topic, transactional_producer
from tests.support.names import unique_topic

GROUP = "dump-group"
TRANSACTIONAL_ID = "dump-tid"
DEFAULT_COORDINATOR_PARTITIONS = 50  # offsets.topic.num.partitions, transaction.state.log.num.partitions
SEGMENT = "00000000000000000000"

BATCH = re.compile(
    r"baseOffset: (?P<base>\d+) lastOffset: (?P<last>\d+) count: 1 baseSequence: (?P<seq>-?\d+) "
    r"lastSequence: (?P=seq) producerId: (?P<pid>-?\d+) producerEpoch: (?P<epoch>-?\d+) partitionLeaderEpoch: 0 "
    r"isTransactional: (?P<txn>true|false) isControl: (?P<control>true|false) deleteHorizonMs: OptionalLong.empty "
    r"position: (?P<position>\d+) CreateTime: (?P<ts>\d+) size: (?P<size>\d+) magic: 2 compresscodec: none "
    r"crc: \d+ isvalid: true")


def dump_log(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "minikafka.broker", "dump-log", *args], capture_output=True,
                          text=True, timeout=60, check=False)


def run_clients(broker: Broker, topic: str) -> None:
    """Offsets 0-2 plain records, 3 a committed record, 4 its COMMIT marker, 5 an aborted record, 6 ABORT."""
    create_topic(broker.bootstrap_servers, topic, 1, {"index.interval.bytes": "100"})
    plain = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0, "enable.idempotence": False})
    for i in range(3):
        plain.produce(topic, key=f"k{i}".encode(), value=f"plain-{i}".encode(), headers=[("h1", b"x"), ("h2", None)])
        assert plain.flush(10) == 0
    producer = transactional_producer(broker.bootstrap_servers, TRANSACTIONAL_ID)
    producer.begin_transaction()
    producer.produce(topic, value=b"committed")
    producer.commit_transaction(15)
    producer.begin_transaction()
    producer.produce(topic, value=b"aborted")
    assert producer.flush(15) == 0  # the record reaches the log before the abort
    producer.abort_transaction(15)

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": GROUP, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([topic])
    values = []
    deadline = time.monotonic() + 20
    while len(values) < 4 and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None:
            if message.error():
                raise KafkaException(message.error())
            values.append(message.value())
    assert values == [b"plain-0", b"plain-1", b"plain-2", b"committed"]
    consumer.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False)
    consumer.close()


def test_dump_log_reads_what_the_broker_wrote(broker: Broker) -> None:
    topic = unique_topic("dump")
    run_clients(broker, topic)
    assert broker.stop() == 0  # a clean close seals the time index and writes the producer snapshot
    partition = broker.data_dir / f"{topic}-0"
    files = [partition / f"{SEGMENT}{suffix}" for suffix in (".log", ".index", ".timeindex", ".txnindex")]
    files.append(partition / "00000000000000000007.snapshot")

    result = dump_log("--print-data-log", "--files", ",".join(str(f) for f in files))
    assert (result.returncode, result.stderr) == (0, "")
    lines = result.stdout.splitlines()
    assert lines[:2] == [f"Dumping {files[0]}", "Log starting offset: 0"]
    log_lines = lines[2:16]
    matches = [BATCH.fullmatch(line) for line in log_lines[0::2]]
    assert all(matches), log_lines
    batches = [match.groupdict() for match in matches if match is not None]
    positions = 0
    for offset, batch in enumerate(batches):
        assert (int(batch["base"]), int(batch["last"])) == (offset, offset)
        assert int(batch["position"]) == positions, "each position is the bytes of the batches before it"
        positions += int(batch["size"])
    assert positions == files[0].stat().st_size
    records = log_lines[1::2]
    ts = [batch["ts"] for batch in batches]
    for i in range(3):
        assert batches[i]["pid"] == "-1" and batches[i]["txn"] == "false"
        assert records[i] == (f"| offset: {i} CreateTime: {ts[i]} keySize: 2 valueSize: 7 sequence: -1 "
                              f"headerKeys: [h1,h2] key: k{i} payload: plain-{i}")
    pid, epoch = batches[3]["pid"], batches[3]["epoch"]
    assert int(pid) >= 0
    expected = [("false", "0", f"| offset: 3 CreateTime: {ts[3]} keySize: -1 valueSize: 9 sequence: 0 headerKeys: [] "
                                "payload: committed"),
                ("true", "-1", f"| offset: 4 CreateTime: {ts[4]} keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
                               "endTxnMarker: COMMIT coordinatorEpoch: 0"),
                ("false", "1", f"| offset: 5 CreateTime: {ts[5]} keySize: -1 valueSize: 7 sequence: 1 headerKeys: [] "
                               "payload: aborted"),
                ("true", "-1", f"| offset: 6 CreateTime: {ts[6]} keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
                               "endTxnMarker: ABORT coordinatorEpoch: 0")]
    for offset, (control, seq, record) in enumerate(expected, start=3):
        batch = batches[offset]
        assert (batch["pid"], batch["epoch"], batch["txn"], batch["control"], batch["seq"]) == (
            pid, epoch, "true", control, seq)
        assert records[offset] == record
    assert log_lines[8] == (
        f"baseOffset: 4 lastOffset: 4 count: 1 baseSequence: -1 lastSequence: -1 producerId: {pid} "
        f"producerEpoch: {epoch} partitionLeaderEpoch: 0 isTransactional: true isControl: true "
        f"deleteHorizonMs: OptionalLong.empty position: {batches[4]['position']} CreateTime: {ts[4]} "
        f"size: 78 magic: 2 compresscodec: none crc: {log_lines[8].rsplit('crc: ', 1)[1]}")

    rest = lines[16:]
    index_end = rest.index(f"Dumping {files[2]}")
    assert rest[0] == f"Dumping {files[1]}"
    by_last_offset = {int(b["last"]): int(b["position"]) for b in batches}
    index_lines = rest[1:index_end]
    assert index_lines, "index.interval.bytes=100 puts entries in the index"
    for line in index_lines:
        entry = re.fullmatch(r"offset: (\d+) position: (\d+)", line)
        assert entry is not None, line
        assert by_last_offset[int(entry[1])] == int(entry[2]), "an entry is a batch's last offset and its position"
    txn_start = rest.index(f"Dumping {files[3]}")
    time_lines = rest[index_end + 1 : txn_start]
    assert time_lines[-1] == f"timestamp: {max(int(t) for t in ts)} offset: 6", "sealed at close with the max"
    assert rest[txn_start:] == [
        f"Dumping {files[3]}",
        f"version: 0 producerId: {pid} firstOffset: 5 lastOffset: 6 lastStableOffset: 7",
        f"Dumping {files[4]}",
        f"producerId: {pid} producerEpoch: {epoch} coordinatorEpoch: 0 currentTxnFirstOffset: OptionalLong.empty "
        f"lastTimestamp: {ts[6]} firstSequence: 1 lastSequence: 1 lastOffset: 5 offsetDelta: 0 timestamp: {ts[6]}",
    ]

    checked = dump_log("--verify-index-only", "--files", f"{files[1]},{files[2]}")
    assert (checked.returncode, checked.stdout, checked.stderr) == (
        0, f"Dumping {files[1]}\nDumping {files[2]}\n", "")
    sane = dump_log("--index-sanity-check", "--files", f"{files[1]},{files[2]}")
    assert sane.stdout.splitlines()[1::2] == [f"{files[1]} passed sanity check.", f"{files[2]} passed sanity check."]

    as_json = dump_log("--deep-iteration", "--json", "--files", str(files[0]))
    events = [json.loads(line) for line in as_json.stdout.splitlines()]
    markers = [e for e in events if e["type"] == "record" and "endTxnMarker" in e]
    assert [(m["offset"], m["endTxnMarker"], m["coordinatorEpoch"]) for m in markers] == [
        (4, "COMMIT", 0), (6, "ABORT", 0)]

    offsets_dir = broker.data_dir / f"__consumer_offsets-{partition_for(GROUP, DEFAULT_COORDINATOR_PARTITIONS)}"
    offsets = dump_log("--offsets-decoder", "--files", str(offsets_dir / f"{SEGMENT}.log"))
    assert (offsets.returncode, offsets.stderr) == (0, "")
    commits = [line for line in offsets.stdout.splitlines() if '"type":"1"' in line]
    assert len(commits) == 1
    assert re.fullmatch(
        r"\| offset: \d+ CreateTime: (\d+) keySize: \d+ valueSize: 24 sequence: -1 headerKeys: \[\] "
        r'key: \{"type":"1","data":\{"group":"dump-group","topic":"' + re.escape(topic) + r'","partition":0\}\} '
        r'payload: \{"version":"3","data":\{"offset":4,"leaderEpoch":-1,"metadata":"","commitTimestamp":\1\}\}',
        commits[0]), commits[0]
    groups = [line for line in offsets.stdout.splitlines() if '"type":"2"' in line]
    assert groups and f'"subscription":{{"topics":["{topic}"]' in groups[0]
    assert f'"assignment":{{"assignedPartitions":[{{"topic":"{topic}","partitions":[0]}}]' in groups[0]

    txn_dir = broker.data_dir / f"__transaction_state-{partition_for(TRANSACTIONAL_ID, DEFAULT_COORDINATOR_PARTITIONS)}"
    txn = dump_log("--transaction-log-decoder", "--files", str(txn_dir / f"{SEGMENT}.log"))
    assert (txn.returncode, txn.stderr) == (0, "")
    payloads = [line for line in txn.stdout.splitlines() if line.startswith("| offset: ")]
    key = f'key: {{"type":"0","data":{{"transactionalId":"{TRANSACTIONAL_ID}"}}}}'
    assert all(key in line for line in payloads)
    statuses = [int(status) for line in payloads for status in re.findall(r'"transactionStatus":(\d+)', line)]
    assert statuses == [0, 1, 2, 4, 1, 3, 5], "Empty, Ongoing, PrepareCommit, CompleteCommit, ..., CompleteAbort"
    assert re.search(
        r'payload: \{"version":"0","data":\{"producerId":' + pid + ',"producerEpoch":' + epoch
        + r',"transactionTimeoutMs":60000,"transactionStatus":5,"transactionPartitions":\[\],'
        r'"transactionLastUpdateTimestampMs":\d+,"transactionStartTimestampMs":\d+\}\}$', payloads[-1]), payloads[-1]


def test_dump_log_of_a_damaged_segment(broker: Broker, tmp_path: Path) -> None:
    topic = unique_topic("dumpbad")
    create_topic(broker.bootstrap_servers, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for i in range(2):
        producer.produce(topic, value=f"v{i}".encode())
        assert producer.flush(10) == 0
    assert broker.stop() == 0
    segment = (broker.data_dir / f"{topic}-0" / f"{SEGMENT}.log").read_bytes()
    torn = tmp_path / f"{SEGMENT}.log"
    torn.write_bytes(segment[:-3])
    result = dump_log("--files", f"{torn},{tmp_path / 'gone.index'}")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    lines = result.stdout.splitlines()
    assert lines[2].startswith("baseOffset: 0 lastOffset: 0 count: 1 ") and lines[2].endswith(" isvalid: true")
    assert lines[3] == f"Found {len(segment) // 2 - 3} invalid bytes at the end of {torn.name}"
    assert lines[4] == f"Dumping {tmp_path / 'gone.index'}"
    assert result.stderr == (f"minikafka dump-log: {tmp_path / 'gone.index'}: For input string: \"gone\" "
                             "(not a segment base offset)\n")
