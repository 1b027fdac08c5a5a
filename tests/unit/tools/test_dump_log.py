"""`minikafka dump-log` on hand-built segment files: Kafka's DumpLogSegments lines, exactly."""

from __future__ import annotations

import io
import json
import os
import random
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from minikafka.coordinator.group.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    encode_group_value,
    encode_key,
    encode_offset_value,
)
from minikafka.coordinator.transaction import log as txn_log
from minikafka.coordinator.transaction.state import TxnMetadata, TxnState
from minikafka.protocol.records import (
    Compression,
    ControlType,
    Record,
    build_batch,
    build_control_batch,
    crc32c,
    set_partition_leader_epoch,
)
from minikafka.tools.dump_log import main

BASE = "00000000000000000000"

# Three batches of a real `kafka-dump-log.sh --print-data-log --deep-iteration` run (the seed post
# 001_a29a3fe58ce78abc): a transaction of Kafka 4.3's producer and its COMMIT marker.
SEED_LINES = [
    "baseOffset: 399 lastOffset: 399 count: 1 baseSequence: 398 lastSequence: 398 producerId: 0 producerEpoch: 46 "
    "partitionLeaderEpoch: 0 isTransactional: true isControl: false deleteHorizonMs: OptionalLong.empty "
    "position: 32276 CreateTime: 1767075688671 size: 81 magic: 2 compresscodec: none crc: 2720694595 isvalid: true",
    "| offset: 399 CreateTime: 1767075688671 keySize: -1 valueSize: 13 sequence: 398 headerKeys: [] "
    "payload: Hello World99",
    "baseOffset: 400 lastOffset: 400 count: 1 baseSequence: 399 lastSequence: 399 producerId: 0 producerEpoch: 46 "
    "partitionLeaderEpoch: 0 isTransactional: true isControl: false deleteHorizonMs: OptionalLong.empty "
    "position: 32357 CreateTime: 1767075688678 size: 81 magic: 2 compresscodec: none crc: 2996530180 isvalid: true",
    "| offset: 400 CreateTime: 1767075688678 keySize: -1 valueSize: 13 sequence: 399 headerKeys: [] "
    "payload: Hello World99",
    "baseOffset: 401 lastOffset: 401 count: 1 baseSequence: -1 lastSequence: -1 producerId: 0 producerEpoch: 46 "
    "partitionLeaderEpoch: 0 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty "
    "position: 32438 CreateTime: 1767075688688 size: 78 magic: 2 compresscodec: none crc: 1889618563 isvalid: true",
    "| offset: 401 CreateTime: 1767075688688 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
    "endTxnMarker: COMMIT coordinatorEpoch: 0",
]


def run(*args: str) -> tuple[int, list[str], list[str]]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(args), out, err)
    return status, out.getvalue().splitlines(), err.getvalue().splitlines()


def epoch0(batch: bytes) -> bytes:
    """The leader stamps its epoch (0 on a fresh partition) after the CRC, as minikafka and Kafka do."""
    stamped = bytearray(batch)
    set_partition_leader_epoch(stamped, 0, 0)
    return bytes(stamped)


def crc_of(batch: bytes) -> int:
    return int(struct.unpack_from(">I", batch, 17)[0])


def txn_batch(offset: int, value: bytes, ts: int, seq: int) -> bytes:
    return epoch0(build_batch([Record(None, value, timestamp=ts)], base_offset=offset, producer_id=0,
                              producer_epoch=46, base_sequence=seq, transactional=True))


def test_batches_of_the_seed_read_exactly_as_kafka_prints_them(tmp_path: Path) -> None:
    # 399 earlier one-record batches fill the 32276 bytes before offset 399, as in the seed's log.
    filler = [txn_batch(i, b"Hello World9" + (b"9" if i < 356 else b""), 1767075680000 + i, i - 1)
              for i in range(399)]
    assert sum(len(b) for b in filler) == 32276
    seed = [txn_batch(399, b"Hello World99", 1767075688671, 398), txn_batch(400, b"Hello World99", 1767075688678, 399),
            epoch0(build_control_batch(producer_id=0, producer_epoch=46, control_type=ControlType.COMMIT,
                                       coordinator_epoch=0, timestamp=1767075688688, base_offset=401))]
    log = tmp_path / f"{BASE}.log"
    log.write_bytes(b"".join(filler + seed))
    status, out, err = run("--files", str(log), "--print-data-log", "--deep-iteration")
    assert (status, err) == (0, [])
    assert out[:2] == [f"Dumping {log}", "Log starting offset: 0"]
    assert len(out) == 2 + 2 * 402
    assert out[-6:] == SEED_LINES


