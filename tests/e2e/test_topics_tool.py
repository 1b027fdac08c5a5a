"""`minikafka topics` (Kafka's kafka-topics.sh) against a broker, checked with confluent-kafka's admin client,
and the kafka-topics.sh stand-in librdkafka's test suite runs from $KAFKA_PATH/bin."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource
from minikafka.testing import Broker

from tests.support.names import unique_topic
from tests.support.waiting import poll_until

TOOL_TIMEOUT_S = 60
STAND_IN = Path(__file__).resolve().parents[1] / "compat" / "librdkafka" / "bin" / "kafka-topics.sh"


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


def topics(bootstrap: str, *args: str) -> Run:
    done = subprocess.run([sys.executable, "-m", "minikafka.broker", "topics", "--bootstrap-server", bootstrap,
                           *args], capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    return Run(done.returncode, done.stdout, done.stderr)


def partition_count(bootstrap: str, topic: str) -> int:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=15)
    return len(metadata.topics[topic].partitions)


def topic_exists(bootstrap: str, topic: str) -> bool:
    return topic in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=15).topics


def test_create_with_configs_then_alter_describe_list_delete(broker: Broker) -> None:
    topic = unique_topic("tt")
    created = topics(broker.bootstrap_servers, "--create", "--topic", topic, "--partitions", "2",
                     "--replication-factor", "1", "--config", "cleanup.policy=compact", "--config", "segment.ms=10000")
    assert created == Run(0, f"Created topic {topic}.\n", "")
    assert partition_count(broker.bootstrap_servers, topic) == 2
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    configs = admin.describe_configs([resource])[resource].result(15)
    assert (configs["cleanup.policy"].value, configs["segment.ms"].value) == ("compact", "10000")

    assert topics(broker.bootstrap_servers, "--alter", "--topic", topic, "--partitions", "4") == Run(0, "", "")
    assert partition_count(broker.bootstrap_servers, topic) == 4

    described = topics(broker.bootstrap_servers, "--describe", "--topic", topic)
    assert described.code == 0 and described.err == ""
    header, *partitions = described.out.splitlines()
    assert header.startswith(f"Topic: {topic}\tTopicId: ")
    assert header.endswith("\tPartitionCount: 4\tReplicationFactor: 1\t"
                           "Configs: cleanup.policy=compact,segment.ms=10000")
    assert [line.split("\t")[2] for line in partitions] == [f"Partition: {p}" for p in range(4)]

    assert topic in topics(broker.bootstrap_servers, "--list").out.splitlines()
    assert topics(broker.bootstrap_servers, "--delete", "--topic", topic) == Run(0, "", "")
    poll_until(lambda: not topic_exists(broker.bootstrap_servers, topic), timeout=15, message="topic deleted")
    assert topic not in topics(broker.bootstrap_servers, "--list").out.splitlines()


def test_existing_and_missing_topics(broker: Broker) -> None:
    topic = unique_topic("tt")
    assert topics(broker.bootstrap_servers, "--create", "--topic", topic).code == 0
    assert topics(broker.bootstrap_servers, "--create", "--topic", topic) == Run(
        1, "", f"Error while executing topic command : Topic '{topic}' already exists.\n")
    assert topics(broker.bootstrap_servers, "--create", "--topic", topic, "--if-not-exists") == Run(0, "", "")
    missing = unique_topic("absent")
    for action in (("--delete",), ("--describe",), ("--alter", "--partitions", "3")):
        assert topics(broker.bootstrap_servers, *action, "--topic", missing) == Run(
            1, "", f"Error while executing topic command : Topic '{missing}' does not exist as expected\n")
        assert topics(broker.bootstrap_servers, *action, "--topic", missing, "--if-exists") == Run(0, "", "")


def test_topic_is_a_regular_expression_except_for_create(broker: Broker) -> None:
    prefix = unique_topic("rx")
    for suffix in ("a", "b"):
        assert topics(broker.bootstrap_servers, "--create", "--topic", f"{prefix}_{suffix}").code == 0
    assert topics(broker.bootstrap_servers, "--list", "--topic", f"{prefix}_.*").out == f"{prefix}_a\n{prefix}_b\n"
    assert topics(broker.bootstrap_servers, "--delete", "--topic", f"{prefix}_.*") == Run(0, "", "")
    poll_until(lambda: not topic_exists(broker.bootstrap_servers, f"{prefix}_b"), timeout=15, message="topics deleted")


def test_stand_in_script_under_a_kafka_path_layout(broker: Broker) -> None:
    """librdkafka's test_kafka_topics() runs `$KAFKA_PATH/bin/kafka-topics.sh --bootstrap-server ... <args>`
    through system(), so the topic name arrives quoted as the C code wrote it."""
    topic = unique_topic("sh")
    command = (f'{STAND_IN} --bootstrap-server {broker.bootstrap_servers} --create --topic "{topic}" '
               "--replication-factor 1 --partitions 3 --config message.timestamp.type=LogAppendTime")
    done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S,
                          env={**os.environ, "MINIKAFKA_PYTHON": sys.executable})
    assert (done.returncode, done.stdout, done.stderr) == (0, f"Created topic {topic}.\n", "")
    assert partition_count(broker.bootstrap_servers, topic) == 3


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(("args", "message"), [
    ((), "Command must include exactly one action: --list, --describe, --create, --alter or --delete"),
    (("--list", "--create"), "Command must include exactly one action: --list, --describe, --create, --alter or "
                             "--delete"),
    (("--create",), 'Missing required argument "[topic]" for --create'),
    (("--alter", "--topic", "t"), 'Missing required argument "[partitions]" for --alter'),
    (("--alter", "--topic", "t", "--partitions", "2", "--config", "a=b"),
     'Option "[config]" can\'t be used with option "[alter]"'),
    (("--alter", "--topic", "t", "--partitions", "2", "--replication-factor", "1"),
     'Option "[replication-factor]" can\'t be used with option "[alter]"'),
    (("--list", "--if-not-exists"), 'Option "[if-not-exists]" can\'t be used with option "[list]"'),
    (("--create", "--topic", "t", "--if-exists"), 'Option "[if-exists]" can\'t be used with option "[create]"'),
    (("--create", "--topic", "t", "--partitions", "0"), "The partitions must be greater than 0"),
    (("--create", "--topic", "t", "--replication-factor", "0"),
     "The replication factor must be between 1 and 32767 inclusive"),
    (("--create", "--topic", "t", "--config", "novalue"),
     'Invalid topic config: all configs to be added must be in the format "key=val", not \'novalue\'.'),
    (("--create", "--topic", "t", "--partitions", "many"), "argument --partitions: invalid int value: 'many'"),
    (("--list", "--bogus"), "unrecognized arguments: --bogus"),
])
def test_bad_arguments_are_one_line_and_exit_1(args: tuple[str, ...], message: str) -> None:
    """Checked before any connection: the bootstrap server is not listening."""
    assert topics(f"127.0.0.1:{_free_port()}", *args) == Run(1, "", message + "\n")


def test_unreachable_broker_and_broker_errors_are_one_line(broker: Broker) -> None:
    unreachable = topics(f"127.0.0.1:{_free_port()}", "--list")
    assert unreachable.code == 1 and unreachable.out == ""
    assert unreachable.err.startswith("Error while executing topic command : cannot connect to 127.0.0.1:")
    assert unreachable.err.count("\n") == 1
    refused = topics(broker.bootstrap_servers, "--create", "--topic", unique_topic("rf"), "--replication-factor", "3")
    assert refused.code == 1 and refused.out == ""
    assert refused.err.startswith("Error while executing topic command : ") and refused.err.count("\n") == 1
    assert "Traceback" not in refused.err
