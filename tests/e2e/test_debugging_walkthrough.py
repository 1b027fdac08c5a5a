"""docs/debugging.md's walkthrough, step by step: a confluent-kafka commitTransaction that hangs, looked at
with the flight recorder, `minikafka transactions`, `minikafka dump-log`, the state the inspector shows
and /metrics, then released.

The hang is the one a user meets when the coordinator is still completing an earlier transaction: every
EndTxn is answered CONCURRENT_TRANSACTIONS (injected here with a fault rule), and librdkafka retries it
until its commit times out.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer

from tests.support.clients import create_topic
from tests.support.names import unique_topic
from tests.support.waiting import poll_until

from .test_trace import TracedBroker

pytestmark = pytest.mark.e2e

DEADLINE_S = 30.0


def _minikafka(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "minikafka.broker", *args], capture_output=True, text=True,
                          timeout=DEADLINE_S, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _admin(broker: TracedBroker, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    request = urllib.request.Request(f"http://{broker.admin}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(request, timeout=DEADLINE_S) as response:
        return json.loads(response.read())


def _table(text: str) -> list[dict[str, str]]:
    """Kafka's tab-separated tool output as rows keyed by its header."""
    header, *rows = [line.split("\t") for line in text.splitlines() if line.strip()]
    names = [name.strip() for name in header]
    return [dict(zip(names, (cell.strip() for cell in row), strict=False)) for row in rows]


def _batch_lines(log: Path) -> list[str]:
    return [line for line in _minikafka("dump-log", "--files", str(log)).splitlines()
            if line.startswith("baseOffset:")]


def test_a_hanging_commit_transaction_seen_through_every_tool(tmp_path: Path) -> None:
    broker = TracedBroker(tmp_path).start()
    try:
        topic = unique_topic("orders")
        transactional_id = unique_topic("order-writer")
        create_topic(broker.bootstrap_servers, topic, partitions=1)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": transactional_id,
                             "client.id": "order-service"})
        producer.init_transactions(DEADLINE_S)
        producer.begin_transaction()
        producer.produce(topic, key=b"o-1", value=b"paid")
        assert producer.flush(DEADLINE_S) == 0

        _admin(broker, "POST", "/faults", {"api": "EndTxn", "error": "CONCURRENT_TRANSACTIONS", "count": 100_000})
        outcome: list[BaseException | None] = []

        def commit() -> None:
            # librdkafka ends a commit that outlives its timeout with a retriable error; calling again resumes.
            # The steps below run several CLI processes meanwhile, so the commit is retried until a deadline
            # rather than a fixed number of times (a loaded machine made 20 tries of 2 s too few).
            deadline = time.monotonic() + 4 * DEADLINE_S
            while time.monotonic() < deadline:
                try:
                    producer.commit_transaction(2)
                    outcome.append(None)
                    return
                except KafkaException as exc:
                    if not exc.args[0].retriable():
                        outcome.append(exc)
                        return
            outcome.append(TimeoutError("commit never completed"))

        committer = threading.Thread(target=commit, daemon=True)
        committer.start()

        # 1. The trace: EndTxn again and again, each answered CONCURRENT_TRANSACTIONS.
        lines = broker.wait_lines(
            lambda lines: sum(line["api"] == "EndTxn" for line in lines) >= 3, "three EndTxn attempts")
        end_txns = [line for line in lines if line["api"] == "EndTxn"]
        assert {line["errors"] == ["CONCURRENT_TRANSACTIONS"] for line in end_txns} == {True}
        assert {(line["client_id"], line["request"]["transactional_id"], line["request"]["committed"])
                for line in end_txns} == {("order-service", transactional_id, True)}
        correlation_ids = [line["correlation_id"] for line in end_txns]
        assert correlation_ids == sorted(correlation_ids) and len(set(correlation_ids)) == len(correlation_ids)

        # 2. The coordinator: still Ongoing, with the partition in it.
        [described] = _table(_minikafka("transactions", "--bootstrap-server", broker.bootstrap_servers, "describe",
                                        "--transactional-id", transactional_id))
        assert (described["TransactionState"], described["TopicPartitions"]) == ("Ongoing", f"{topic}-0")

        # 3. The disk: the data batch is there, transactional, with no marker after it; the transaction log's
        # last record for the id is Ongoing (status 1), no PrepareCommit (2) was ever written.
        partition_log = broker.data_dir / f"{topic}-0" / "00000000000000000000.log"
        [data_batch] = _batch_lines(partition_log)
        assert "isTransactional: true isControl: false" in data_batch
        statuses = []
        logs = sorted(broker.data_dir.glob("__transaction_state-*/00000000000000000000.log"))
        dumped = _minikafka("dump-log", "--files", ",".join(map(str, logs)), "--transaction-log-decoder")
        for line in dumped.splitlines():
            if f'"transactionalId":"{transactional_id}"' in line:
                statuses.append(json.loads(line.split(" payload: ", 1)[1])["data"]["transactionStatus"])
        assert statuses[-1] == 1 and 2 not in statuses

        # 4. What the inspector shows (its page reads GET /state), and the metric of open transactions.
        state = _admin(broker, "GET", "/state")
        open_txn = state["transactions"][transactional_id]
        assert (open_txn["state"], open_txn["open"]) == ("Ongoing", True)
        partition = state["topics"][topic]["partitions"]["0"]
        assert (partition["last_stable_offset"], partition["log_end_offset"]) == (0, 1)
        with urllib.request.urlopen(f"http://{broker.admin}/metrics", timeout=DEADLINE_S) as response:
            metrics = response.read().decode()
        assert "minikafka_transactions_open 1.0" in metrics.splitlines()

        # 5. The coordinator "recovers": the commit goes through and the marker is on disk.
        _admin(broker, "DELETE", "/faults")
        committer.join(DEADLINE_S)
        assert outcome == [None]
        batches = poll_until(lambda: (lambda lines: lines if len(lines) == 2 else None)(_batch_lines(partition_log)),
                             timeout=DEADLINE_S, message="the COMMIT marker on disk")
        assert "isTransactional: true isControl: true" in batches[1]
        marker = _minikafka("dump-log", "--files", str(partition_log), "--print-data-log").splitlines()[-1]
        assert marker.endswith("endTxnMarker: COMMIT coordinatorEpoch: 0")
        answered = broker.wait_lines(lambda lines: any(line["api"] == "EndTxn" and not line["errors"]
                                                       for line in lines), "the EndTxn that succeeded")
        assert [line["errors"] for line in answered if line["api"] == "EndTxn"][-1] == []
    finally:
        broker.stop()