def test_compressed_batch_with_keys_headers_and_an_abort_marker(tmp_path: Path) -> None:
    data = epoch0(build_batch(
        [Record(b"k1", b"v1", (("h1", b"x"), ("h2", None)), 1000), Record(b"k2", None, (), 1005)],
        base_offset=10, producer_id=7, producer_epoch=2, base_sequence=5, compression=Compression.GZIP))
    marker = epoch0(build_control_batch(producer_id=7, producer_epoch=2, control_type=ControlType.ABORT,
                                        coordinator_epoch=3, timestamp=1010, base_offset=12))
    log = tmp_path / "00000000000000000010.log"
    log.write_bytes(data + marker)
    status, out, err = run("--files", str(log), "--print-data-log")
    # Kafka's deep-iteration state starts at -1 in every file, so a segment not at offset 0 reports it.
    assert (status, err) == (0, [f"Non-consecutive offsets in {log.absolute()}", "  -1 is followed by 10"])
    assert out == [
        f"Dumping {log}",
        "Log starting offset: 10",
        "baseOffset: 10 lastOffset: 11 count: 2 baseSequence: 5 lastSequence: 6 producerId: 7 producerEpoch: 2 "
        "partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
        f"position: 0 CreateTime: 1005 size: {len(data)} magic: 2 compresscodec: gzip crc: {crc_of(data)} "
        "isvalid: true",
        "| offset: 10 CreateTime: 1000 keySize: 2 valueSize: 2 sequence: 5 headerKeys: [h1,h2] key: k1 payload: v1",
        "| offset: 11 CreateTime: 1005 keySize: 2 valueSize: -1 sequence: 6 headerKeys: [] key: k2",
        "baseOffset: 12 lastOffset: 12 count: 1 baseSequence: -1 lastSequence: -1 producerId: 7 producerEpoch: 2 "
        "partitionLeaderEpoch: 0 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty "
        f"position: {len(data)} CreateTime: 1010 size: {len(marker)} magic: 2 compresscodec: none "
        f"crc: {crc_of(marker)} isvalid: true",
        "| offset: 12 CreateTime: 1010 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
        "endTxnMarker: ABORT coordinatorEpoch: 3",
    ]
    assert run("--files", str(log))[2] == [], "shallow iteration does not look at record offsets"


def test_shallow_iteration_and_skip_record_metadata(tmp_path: Path) -> None:
    data = build_batch([Record(b"k", b"v", (), 5)], base_offset=0, log_append_time=True)
    marker = build_control_batch(producer_id=1, producer_epoch=0, control_type=ControlType.COMMIT,
                                 coordinator_epoch=0, timestamp=6, base_offset=1)
    log = tmp_path / f"{BASE}.log"
    log.write_bytes(data + marker)
    status, out, _ = run("--files", str(log))
    assert status == 0 and len(out) == 4 and out[2].startswith("baseOffset: 0 lastOffset: 0 count: 1 ")
    assert " partitionLeaderEpoch: -1 " in out[2] and " LogAppendTime: 5 " in out[2]
    status, out, _ = run("--files", str(log), "--print-data-log", "--skip-record-metadata")
    assert out[3:] == ["| key: k payload: v", out[4], ""], "a control record prints an empty line, as Kafka's"
    assert out[4].startswith("baseOffset: 1 ")


