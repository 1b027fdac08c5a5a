"""min.insync.replicas is enforced on acks=all writes, as Kafka does: with `--nodes 3`, a topic that asks for
two in-sync replicas refuses acks=all produces with NOT_ENOUGH_REPLICAS (and Kafka's message) once only its
leader is up, takes acks=1 meanwhile, and takes acks=all again when a follower is back in the ISR."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from minikafka.testing import Broker

DEADLINE_S = 30.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Broker]:
    with Broker(nodes=3, data_dir=tmp_path / "data") as broker:
        yield broker


def _produce_one(bootstrap: str, topic: str, acks: str) -> KafkaError | None:
    """The delivery error of one record (None when it was written); no retries, so the broker's answer shows."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "retries": 0, "enable.idempotence": False,
                         "message.timeout.ms": 20_000})
    reports: list[KafkaError | None] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        reports.append(error)

    producer.produce(topic, b"value", partition=0, on_delivery=delivered)
    assert producer.flush(DEADLINE_S) == 0
    assert len(reports) == 1
    return reports[0]


def test_acks_all_needs_min_insync_replicas_in_the_isr(cluster: Broker) -> None:
    topic = f"min-isr-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(DEADLINE_S)
    [partition] = [p for p in cluster.cluster()["partitions"] if p["topic"] == topic]
    leader = partition["leader"]
    followers = [node for node in partition["replicas"] if node != leader]
    bootstrap = f"127.0.0.1:{cluster.node_port(leader)}"
    assert _produce_one(bootstrap, topic, "all") is None

    for node in followers:
        cluster.stop_node(node)
    refused = _produce_one(bootstrap, topic, "all")
    assert refused is not None and refused.code() == KafkaError.NOT_ENOUGH_REPLICAS, refused
    assert _produce_one(bootstrap, topic, "1") is None  # min.insync.replicas governs acks=all only

    cluster.start_node(followers[0])
    assert _produce_one(bootstrap, topic, "all") is None
    log = cluster.logs()
    assert f"is insufficient to satisfy the min.isr requirement of 2 for partition {topic}-0" in log
