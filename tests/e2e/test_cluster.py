"""Several nodes in one process: leaders spread and moving, nodes stopping and starting, coordinators
following their partitions, with real clients; wire-level checks of the errors Kafka gives a client
that asks the wrong node."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.produce.v10.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.static.primitive import Records, i32Timedelta
from minikafka.coordinator.hashing import partition_for
from minikafka.protocol.codec import decode_response, encode_request
from minikafka.protocol.records import Record, build_batch
from minikafka.testing import Broker

from tests.support.names import unique_topic
from tests.support.waiting import poll_until

DEADLINE_S = 30.0
JS_DIR = Path(__file__).parent / "js"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Broker]:
    with Broker(nodes=3, data_dir=tmp_path / "data") as broker:
        yield broker


def _create(broker: Broker, topic: str, partitions: int = 3, replication: int = 3) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, partitions, replication)])[topic].result(DEADLINE_S)


def _leaders(broker: Broker, topic: str) -> dict[int, int]:
    return {p["partition"]: p["leader"] for p in broker.cluster()["partitions"] if p["topic"] == topic}


def _consume_all(bootstrap: str, topic: str, count: int, isolation: str = "read_uncommitted") -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_topic("reader"),
                         "isolation.level": isolation, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
    values: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    # A little longer: more than `count` would be duplicates.
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    return values


def test_confluent_kafka_sees_three_brokers_and_spread_leaders(cluster: Broker) -> None:
    topic = unique_topic("spread")
    _create(cluster, topic)
    metadata = AdminClient({"bootstrap.servers": cluster.bootstrap_servers}).list_topics(timeout=DEADLINE_S)
    assert sorted(metadata.brokers) == [1, 2, 3]
    assert {b.port for b in metadata.brokers.values()} == {cluster.node_port(n) for n in (1, 2, 3)}
    partitions = metadata.topics[topic].partitions
    assert sorted(p.leader for p in partitions.values()) == [1, 2, 3]
    assert all(sorted(p.replicas) == [1, 2, 3] and sorted(p.isrs) == [1, 2, 3] for p in partitions.values())


def test_idempotent_produce_across_a_leader_move_and_a_node_stop_loses_and_duplicates_nothing(
        cluster: Broker) -> None:
    topic = unique_topic("failover")
    _create(cluster, topic)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True})
    for number in range(300):
        producer.produce(topic, str(number).encode(), partition=number % 3)
        if number == 100:
            moved = cluster.move_leader(topic, 0, 2)
            assert moved["leader"] == 2 and moved["leader_epoch"] == 1
        if number == 200:
            producer.flush(DEADLINE_S)
            cluster.stop_node(3)
            assert 3 not in _leaders(cluster, topic).values()
    assert producer.flush(DEADLINE_S) == 0
    values = _consume_all(cluster.bootstrap_servers, topic, 300)
    assert sorted(int(v) for v in values) == list(range(300)), "every record once"
    cluster.start_node(3)
    isr = {p["partition"]: p["isr"] for p in cluster.cluster()["partitions"] if p["topic"] == topic}
    assert all(sorted(members) == [1, 2, 3] for members in isr.values()), "back in every ISR"


def test_a_partition_whose_replicas_are_all_down_has_no_leader(cluster: Broker) -> None:
    topic = unique_topic("single")
    _create(cluster, topic, partitions=1, replication=1)
    [leader] = _leaders(cluster, topic).values()
    cluster.stop_node(leader)
    survivor = next(n for n in (1, 2, 3) if n != leader)
    metadata = AdminClient({"bootstrap.servers": f"127.0.0.1:{cluster.node_port(survivor)}"}).list_topics(
        topic, timeout=DEADLINE_S)
    assert metadata.topics[topic].partitions[0].leader == -1
    assert leader not in metadata.brokers


def test_metadata_answers_follow_every_leadership_and_topic_change(cluster: Broker) -> None:
    """The broker keeps each topic's Metadata entry while nothing about it changes: every change a client
    can cause or watch (a leader move, a node stopping and starting, more partitions, the topic deleted and
    created again) must show in the very next answer."""
    topic = unique_topic("meta")
    _create(cluster, topic)
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{cluster.node_port(1)}"})

    def partitions() -> dict[int, Any]:
        return admin.list_topics(topic, timeout=DEADLINE_S).topics[topic].partitions  # type: ignore[no-any-return]

    def seen() -> dict[int, tuple[int, list[int]]]:
        return {index: (p.leader, sorted(p.isrs)) for index, p in partitions().items()}

    def expected() -> dict[int, tuple[int, list[int]]]:
        return {p["partition"]: (p["leader"], sorted(p["isr"])) for p in cluster.cluster()["partitions"]
                if p["topic"] == topic}

    assert seen() == seen() == expected()
    first = _leaders(cluster, topic)[0]
    target = first % 3 + 1
    cluster.move_leader(topic, 0, target)
    assert seen()[0][0] == target and seen() == expected()
    stopped = 3 if target != 3 else 2
    cluster.stop_node(stopped)
    after_stop = seen()
    assert after_stop == expected() and all(stopped not in isr and leader != stopped
                                            for leader, isr in after_stop.values())
    cluster.start_node(stopped)
    assert seen() == expected() and all(isr == [1, 2, 3] for _leader, isr in seen().values())
    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(DEADLINE_S)
    assert sorted(partitions()) == [0, 1, 2, 3, 4] and seen() == expected()
    admin.delete_topics([topic])[topic].result(DEADLINE_S)
    poll_until(lambda: topic not in admin.list_topics(timeout=DEADLINE_S).topics, timeout=DEADLINE_S,
               message="the deleted topic to leave Metadata")
    _create(cluster, topic, partitions=2, replication=1)
    assert sorted(partitions()) == [0, 1] and seen() == expected()
    assert all(len(p.replicas) == 1 for p in partitions().values())


def _group_coordinator(broker: Broker, group: str) -> int:
    partition = partition_for(group, 50)
    [state] = [p for p in broker.cluster()["partitions"] if p["topic"] == "__consumer_offsets"
               and p["partition"] == partition]
    return int(state["leader"])


def test_a_group_keeps_its_offsets_when_its_coordinator_node_stops(cluster: Broker) -> None:
    topic, group = unique_topic("grp"), unique_topic("g")
    _create(cluster, topic)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for number in range(60):
        producer.produce(topic, str(number).encode(), partition=number % 3)
    assert producer.flush(DEADLINE_S) == 0
    config = {"bootstrap.servers": cluster.bootstrap_servers, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False}
    consumer = Consumer(config)
    consumer.subscribe([topic])
    seen: list[int] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(seen) < 30 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.append(int(message.value()))
    consumer.commit(asynchronous=False)
    coordinator = _group_coordinator(cluster, group)
    cluster.stop_node(coordinator)
    assert _group_coordinator(cluster, group) != coordinator, "the coordinator moved"
    while len(seen) < 60 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.append(int(message.value()))
    consumer.commit(asynchronous=False)
    committed = consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=DEADLINE_S)
    consumer.close()
    assert sorted(seen) == list(range(60))
    assert sum(tp.offset for tp in committed) == 60, "the commits reached the new coordinator"


def test_a_transaction_whose_coordinator_moves_mid_flight_commits_exactly_once(cluster: Broker) -> None:
    topic = unique_topic("txn")
    _create(cluster, topic)
    transactional_id = unique_topic("tx")
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": transactional_id})
    producer.init_transactions(DEADLINE_S)
    producer.begin_transaction()
    for number in range(30):
        producer.produce(topic, str(number).encode(), partition=number % 3)
    producer.flush(DEADLINE_S)
    txn_partition = partition_for(transactional_id, 50)
    [state] = [p for p in cluster.cluster()["partitions"] if p["topic"] == "__transaction_state"
               and p["partition"] == txn_partition]
    cluster.stop_node(state["leader"])
    producer.commit_transaction(DEADLINE_S)
    values = _consume_all(f"127.0.0.1:{cluster.node_port(next(n for n in (1, 2, 3) if n != state['leader']))}",
                          topic, 30, isolation="read_committed")
    assert sorted(int(v) for v in values) == list(range(30))


# --- the wire: asking the wrong node ------------------------------------------------------------


def _call(port: int, request: Any, api_key: int, version: int) -> Any:
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S) as sock:
        sock.sendall(encode_request(9, request))
        (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
        return decode_response(sock.recv(size, socket.MSG_WAITALL), api_key, version)[1]


def test_a_produce_to_a_follower_gets_not_leader_with_the_leader_and_its_address(cluster: Broker) -> None:
    topic = unique_topic("wire")
    _create(cluster, topic, partitions=1)
    cluster.move_leader(topic, 0, 2)
    request = ProduceRequest(transactional_id=None, acks=-1, timeout=i32Timedelta.parse(timedelta(seconds=5)),
                             topic_data=(TopicProduceData(name=topic, partition_data=(PartitionProduceData(
                                 index=0, records=Records(build_batch([Record(None, b"v", (), 0)]))),)),))
    response = _call(cluster.node_port(1), request, 0, 10)
    [partition] = response.responses[0].partition_responses
    assert partition.error_code.name == "not_leader_or_follower"
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (2, 1)
    assert [(n.node_id, n.port) for n in response.node_endpoints] == [(2, cluster.node_port(2))]
    accepted = _call(cluster.node_port(2), request, 0, 10)
    assert accepted.responses[0].partition_responses[0].error_code.name == "none"


def test_find_coordinator_names_the_node_leading_the_coordinator_partition(cluster: Broker) -> None:
    group = unique_topic("fc")
    AdminClient({"bootstrap.servers": cluster.bootstrap_servers}).list_topics(timeout=DEADLINE_S)
    request = FindCoordinatorRequest(key_type=0, coordinator_keys=(group,))
    first = _call(cluster.node_port(1), request, 10, 4).coordinators[0]
    assert first.node_id == _group_coordinator(cluster, group)
    assert first.port == cluster.node_port(first.node_id)
    cluster.stop_node(first.node_id)
    survivor = next(n for n in (1, 2, 3) if n != first.node_id)
    moved = _call(cluster.node_port(survivor), request, 10, 4).coordinators[0]
    assert moved.node_id not in (first.node_id, -1)


# --- other clients ------------------------------------------------------------------------------


def test_kafka_python_produces_across_a_leader_move(cluster: Broker) -> None:
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic as KpNewTopic

    topic = unique_topic("kp")
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    admin.create_topics([KpNewTopic(topic, 1, 3)])
    assert {b["broker_id"] for b in admin.describe_cluster()["brokers"]} == {1, 2, 3}
    admin.close()
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", retries=5,
                             enable_idempotence=True)
    for number in range(20):
        producer.send(topic, str(number).encode(), partition=0).get(timeout=DEADLINE_S)
        if number == 9:
            cluster.move_leader(topic, 0, (_leaders(cluster, topic)[0] % 3) + 1)
    producer.close()
    assert sorted(int(v) for v in _consume_all(cluster.bootstrap_servers, topic, 20)) == list(range(20))


def test_aiokafka_produces_and_consumes_across_a_node_stop(cluster: Broker) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic = unique_topic("aio")
    _create(cluster, topic, partitions=1)

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers, enable_idempotence=True)
        await producer.start()
        try:
            for number in range(10):
                await producer.send_and_wait(topic, str(number).encode(), partition=0)
            await asyncio.get_running_loop().run_in_executor(None, cluster.stop_node, _leaders(cluster, topic)[0])
            for number in range(10, 20):
                await producer.send_and_wait(topic, str(number).encode(), partition=0)
        finally:
            await producer.stop()
        survivor = next(n["node_id"] for n in cluster.cluster()["nodes"] if n["online"])
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=f"127.0.0.1:{cluster.node_port(survivor)}",
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            values = []
            while len(values) < 20:
                record = await asyncio.wait_for(consumer.getone(), DEADLINE_S)
                values.append(record.value)
            return values
        finally:
            await consumer.stop()

    assert sorted(int(v) for v in asyncio.run(run())) == list(range(20))


@pytest.mark.kafkajs
def test_kafkajs_sees_the_cluster_and_produces(cluster: Broker) -> None:
    node = shutil.which("node")
    if node is None or not (JS_DIR / "node_modules" / "kafkajs").exists():
        pytest.fail("node or kafkajs is not installed (make js)")
    result = subprocess.run([node, str(JS_DIR / "cluster.js"), cluster.bootstrap_servers, unique_topic("kjs")],
                            capture_output=True, text=True, timeout=60, check=False)
    output = json.loads(result.stdout or "{}")
    assert result.returncode == 0 and "error" not in output, (output, result.stderr)
    assert sorted(b["nodeId"] for b in output["brokers"]) == [1, 2, 3]
    assert sorted(output["leaders"]) == [1, 2, 3]
    assert output["offsets"] == ["2", "2", "2"]


def test_the_control_plane_stops_and_starts_nodes_of_a_subprocess_broker(tmp_path: Path) -> None:
    with Broker({"admin.listener.port": 0}, mode="process", nodes=2, data_dir=tmp_path / "data") as broker:
        port_2 = broker.node_port(2)
        broker.stop_node(2)
        assert [n["online"] for n in broker.cluster()["nodes"]] == [True, False]
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port_2), timeout=5).close()
        broker.start_node(2)
        socket.create_connection(("127.0.0.1", port_2), timeout=5).close()

        def cli(*args: str) -> str:
            done = subprocess.run([sys.executable, "-m", "minikafka.broker", "cluster", "--admin-url",
                                   str(broker.admin_url), *args], capture_output=True, text=True, timeout=60,
                                  check=True)
            return done.stdout

        assert "Node 2\tstopped" in cli("stop-node", "2")
        assert "Node 2\tonline" in cli("start-node", "2")
        topic = unique_topic("cli")
        _create(broker, topic, partitions=1, replication=2)
        assert "Leader: 2\tEpoch: 1" in cli("move-leader", topic, "0", "2")
        assert f"Topic: {topic}\tPartition: 0\tLeader: 2" in cli("describe")
