"""What the transaction coordinator writes: `__transaction_state` records and `minikafka txn-log`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from minikafka.coordinator.transaction.log import decode_key, decode_value, formatter_json


def states_of(records: list[tuple[bytes, bytes | None]]) -> list[str]:
    """State names of `__transaction_state` (key, value) records, "tombstone" for a null value."""
    return [value.state.display_name if value else "tombstone" for value in (decode_value(v) for _k, v in records)]


def assert_state_sequence(records: list[tuple[bytes, bytes | None]], transactional_id: str, topic: str) -> None:
    """One committed transaction on partition 0 of `topic`, as Kafka writes it to `__transaction_state`."""
    assert all(decode_key(key) == transactional_id for key, _value in records)
    assert states_of(records) == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
    data = [formatter_json(key, value)["value"]["data"] for key, value in records]  # type: ignore[index]
    assert [d["transactionStatus"] for d in data] == [0, 1, 2, 4]
    assert data[0]["transactionPartitions"] is None and data[0]["transactionStartTimestampMs"] == -1
    assert all(d["transactionPartitions"] == [{"topic": topic, "partitionIds": [0]}] for d in data[1:3])
    assert data[3]["transactionPartitions"] == [], "Complete* clears the partitions, as Kafka's prepareComplete"
    assert len({(d["producerId"], d["producerEpoch"]) for d in data}) == 1


def txn_log_lines(data_dir: Path, transactional_id: str) -> list[dict[str, object]]:
    """What `minikafka txn-log` prints for one transactional id, parsed."""
    out = subprocess.run([sys.executable, "-m", "minikafka.broker", "txn-log", "--data-dir", str(data_dir),
                          "--transactional-id", transactional_id], capture_output=True, text=True, timeout=30,
                         check=True).stdout
    return [json.loads(line) for line in out.splitlines()]
