"""`minikafka consumer-groups` (Kafka's kafka-consumer-groups.sh) against a broker, with confluent-kafka
consumer groups."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from minikafka.testing import Broker

from tests.support.clients import create_topic
from tests.support.names import unique_topic
from tests.support.waiting import poll_until

TOOL_TIMEOUT_S = 60
PER_PARTITION = 5
OFFSETS_HEADER = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                  "CLIENT-ID"]


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str

    def rows(self) -> list[list[str]]:
        """The space-aligned table ConsumerGroupCommand prints after a blank line."""
        lines = self.out.split("\n")
        assert lines[0] == "" and lines[-1] == "", self.out
        return [line.split() for line in lines[1:-1]]


def consumer_groups(broker: Broker | str, *args: str) -> Run:
    bootstrap = broker if isinstance(broker, str) else broker.bootstrap_servers
    done = subprocess.run([sys.executable, "-m", "minikafka.broker", "consumer-groups", "--bootstrap-server",
                           bootstrap, *args], capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    return Run(done.returncode, done.stdout, done.stderr)


def fill(broker: Broker, topic: str) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for i in range(2 * PER_PARTITION):
        producer.produce(topic, f"v{i}".encode(), partition=i % 2)
    assert producer.flush(15) == 0


def joined_consumer(broker: Broker, group: str, topic: str, client_id: str) -> Consumer:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "client.id": client_id,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])

    def assigned() -> bool:
        consumer.poll(0.2)
        return len(consumer.assignment()) == 2

    poll_until(assigned, timeout=20, message="both partitions assigned")
    return consumer


def first_offsets(broker: Broker, group: str, topic: str) -> dict[int, int]:
    """The offset of the first record a new member of `group` reads from each partition."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "latest"})
    consumer.subscribe([topic])
    first: dict[int, int] = {}
    deadline = time.monotonic() + 20
    try:
        while len(first) < 2 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                raise KafkaException(message.error())
            first.setdefault(message.partition(), message.offset())
    finally:
        consumer.close()
    return first


def test_describe_reset_and_delete(broker: Broker) -> None:
    topic, group = unique_topic("cgtool"), unique_topic("grp")
    create_topic(broker.bootstrap_servers, topic, 2)
    fill(broker, topic)
    consumer = joined_consumer(broker, group, topic, "cg-client")
    consumer.commit(offsets=[TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 4)], asynchronous=False)
    member_id = consumer.memberid()

    listed = consumer_groups(broker, "--list")
    assert (listed.code, listed.out, listed.err) == (0, f"{group}\n", "")
    described = consumer_groups(broker, "--describe", "--group", group)
    assert described.code == 0 and described.err == ""
    assert described.rows() == [OFFSETS_HEADER,
                                [group, topic, "0", "3", "5", "2", member_id, "/127.0.0.1", "cg-client"],
                                [group, topic, "1", "4", "5", "1", member_id, "/127.0.0.1", "cg-client"]]
    members = consumer_groups(broker, "--describe", "--group", group, "--members")
    assert members.rows() == [["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"],
                              [group, member_id, "/127.0.0.1", "cg-client", "2"]]
    state = consumer_groups(broker, "--describe", "--group", group, "--state")
    assert state.rows() == [["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                            [group, f"127.0.0.1:{broker.port}", "(1)", "range", "Stable", "1"]]

    refused = consumer_groups(broker, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
                              "--execute")
    assert refused.code == 1
    assert refused.out == (f"\nError: Assignments can only be reset if the group '{group}' is inactive, but the "
                           f"current state is Stable.\n\n{'GROUP':<{len(group)}} {'TOPIC':<15} PARTITION  NEW-OFFSET\n")
    consumer.close()

    idle = consumer_groups(broker, "--describe", "--group", group)
    assert idle.err == f"\nConsumer group '{group}' has no active members.\n"
    assert idle.rows()[1:] == [[group, topic, "0", "3", "5", "2", "-", "-", "-"],
                               [group, topic, "1", "4", "5", "1", "-", "-", "-"]]

    dry = consumer_groups(broker, "--reset-offsets", "--group", group, "--topic", f"{topic}:1", "--shift-by", "10",
                          "--dry-run")
    assert dry.code == 0 and dry.rows() == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], [group, topic, "1", "5"]]
    assert dry.err == (f"WARN New offset (14) is higher than latest offset for topic partition {topic}-1. "
                       "Value will be set to 5.\n")
    reset = consumer_groups(broker, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
                            "--execute")
    assert (reset.code, reset.err) == (0, "")
    assert reset.rows() == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], [group, topic, "0", "0"],
                            [group, topic, "1", "0"]]
    assert [r[3:6] for r in consumer_groups(broker, "--describe", "--group", group).rows()[1:]] == [
        ["0", "5", "5"], ["0", "5", "5"]], "the dry run changed nothing; the reset moved both to 0"
    assert first_offsets(broker, group, topic) == {0: 0, 1: 0}, "the next member re-reads from the start"

    deleted = consumer_groups(broker, "--delete", "--group", group)
    assert (deleted.code, deleted.out) == (0, f"Deletion of requested consumer groups ('{group}') was successful.\n")
    assert consumer_groups(broker, "--list").out == ""
    gone = consumer_groups(broker, "--describe", "--group", group)
    assert (gone.code, gone.out) == (1, f"\nError: Consumer group '{group}' does not exist.\n")
    again = consumer_groups(broker, "--delete", "--group", group)
    assert (again.code, again.out) == (1, "\nError: Deletion of some consumer groups failed:\n"
                                          f"* Group '{group}' could not be deleted due to: GROUP_ID_NOT_FOUND\n")


