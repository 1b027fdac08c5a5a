"""SIGTERM ends `minikafka serve` with os._exit once the broker has stopped, skipping the interpreter's
teardown: what a clean stop leaves must all be there anyway. How fast it stops is measured by
bench/shutdown.py, not here."""

from __future__ import annotations

import json

from confluent_kafka import Producer
from minikafka.testing import Broker

from tests.support.clients import consume, create_topic
from tests.support.names import unique_topic


def test_sigterm_after_writes_leaves_a_clean_stop_behind(broker: Broker) -> None:
    """Exit code 0, the `broker stopped` line flushed to the log, the marker, the recovery point and the
    idempotent producer's snapshot on disk; the next start skips recovery."""
    topic = unique_topic("stop")
    create_topic(broker.bootstrap_servers, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True})
    for value in (b"a", b"b", b"c"):
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(15) == 0

    assert broker.stop() == 0

    last_line = json.loads(broker.run_log().splitlines()[-1])
    assert last_line["event"] == "broker stopped"
    assert (broker.data_dir / ".kafka_cleanshutdown").exists()
    assert (broker.data_dir / f"{topic}-0" / f"{3:020d}.snapshot").exists()
    assert f"{topic} 0 3" in (broker.data_dir / "recovery-point-offset-checkpoint").read_text().splitlines()
    broker.start()
    assert "recovered logs after unclean shutdown" not in broker.run_log()
    assert [r.value for r in consume(broker.bootstrap_servers, topic, 3)] == [b"a", b"b", b"c"]