def test_offsets_decoder_prints_kafkas_offsets_message_parser_json(tmp_path: Path) -> None:
    subscription = struct.pack(">hi", 1, 1) + struct.pack(">h", 5) + b"topic" + struct.pack(">i", -1) \
        + struct.pack(">i", 1) + struct.pack(">h", 5) + b"topic" + struct.pack(">ii", 1, 0)
    assignment = struct.pack(">hi", 0, 1) + struct.pack(">h", 5) + b"topic" + struct.pack(">iii", 2, 0, 1) \
        + struct.pack(">i", 2) + b"ud"
    group = GroupValue("consumer", 3, "range", "m-1", 1700000000000, (
        MemberValue("m-1", None, "client", "/127.0.0.1", 300000, 45000, subscription, assignment),))
    records = [
        (encode_key(OffsetKey("g", "topic", 0)), encode_offset_value(OffsetValue(42, 0, "meta", 1700000000001))),
        (encode_key(GroupKey("g")), encode_group_value(group)),
        (encode_key(OffsetKey("g", "topic", 1)), None),
        (struct.pack(">h", 11) + b"whatever", b"x"),  # ShareGroupMetadataKey: not minikafka's
        (encode_key(OffsetKey("g", "topic", 2)), b"\x00\x03\x00"),
    ]
    log = tmp_path / f"{BASE}.log"
    log.write_bytes(build_batch([Record(k, v, (), 1700000000002) for k, v in records]))
    status, out, err = run("--files", str(log), "--offsets-decoder", "--skip-record-metadata")
    assert (status, err) == (0, [])
    assert out[3:] == [
        '| key: {"type":"1","data":{"group":"g","topic":"topic","partition":0}} payload: {"version":"3",'
        '"data":{"offset":42,"leaderEpoch":0,"metadata":"meta","commitTimestamp":1700000000001}}',
        '| key: {"type":"2","data":{"group":"g"}} payload: {"version":"3","data":{"protocolType":"consumer",'
        '"generation":3,"protocol":"range","leader":"m-1","currentStateTimestamp":1700000000000,"members":[{'
        '"memberId":"m-1","groupInstanceId":null,"clientId":"client","clientHost":"/127.0.0.1",'
        '"rebalanceTimeout":300000,"sessionTimeout":45000,"subscription":{"topics":["topic"],"userData":null,'
        '"ownedPartitions":[{"topic":"topic","partitions":[0]}]},"assignment":{"assignedPartitions":[{'
        '"topic":"topic","partitions":[0,1]}],"userData":"dWQ="}}]}}',
        '| key: {"type":"1","data":{"group":"g","topic":"topic","partition":1}} payload: <DELETE>',
        "| key: Unknown record type 11 at offset 3, skipping.",
        "| key: Error at offset 4, skipping. __consumer_offsets record is truncated",
    ]


def test_transaction_log_decoder(tmp_path: Path) -> None:
    meta = TxnMetadata("tid", 4000, 3, 60000, TxnState.ONGOING, frozenset({("t", 1), ("t", 0)}), 1700000000000,
                       1700000000005)
    records = [(txn_log.encode_key("tid"), txn_log.encode_value(meta)), (txn_log.encode_key("tid"), None)]
    log = tmp_path / f"{BASE}.log"
    log.write_bytes(build_batch([Record(k, v, (), 1700000000006) for k, v in records]))
    status, out, _ = run("--files", str(log), "--transaction-log-decoder")
    assert status == 0
    assert out[3] == (
        "| offset: 0 CreateTime: 1700000000006 keySize: 7 valueSize: 52 sequence: -1 headerKeys: [] "
        'key: {"type":"0","data":{"transactionalId":"tid"}} payload: {"version":"0","data":{"producerId":4000,'
        '"producerEpoch":3,"transactionTimeoutMs":60000,"transactionStatus":1,"transactionPartitions":[{'
        '"topic":"t","partitionIds":[0,1]}],"transactionLastUpdateTimestampMs":1700000000005,'
        '"transactionStartTimestampMs":1700000000000}}')
    assert out[4].endswith(' key: {"type":"0","data":{"transactionalId":"tid"}} payload: <DELETE>')


def _segment(tmp_path: Path) -> tuple[Path, list[bytes]]:
    """Three batches at offsets 0-1, 2, 3-5 with max timestamps 101, 200, 305."""
    batches = [
        build_batch([Record(None, b"a", (), 100), Record(None, b"b", (), 101)], base_offset=0),
        build_batch([Record(None, b"c", (), 200)], base_offset=2),
        build_batch([Record(None, b"d", (), 300), Record(None, b"e", (), 305), Record(None, b"f", (), 301)],
                    base_offset=3),
    ]
    log = tmp_path / f"{BASE}.log"
    log.write_bytes(b"".join(batches))
    return log, batches