@pytest.mark.parametrize("kafka_version", [None, "2.8"])
def test_reset_to_offset_and_delete_offsets(broker_factory: Callable[..., Broker],
                                            kafka_version: str | None) -> None:
    """Also as Kafka 2.8 (FindCoordinator v3, OffsetFetch v7, ListGroups v4): the versions are negotiated."""
    broker = broker_factory(**({} if kafka_version is None else {"minikafka.kafka.version": kafka_version}))
    topic, group = unique_topic("cgoff"), unique_topic("grp")
    create_topic(broker.bootstrap_servers, topic, 2)
    fill(broker, topic)
    reset = consumer_groups(broker, "--reset-offsets", "--group", group, "--topic", topic, "--to-offset", "2",
                            "--execute")
    assert reset.rows()[1:] == [[group, topic, "0", "2"], [group, topic, "1", "2"]]
    width = max(15, len(group)) + 10
    assert consumer_groups(broker, "--list", "--state").out == (f"{'GROUP':<{width}} {'STATE':<20}\n"
                                                                 f"{group:<{width}} {'Empty':<20}\n")
    latest = consumer_groups(broker, "--reset-offsets", "--group", group, "--topic", f"{topic}:0", "--to-latest",
                             "--execute")
    assert latest.rows()[1:] == [[group, topic, "0", "5"]]
    removed = consumer_groups(broker, "--delete-offsets", "--group", group, "--topic", f"{topic}:1")
    assert (removed.code, removed.out) == (0, f"Request succeeded for deleting offsets from group {group}.\n\n"
                                              f"{'TOPIC':<{max(15, len(topic))}} PARTITION  STATUS         \n"
                                              f"{topic:<{max(15, len(topic))}} 1          Successful     \n")
    assert consumer_groups(broker, "--describe", "--group", group).rows()[1:] == [
        [group, topic, "0", "5", "5", "0", "-", "-", "-"]]


def test_unreachable_broker_is_one_line() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    run = consumer_groups(f"127.0.0.1:{port}", "--list")
    assert run.code == 1 and run.err == "" and "Traceback" not in run.out
    assert run.out.startswith(f"\nError: Executing consumer group command failed due to cannot connect to "
                              f"127.0.0.1:{port}") and run.out.count("\n") == 2
