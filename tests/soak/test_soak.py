"""The crash soak in short (`make soak` runs the long one): two kill -9 cycles come out clean, and every
check of the harness fires when the log or the ledger is made to disagree."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.support.broker_process import BrokerProcess

from .harness import (
    BROKER_OVERRIDES,
    EOS_OUTPUT,
    IDEMPOTENT_TOPIC,
    PLAIN_TOPIC,
    TXN_TOPIC,
    Ledger,
    Transaction,
    check,
    create_topics,
    read_topic,
    run_cycle,
    run_soak,
)

SEED = 20261123


def test_two_kill_9_cycles_lose_nothing(tmp_path: Path) -> None:
    lines: list[str] = []
    summary = run_soak(2, SEED, tmp_path, max_kill_delay_s=1.0, out=lines.append)
    report = "\n".join(lines)
    assert not summary.violations, report
    assert summary.cycles == 2, report
    assert set(summary.acked_by_role) == {"plain", "idempotent", "transactional"}, report
    assert summary.verified_last == summary.acked > 0, "every acknowledged record was found after the last kill"
    assert summary.transactions["committed"] > 0, report
    assert summary.eos_committed_offset > 0, "the pipeline committed input offsets"


def write(broker: BrokerProcess, topic: str, value: bytes) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": False})
    producer.produce(topic, value, partition=0)
    assert producer.flush(15) == 0


@pytest.fixture
def soak_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker run by the harness's own driver, as run_soak starts it (run_cycle kills it while it starts)."""
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    broker = BrokerProcess(tmp_path / "data", log_dir, BROKER_OVERRIDES).start()
    yield broker
    try:
        broker.stop()
    except Exception:
        broker.kill9()


def test_every_check_fires_on_a_disagreement(soak_broker: BrokerProcess) -> None:
    broker = soak_broker
    create_topics(broker.bootstrap)
    ledger = Ledger()
    result = run_cycle(broker, ledger, SEED, 1, max_kill_delay_s=0.5)
    assert not result.violations and result.verified == ledger.total_acked > 0

    plain = ledger.acked[(PLAIN_TOPIC, 0)]
    first = min(plain)
    plain[max(plain) + 1000] = b"never written"
    # the value acked at `first` of partition 0 claimed at another offset of partition 0: moved
    plain[first + 1] = plain[first]
    committed = [t for t in ledger.transactions.values() if t.outcome == "committed"]
    committed[0].outcome = "aborted"
    ledger.transactions["never-ran"] = Transaction([b"txn:never:0"], "committed")
    ledger.transactions["half"] = Transaction([*committed[1].values, b"txn:never:1"], "unknown")
    ledger.eos_committed_offset = 10**9

    idempotent_value = next(iter(read_topic(broker.bootstrap, IDEMPOTENT_TOPIC, "read_uncommitted")
                                 .records[0].values()))
    output_value = next(iter(read_topic(broker.bootstrap, EOS_OUTPUT, "read_committed").records[0].values()))
    write(broker, IDEMPOTENT_TOPIC, idempotent_value)
    write(broker, EOS_OUTPUT, output_value)
    write(broker, EOS_OUTPUT, b"not from the input")
    write(broker, TXN_TOPIC, b"not from a transaction")

    violations, _verified = check(broker.bootstrap, ledger)
    kinds = {kind for kind, _detail in violations}
    assert kinds == {"lost", "moved", "duplicate", "aborted_visible", "committed_lost", "partial_transaction",
                     "unexpected_record", "eos_offset_regressed", "eos_duplicate", "eos_beyond_committed_offset"}, \
        violations

    ledger.reused.append("soak-plain-0@0: b'a' then b'b'")
    ledger.eos_committed_offset = 0
    assert ("offset_reused", "soak-plain-0@0: b'a' then b'b'") in check(broker.bootstrap, ledger)[0]