def test_index_and_time_index_entries(tmp_path: Path) -> None:
    log, batches = _segment(tmp_path)
    index = log.with_suffix(".index")
    index.write_bytes(struct.pack(">ii", 2, len(batches[0])) + struct.pack(">ii", 5, len(batches[0]) + len(batches[1])))
    time_index = log.with_suffix(".timeindex")
    time_index.write_bytes(struct.pack(">qi", 200, 2) + struct.pack(">qi", 305, 5))
    status, out, err = run("--files", f"{index},{time_index}")
    assert (status, err) == (0, [])
    assert out == [f"Dumping {index}", f"offset: 2 position: {len(batches[0])}",
                   f"offset: 5 position: {len(batches[0]) + len(batches[1])}",
                   f"Dumping {time_index}", "timestamp: 200 offset: 2", "timestamp: 305 offset: 5"]
    assert run("--files", f"{index},{time_index}", "--verify-index-only") == (
        0, [f"Dumping {index}", f"Dumping {time_index}"], [])
    assert run("--files", f"{index},{time_index}", "--index-sanity-check")[1] == [
        f"Dumping {index}", f"{index} passed sanity check.", f"Dumping {time_index}",
        f"{time_index} passed sanity check."]


def test_index_problems_are_reported_as_kafka_does(tmp_path: Path) -> None:
    log, batches = _segment(tmp_path)
    index = log.with_suffix(".index")
    # offset 1 is not the last offset of the batch at position 0; offset 4 not of the one it points to
    index.write_bytes(struct.pack(">ii", 1, 0) + struct.pack(">ii", 4, len(batches[0]) + len(batches[1])))
    time_index = log.with_suffix(".timeindex")
    # 150 is not batch 0-1's max timestamp, 120 goes backwards, offset 4 is inside the batch ending at 5
    time_index.write_bytes(struct.pack(">qi", 150, 1) + struct.pack(">qi", 120, 2) + struct.pack(">qi", 400, 4))
    status, out, err = run("--files", f"{index},{time_index}", "--verify-index-only")
    assert status == 1
    assert out == [f"Dumping {index}", f"Dumping {time_index}"]
    assert err == [
        f"Mismatches in :{index.absolute()}",
        "  Index offset: 4, log offset: 5",
        f"Found timestamp mismatch in :{time_index.absolute()}",
        "  Index timestamp: 150, log timestamp: 101",
        "  Index timestamp: 120, log timestamp: 200",
        f"Found out of order timestamp in :{time_index.absolute()}",
        "  Index timestamp: 120, Previously indexed timestamp: 150",
        "The following indexed offsets are not found in the log.",
        "Indexed offset: 4, found log offset: 5",
    ]


def test_index_sanity_check_failures(tmp_path: Path) -> None:
    log, _ = _segment(tmp_path)
    index = log.with_suffix(".index")
    index.write_bytes(struct.pack(">ii", 2, 0) + b"\x00\x00\x00")
    time_index = log.with_suffix(".timeindex")
    time_index.write_bytes(struct.pack(">qi", 300, 5) + struct.pack(">qi", 200, 2))
    status, out, err = run("--files", f"{index},{time_index}", "--index-sanity-check")
    assert status == 1 and out == [f"Dumping {index}", f"Dumping {time_index}"]
    assert err == [
        f"minikafka dump-log: {index}: Index file {index.absolute()} is corrupt, found 11 bytes which is neither "
        "positive nor a multiple of 8",
        f"minikafka dump-log: {time_index}: Corrupt time index found, time index file ({time_index.absolute()}) "
        "has non-zero size but the last timestamp is 200 which is less than the first timestamp 300",
    ]
    index.write_bytes(b"")
    assert run("--files", str(index)) == (0, [f"Dumping {index}", f"{index} is empty."], [])


