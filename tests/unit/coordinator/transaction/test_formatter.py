"""`__transaction_state` records printed as Kafka's TransactionLogMessageFormatter prints them, and the
`minikafka txn-log` dump of a data directory."""

from __future__ import annotations

import io
import json
from pathlib import Path

from minikafka.coordinator.hashing import partition_for
from minikafka.coordinator.transaction.log import encode_key, encode_value, formatter_json
from minikafka.coordinator.transaction.state import TxnMetadata, TxnState
from minikafka.protocol.records import ControlType, Record, build_batch, build_control_batch
from minikafka.tools.txn_log import dump, partition_dirs


def line(key: bytes | None, value: bytes | None) -> str:
    return json.dumps(formatter_json(key, value), separators=(",", ":"))


def test_empty_state_prints_like_the_seed_dump() -> None:
    # The shape of the InitProducerId record in shared/seeds/001 (Kafka 4's formatter output).
    meta = TxnMetadata("ash-2", 0, 46, 60000, TxnState.EMPTY, txn_last_update_timestamp=1767075679951)
    assert line(encode_key("ash-2"), encode_value(meta)) == (
        '{"key":{"type":0,"data":{"transactionalId":"ash-2"}},"value":{"version":0,"data":{"producerId":0,'
        '"producerEpoch":46,"transactionTimeoutMs":60000,"transactionStatus":0,"transactionPartitions":null,'
        '"transactionLastUpdateTimestampMs":1767075679951,"transactionStartTimestampMs":-1}}}')


def test_ongoing_state_lists_topics_with_their_partition_ids() -> None:
    meta = TxnMetadata("ash-2", 0, 46, 60000, TxnState.ONGOING, frozenset({("ash-1", 0), ("sha-1", 0), ("sha-1", 2)}),
                       txn_start_timestamp=1767075681310, txn_last_update_timestamp=1767075682881)
    printed = formatter_json(encode_key("ash-2"), encode_value(meta))
    assert printed is not None
    assert printed["value"] == {"version": 0, "data": {
        "producerId": 0, "producerEpoch": 46, "transactionTimeoutMs": 60000, "transactionStatus": 1,
        "transactionPartitions": [{"topic": "ash-1", "partitionIds": [0]}, {"topic": "sha-1", "partitionIds": [0, 2]}],
        "transactionLastUpdateTimestampMs": 1767075682881, "transactionStartTimestampMs": 1767075681310}}


def test_v1_prints_tagged_fields_only_when_not_default() -> None:
    plain = TxnMetadata("t", 5, 1, 2000, TxnState.COMPLETE_COMMIT, frozenset(), txn_start_timestamp=1,
                        txn_last_update_timestamp=2)
    printed = formatter_json(encode_key("t"), encode_value(plain, version=1))
    assert printed is not None and printed["value"]["version"] == 1  # type: ignore[index]
    assert not {"previousProducerId", "nextProducerId", "clientTransactionVersion"} & set(
        printed["value"]["data"])  # type: ignore[index]
    rotated = TxnMetadata("t", 6, 0, 2000, TxnState.EMPTY, last_producer_id=5, txn_last_update_timestamp=3)
    data = formatter_json(encode_key("t"), encode_value(rotated, version=1))["value"]["data"]  # type: ignore[index]
    assert data["previousProducerId"] == 5 and "nextProducerId" not in data


def test_tombstone_and_keyless_records() -> None:
    assert line(encode_key("gone"), None) == '{"key":{"type":0,"data":{"transactionalId":"gone"}},"value":null}'
    assert formatter_json(None, b"anything") is None


def test_dump_reads_segments_and_skips_control_batches_and_torn_tails(tmp_path: Path) -> None:
    wanted, other = "dump-me", "someone-else"
    partition = partition_for(wanted, 50)
    directory = tmp_path / f"__transaction_state-{partition}"
    directory.mkdir()
    states = [TxnMetadata(wanted, 7, 0, 1000, TxnState.EMPTY, txn_last_update_timestamp=1),
              TxnMetadata(wanted, 7, 0, 1000, TxnState.ONGOING, frozenset({("out", 0)}), txn_start_timestamp=2,
                          txn_last_update_timestamp=2)]
    batches = bytearray()
    for offset, meta in enumerate(states):
        batches += build_batch([Record(encode_key(wanted), encode_value(meta), (), offset)], base_offset=offset)
    batches += build_control_batch(producer_id=9, producer_epoch=0, control_type=ControlType.COMMIT,
                                   coordinator_epoch=0, timestamp=5, base_offset=2)
    batches += build_batch([Record(encode_key(other), None, (), 3)], base_offset=3)
    torn = build_batch([Record(encode_key(wanted), None, (), 4)], base_offset=4)
    (directory / "00000000000000000000.log").write_bytes(bytes(batches) + torn[: len(torn) // 2])

    out = io.StringIO()
    assert dump(partition_dirs(tmp_path), out, wanted) == 2
    statuses = [json.loads(text)["value"]["data"]["transactionStatus"] for text in out.getvalue().splitlines()]
    assert statuses == [0, 1]
    everything = io.StringIO()
    assert dump(partition_dirs(tmp_path), everything) == 3
    assert json.loads(everything.getvalue().splitlines()[-1]) == {
        "key": {"type": 0, "data": {"transactionalId": other}}, "value": None}