def _snapshot(entries: list[tuple[int, ...]]) -> bytes:
    body = struct.pack(">i", len(entries)) + b"".join(struct.pack(">qhiqiqiq", *e) for e in entries)
    return struct.pack(">hI", 1, crc32c(body)) + body


def test_producer_snapshot(tmp_path: Path) -> None:
    snapshot = tmp_path / "00000000000000000042.snapshot"
    snapshot.write_bytes(_snapshot([(7, 2, 9, 40, 3, 1700000000000, 5, 38), (8, 0, -1, -1, 0, 1700000000001, -1, -1),
                                    (9, 1, 1, 41, 3, 1700000000002, -1, -1)]))
    status, out, err = run("--files", str(snapshot))
    assert (status, err) == (0, [])
    assert out == [
        f"Dumping {snapshot}",
        "producerId: 7 producerEpoch: 2 coordinatorEpoch: 5 currentTxnFirstOffset: OptionalLong[38] "
        "lastTimestamp: 1700000000000 firstSequence: 6 lastSequence: 9 lastOffset: 40 offsetDelta: 3 "
        "timestamp: 1700000000000",
        "producerId: 8 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 1700000000001",
        "producerId: 9 producerEpoch: 1 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 1700000000002 firstSequence: 2147483646 lastSequence: 1 lastOffset: 41 offsetDelta: 3 "
        "timestamp: 1700000000002",
    ]
    data = bytearray(snapshot.read_bytes())
    data[-1] ^= 1
    snapshot.write_bytes(bytes(data))
    stored = struct.unpack_from(">I", data, 2)[0]
    assert run("--files", str(snapshot)) == (1, [f"Dumping {snapshot}"], [
        f"minikafka dump-log: {snapshot}: Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored}. "
        f"Computed crc: {crc32c(bytes(data[6:]))}"])


def test_txn_index(tmp_path: Path) -> None:
    txn_index = tmp_path / f"{BASE}.txnindex"
    txn_index.write_bytes(struct.pack(">hqqqq", 0, 4, 10, 20, 21) + struct.pack(">hqqqq", 0, 5, 12, 22, 23))
    assert run("--files", str(txn_index)) == (0, [
        f"Dumping {txn_index}",
        "version: 0 producerId: 4 firstOffset: 10 lastOffset: 20 lastStableOffset: 21",
        "version: 0 producerId: 5 firstOffset: 12 lastOffset: 22 lastStableOffset: 23"], [])
    txn_index.write_bytes(struct.pack(">hqqqq", 0, 4, 10, 20, 21) + b"\x00\x00")
    status, out, err = run("--files", str(txn_index))
    assert status == 1 and len(out) == 2
    assert err == [f"minikafka dump-log: {txn_index}: 2 bytes after the last whole entry (entries are 34 bytes)"]
    txn_index.write_bytes(struct.pack(">hqqqq", 1, 4, 10, 20, 21))
    assert run("--files", str(txn_index))[2] == [
        f"minikafka dump-log: {txn_index}: Unexpected aborted transaction version 1 in transaction index "
        f"{txn_index.absolute()}, current version is 0"]


def test_bad_files_give_an_error_line_and_status_1(tmp_path: Path) -> None:
    log, batches = _segment(tmp_path)
    whole = log.read_bytes()
    truncated = tmp_path / "00000000000000000100.log"
    truncated.write_bytes(whole[:-5])
    status, out, err = run("--files", str(truncated))
    assert status == 1 and err == []
    assert out[-1] == f"Found {len(batches[2]) - 5} invalid bytes at the end of {truncated.name}"
    assert len(out) == 5, "the two whole batches are still printed"

    garbage = tmp_path / "00000000000000000200.log"
    garbage.write_bytes(b"\x00" * 8 + struct.pack(">i", 3) + b"\x00" * 20)
    assert run("--files", str(garbage)) == (1, [f"Dumping {garbage}", "Log starting offset: 200"], [
        f"minikafka dump-log: {garbage}: Found record size 3 smaller than minimum record overhead (14) in file "
        f"{garbage}."])

    flipped = tmp_path / "00000000000000000300.log"
    flipped.write_bytes(whole[:-1] + bytes([whole[-1] ^ 0xFF]))
    status, out, _ = run("--files", str(flipped))
    assert status == 1 and out[-1].endswith(" isvalid: false") and out[-2].endswith(" isvalid: true")

    missing = tmp_path / "00000000000000000400.log"
    named = tmp_path / "segment.log"
    named.write_bytes(whole)
    other = tmp_path / "notes.txt"
    status, out, err = run("--files", f"{missing},{named},{other},{log}")
    assert status == 1
    # Kafka prints the start offset (from the name) before it opens the file
    assert out[:4] == [f"Dumping {missing}", "Log starting offset: 400", f"Dumping {named}", f"Dumping {other}"]
    assert out[4:6] == [f"Dumping {log}", "Log starting offset: 0"]
    assert err == [f"minikafka dump-log: {missing}: no such file {missing}",
                   f'minikafka dump-log: {named}: For input string: "segment" (not a segment base offset)',
                   f"Ignoring unknown file {other}"]


def test_mutated_segments_never_raise(tmp_path: Path) -> None:
    """Garbage anywhere in a segment ends in output or an error line, never an exception."""
    log, _ = _segment(tmp_path)
    marker = build_control_batch(producer_id=1, producer_epoch=0, control_type=ControlType.COMMIT,
                                 coordinator_epoch=0, timestamp=6, base_offset=6)
    gzip_batch = build_batch([Record(b"k", b"v" * 50, (), 7)], base_offset=7, compression=Compression.GZIP)
    whole = log.read_bytes() + marker + gzip_batch
    rng = random.Random(12)
    for attempt in range(150):
        data = bytearray(whole)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        log.write_bytes(bytes(data[: rng.randint(0, len(data))] if attempt % 5 == 0 else data))
        for decoder in ("--print-data-log", "--offsets-decoder", "--transaction-log-decoder"):
            status, _, _ = run("--files", str(log), decoder)
            assert status in (0, 1)
    log.write_bytes(whole)
    for suffix in (".index", ".timeindex", ".txnindex", ".snapshot"):
        for _ in range(40):
            target = log.with_suffix(suffix)
            target.write_bytes(bytes(rng.randrange(256) for _ in range(rng.choice((0, 8, 12, 24, 34, 40, 68)))))
            for option in ("--deep-iteration", "--verify-index-only", "--index-sanity-check"):
                status, _, _ = run("--files", str(target), option)
                assert status in (0, 1)


def test_json_output(tmp_path: Path) -> None:
    data = build_batch([Record(b"k", b"v", (("h", b"1"),), 5)], base_offset=0, producer_id=3, producer_epoch=1,
                       base_sequence=0)
    marker = build_control_batch(producer_id=3, producer_epoch=1, control_type=ControlType.COMMIT,
                                 coordinator_epoch=2, timestamp=6, base_offset=1)
    log = tmp_path / f"{BASE}.log"
    log.write_bytes(data + marker)
    status, out, err = run("--files", str(log), "--print-data-log", "--json")
    assert (status, err) == (0, [])
    events = [json.loads(line) for line in out]
    assert events[0] == {"type": "dumping", "file": str(log)}
    assert events[1] == {"type": "logStartOffset", "file": str(log), "offset": 0}
    assert events[2] == {
        "type": "batch", "file": str(log), "baseOffset": 0, "lastOffset": 0, "count": 1, "baseSequence": 0,
        "lastSequence": 0, "producerId": 3, "producerEpoch": 1, "partitionLeaderEpoch": -1,
        "isTransactional": False, "isControl": False, "deleteHorizonMs": None, "position": 0,
        "timestampType": "CreateTime", "maxTimestamp": 5, "size": len(data), "magic": 2, "compresscodec": "none",
        "crc": crc_of(data), "isvalid": True}
    assert events[3] == {"type": "record", "file": str(log), "offset": 0, "timestampType": "CreateTime",
                         "timestamp": 5, "keySize": 1, "valueSize": 1, "sequence": 0, "headerKeys": ["h"],
                         "key": "k", "payload": "v"}
    assert events[4]["isControl"] is True and events[4]["position"] == len(data)
    assert events[5] == {"type": "record", "file": str(log), "offset": 1, "timestampType": "CreateTime",
                         "timestamp": 6, "keySize": 4, "valueSize": 6, "sequence": -1, "headerKeys": [],
                         "endTxnMarker": "COMMIT", "coordinatorEpoch": 2}
    assert len(events) == 6
    missing = tmp_path / "00000000000000000001.index"
    status, out, err = run("--files", str(missing), "--json")
    assert status == 1 and json.loads(out[-1])["type"] == "error" and len(err) == 1


def test_unsupported_options_are_refused() -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--files", "x.log", "--cluster-metadata-decoder"], io.StringIO(), io.StringIO())
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit):
        main(["--files", "x.log", "--value-decoder-class", "com.example.AvroDecoder"], io.StringIO(), io.StringIO())


def test_command_line_entry_point_has_no_traceback(tmp_path: Path) -> None:
    garbage = tmp_path / f"{BASE}.log"
    garbage.write_bytes(os.urandom(64) + b"\x7f" * 4000)
    result = subprocess.run([sys.executable, "-m", "minikafka.broker", "dump-log", "--files", str(garbage),
                             "--print-data-log"], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    assert result.stdout.startswith(f"Dumping {garbage}\nLog starting offset: 0\n")


def test_max_bytes_reads_only_the_batches_that_fit(tmp_path: Path) -> None:
    log, batches = _segment(tmp_path)
    status, out, err = run("--files", str(log), "--max-bytes", str(len(batches[0]) + len(batches[1]) + 10))
    assert (status, err) == (0, [])
    assert [line.split(" lastOffset")[0] for line in out[2:]] == ["baseOffset: 0", "baseOffset: 2"]
    assert not any(line.startswith("Found ") for line in out), "Kafka counts no invalid bytes under --max-bytes"


# `kafka-dump-log.sh --offsets-decoder` of Kafka 3.9.2 on a `__consumer_offsets` segment, as a public
# quick-start post shows it: a console consumer's group and two offset commits. Rebuilt from the
# values it prints, the batches come out byte for byte (same sizes and CRCs).
KAFKA_OFFSETS_DUMP = [
    "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
    "partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 "
    "CreateTime: 1785773250466 size: 328 magic: 2 compresscodec: none crc: 4023593851 isvalid: true",
    '| offset: 0 CreateTime: 1785773250466 keySize: 11 valueSize: 247 sequence: -1 headerKeys: [] key: {"type":"2",'
    '"data":{"group":"group01"}} payload: {"version":"3","data":{"protocolType":"consumer","generation":1,'
    '"protocol":"range","leader":"console-consumer-e33d37af-ded5-41c1-aeb3-05d12b5df4bf",'
    '"currentStateTimestamp":1785773250437,"members":[{"memberId":"console-consumer-e33d37af-ded5-41c1-aeb3-'
    '05d12b5df4bf","groupInstanceId":null,"clientId":"console-consumer","clientHost":"/127.0.0.1",'
    '"rebalanceTimeout":300000,"sessionTimeout":45000,"subscription":{"topics":["test"],"userData":null,'
    '"ownedPartitions":[],"generationId":-1,"rackId":null},"assignment":{"assignedPartitions":[{"topic":"test",'
    '"partitions":[0,1]}],"userData":null}}]}}',
    "baseOffset: 1 lastOffset: 2 count: 2 baseSequence: 0 lastSequence: 1 producerId: -1 producerEpoch: -1 "
    "partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
    "position: 328 CreateTime: 1785773255530 size: 165 magic: 2 compresscodec: none crc: 641063234 isvalid: true",
    '| offset: 1 CreateTime: 1785773255530 keySize: 21 valueSize: 24 sequence: 0 headerKeys: [] key: {"type":"1",'
    '"data":{"group":"group01","topic":"test","partition":0}} payload: {"version":"3","data":{"offset":5,'
    '"leaderEpoch":0,"metadata":"","commitTimestamp":1785773255526}}',
    '| offset: 2 CreateTime: 1785773255530 keySize: 21 valueSize: 24 sequence: 1 headerKeys: [] key: {"type":"1",'
    '"data":{"group":"group01","topic":"test","partition":1}} payload: {"version":"3","data":{"offset":0,'
    '"leaderEpoch":-1,"metadata":"","commitTimestamp":1785773255526}}',
]


def test_offsets_decoder_matches_a_real_kafka_dump(tmp_path: Path) -> None:
    member = "console-consumer-e33d37af-ded5-41c1-aeb3-05d12b5df4bf"
    # what the Java consumer sends: ConsumerProtocolSubscription v3, ConsumerProtocolAssignment v3
    subscription = struct.pack(">hih4siiih", 3, 1, 4, b"test", -1, 0, -1, -1)
    assignment = struct.pack(">hih4siiii", 3, 1, 4, b"test", 2, 0, 1, -1)
    group = GroupValue("consumer", 1, "range", member, 1785773250437, (
        MemberValue(member, None, "console-consumer", "/127.0.0.1", 300000, 45000, subscription, assignment),))
    commits = [Record(encode_key(OffsetKey("group01", "test", partition)),
                      encode_offset_value(OffsetValue(offset, epoch, "", 1785773255526)), (), 1785773255530)
               for partition, offset, epoch in ((0, 5, 0), (1, 0, -1))]
    log = tmp_path / f"{BASE}.log"
    log.write_bytes(epoch0(build_batch([Record(encode_key(GroupKey("group01")), encode_group_value(group), (),
                                               1785773250466)]))
                    + epoch0(build_batch(commits, base_offset=1, base_sequence=0)))
    assert run("--files", str(log), "--offsets-decoder") == (
        0, [f"Dumping {log}", "Log starting offset: 0", *KAFKA_OFFSETS_DUMP], [])


def test_print_data_log_matches_a_real_kafka_dump(tmp_path: Path) -> None:
    """`kafka-dump-log.sh --print-data-log` of Kafka 3.9.2 (same post): an idempotent producer's
    three-record batch and a second producer's batch."""
    first = build_batch([Record(None, value, (), ts) for value, ts in
                         ((b"a", 1785772164675), (b"b", 1785772164705), (b"c", 1785772164706))],
                        base_offset=0, producer_id=0, producer_epoch=0, base_sequence=0)
    second = build_batch([Record(None, b"ddd", (), 1785772812310)], base_offset=3, producer_id=1, producer_epoch=0,
                         base_sequence=0)
    log = tmp_path / f"{BASE}.log"
    log.write_bytes(epoch0(first) + epoch0(second))
    assert run("--files", str(log), "--print-data-log") == (0, [
        f"Dumping {log}",
        "Log starting offset: 0",
        "baseOffset: 0 lastOffset: 2 count: 3 baseSequence: 0 lastSequence: 2 producerId: 0 producerEpoch: 0 "
        "partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
        "position: 0 CreateTime: 1785772164706 size: 85 magic: 2 compresscodec: none crc: 4143386110 isvalid: true",
        "| offset: 0 CreateTime: 1785772164675 keySize: -1 valueSize: 1 sequence: 0 headerKeys: [] payload: a",
        "| offset: 1 CreateTime: 1785772164705 keySize: -1 valueSize: 1 sequence: 1 headerKeys: [] payload: b",
        "| offset: 2 CreateTime: 1785772164706 keySize: -1 valueSize: 1 sequence: 2 headerKeys: [] payload: c",
        "baseOffset: 3 lastOffset: 3 count: 1 baseSequence: 0 lastSequence: 0 producerId: 1 producerEpoch: 0 "
        "partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
        "position: 85 CreateTime: 1785772812310 size: 71 magic: 2 compresscodec: none crc: 4240895373 isvalid: true",
        "| offset: 3 CreateTime: 1785772812310 keySize: -1 valueSize: 3 sequence: 0 headerKeys: [] payload: ddd",
    ], [])


def test_kraft_checkpoint_names(tmp_path: Path) -> None:
    checkpoint = tmp_path / "00000000000000000010-0000000001.checkpoint"
    checkpoint.write_bytes(build_batch([Record(None, b"x", (), 1)], base_offset=0))
    status, out, _ = run("--files", str(checkpoint))
    assert (status, out[:2]) == (0, [f"Dumping {checkpoint}", "Snapshot end offset: 10, epoch: 1"])
    assert out[2].startswith("baseOffset: 0 lastOffset: 0 count: 1 ") and len(out) == 3
