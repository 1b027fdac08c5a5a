"""`minikafka acls` (Kafka's kafka-acls.sh) against a broker with an authorizer, checked with confluent-kafka's
admin client, and the kafka-acls.sh stand-in librdkafka's test suite runs from $KAFKA_PATH/bin."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from minikafka.testing import Broker

from tests.support.names import unique_topic
from tests.support.waiting import poll_until

DEADLINE_S = 30.0
TOOL_TIMEOUT_S = 60
STAND_IN = Path(__file__).resolve().parents[1] / "compat" / "librdkafka" / "bin" / "kafka-acls.sh"
# Kafka's test clusters' authorizer: everyone may do what no ACL speaks of, so a DENY can be added and tried.
AUTHORIZED = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "allow.everyone.if.no.acl.found": "true"}
EVERYTHING = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                              AclPermissionType.ANY)


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


@pytest.fixture
def authorized(broker_factory: Callable[..., Broker]) -> Broker:
    return broker_factory(**AUTHORIZED)


@pytest.fixture
def anonymous_super_user(broker_factory: Callable[..., Broker]) -> Broker:
    """An ACL on the cluster resource takes ANONYMOUS's open access to it (ACL calls need ALTER/DESCRIBE on
    the cluster): as a super user the tool keeps it."""
    return broker_factory(**AUTHORIZED, **{"super.users": "User:ANONYMOUS"})


def acls(bootstrap: str, *args: str, stdin: str = "") -> Run:
    done = subprocess.run([sys.executable, "-m", "minikafka.broker", "acls", "--bootstrap-server", bootstrap, *args],
                          capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, input=stdin)
    return Run(done.returncode, done.stdout, done.stderr)


def described(broker: Broker) -> set[AclBinding]:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    return set(admin.describe_acls(EVERYTHING).result(DEADLINE_S))


def _binding(resource: ResourceType, name: str, operation: AclOperation, permission: AclPermissionType,
             principal: str = "User:*", pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, "*", operation, permission)


def test_add_list_and_remove_as_librdkafka_runs_them(authorized: Broker) -> None:
    topic = unique_topic("acl")
    bootstrap = authorized.bootstrap_servers
    added = acls(bootstrap, "--add", "--allow-principal", "User:*", "--operation", "Describe", "--allow-host", "*",
                 "--topic", topic)
    assert added.code == 0 and added.err == ""
    pattern = f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"
    entry = "(principal=User:*, host=*, operation=DESCRIBE, permissionType=ALLOW)"
    assert added.out == (f"Adding ACLs for resource `{pattern}`: \n \t{entry} \n\n"
                         f"Current ACLs for resource `{pattern}`: \n \t{entry} \n\n")
    assert acls(bootstrap, "--add", "--deny-principal", "User:*", "--operation", "Read", "--deny-host", "*",
                "--topic", topic).code == 0
    describe = _binding(ResourceType.TOPIC, topic, AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    deny_read = _binding(ResourceType.TOPIC, topic, AclOperation.READ, AclPermissionType.DENY)
    assert described(authorized) == {describe, deny_read}

    listed = acls(bootstrap, "--list", "--topic", topic)
    assert listed.code == 0
    assert "(principal=User:*, host=*, operation=READ, permissionType=DENY)" in listed.out

    removed = acls(bootstrap, "--remove", "--force", "--allow-principal", "User:*", "--operation", "Describe",
                   "--allow-host", "*", "--topic", topic)
    assert removed.code == 0 and removed.err == ""
    assert described(authorized) == {deny_read}


def test_repeated_operations_several_resources_and_a_prefix(anonymous_super_user: Broker) -> None:
    authorized = anonymous_super_user
    bootstrap = authorized.bootstrap_servers
    assert acls(bootstrap, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation",
                "DescribeConfigs", "--topic", "orders-", "--group", "billing", "--resource-pattern-type",
                "prefixed").code == 0
    assert acls(bootstrap, "--add", "--allow-principal", "User:alice", "--operation", "IdempotentWrite",
                "--cluster").code == 0
    assert acls(bootstrap, "--add", "--deny-principal", "User:bob", "--transactional-id", "txn-1").code == 0
    prefixed = ResourcePatternType.PREFIXED
    assert described(authorized) == {
        _binding(ResourceType.TOPIC, "orders-", AclOperation.READ, AclPermissionType.ALLOW, "User:alice", prefixed),
        _binding(ResourceType.TOPIC, "orders-", AclOperation.DESCRIBE_CONFIGS, AclPermissionType.ALLOW,
                 "User:alice", prefixed),
        _binding(ResourceType.GROUP, "billing", AclOperation.READ, AclPermissionType.ALLOW, "User:alice", prefixed),
        _binding(ResourceType.GROUP, "billing", AclOperation.DESCRIBE_CONFIGS, AclPermissionType.ALLOW,
                 "User:alice", prefixed),
        _binding(ResourceType.BROKER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE, AclPermissionType.ALLOW,
                 "User:alice"),
        _binding(ResourceType.TRANSACTIONAL_ID, "txn-1", AclOperation.ALL, AclPermissionType.DENY, "User:bob")}
    alice = acls(bootstrap, "--list", "--principal", "User:alice")
    assert alice.code == 0 and "User:bob" not in alice.out and alice.out.count("Current ACLs for resource") == 3

    # --remove without a principal removes every ACL of the resource, once confirmed on stdin.
    declined = acls(bootstrap, "--remove", "--topic", "orders-", "--resource-pattern-type", "prefixed", stdin="n\n")
    assert declined.code == 0 and "Are you sure you want to delete all ACLs" in declined.out
    assert len(described(authorized)) == 6
    assert acls(bootstrap, "--remove", "--topic", "orders-", "--resource-pattern-type", "prefixed",
                stdin="y\n").code == 0
    assert acls(bootstrap, "--remove", "--force", "--cluster", "--transactional-id", "txn-1").code == 0
    assert {(b.restype, b.name) for b in described(authorized)} == {(ResourceType.GROUP, "billing")}


def test_a_deny_added_by_the_stand_in_refuses_a_producer(authorized: Broker) -> None:
    """What 0115_producer_auth does: kafka-acls.sh from $KAFKA_PATH/bin, then a produce to the topic fails."""
    topic = unique_topic("denied")
    command = (f"{STAND_IN} --bootstrap-server {authorized.bootstrap_servers} --add --deny-principal 'User:*' "
               f"--operation All --deny-host '*' --topic '{topic}'")
    done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S,
                          env={**os.environ, "MINIKAFKA_PYTHON": sys.executable})
    assert (done.returncode, done.stderr) == (0, "")
    outcome: list[str | None] = []
    producer = Producer({"bootstrap.servers": authorized.bootstrap_servers, "message.timeout.ms": 5000})
    producer.produce(topic, b"value", on_delivery=lambda error, _m: outcome.append(error and error.name()))
    producer.flush(DEADLINE_S)
    assert outcome == ["TOPIC_AUTHORIZATION_FAILED"]


def test_a_read_denied_by_the_tool_is_a_fetch_authorization_error(authorized: Broker) -> None:
    """What 0119_consumer_auth does: Describe allowed and Read denied, the consumer's fetch is refused per
    partition (an answer librdkafka can parse: empty records, not null)."""
    topic = unique_topic("unread")
    bootstrap = authorized.bootstrap_servers
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b"value")
    assert producer.flush(DEADLINE_S) == 0
    assert acls(bootstrap, "--add", "--allow-principal", "User:*", "--operation", "Describe",
                "--topic", topic).code == 0
    assert acls(bootstrap, "--add", "--deny-principal", "User:*", "--operation", "Read", "--topic", topic).code == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    errors: list[int] = []

    def refused() -> bool:
        message = consumer.poll(0.5)
        if message is not None:
            assert message.error() is not None, "no record is delivered"
            errors.append(message.error().code())
        return KafkaError.TOPIC_AUTHORIZATION_FAILED in errors

    try:
        poll_until(refused, timeout=DEADLINE_S)
    finally:
        consumer.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(("args", "message"), [
    ((), "Command must include exactly one action: --list, --add, --remove."),
    (("--add", "--list"), "Command must include exactly one action: --list, --add, --remove."),
    (("--add", "--topic", "t"), "You must specify one of: --allow-principal, --deny-principal when trying to add "
                                "ACLs."),
    (("--add", "--allow-principal", "User:a"), "You must provide at least one resource: --topic <topic> or "
                                               "--cluster or --group <group> or --transactional-id <id>"),
    (("--add", "--allow-principal", "alice", "--topic", "t"),
     "expected a principal as <type>:<name> (e.g. User:alice), not 'alice'"),
    (("--add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"),
     "invalid operation 'Fly': choose from All, Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
     "DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens"),
    (("--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"),
     "A '--resource-pattern-type' value of 'MATCH' is not valid when adding acls."),
    (("--list", "--resource-pattern-type", "glob"),
     "invalid --resource-pattern-type 'glob': choose from any, match, literal, prefixed"),
    (("--add", "--deny-host", "*", "--allow-principal", "User:a", "--topic", "t"),
     "--deny-host can only be used with --deny-principal"),
    (("--list", "--force"), 'Option "[force]" can\'t be used with option "[list]"'),
    (("--list", "--bogus"), "unrecognized arguments: --bogus"),
])
def test_bad_arguments_are_one_line(args: tuple[str, ...], message: str) -> None:
    """Checked before any connection: the bootstrap server is not listening."""
    assert acls(f"127.0.0.1:{_free_port()}", *args) == Run(2, "", f"minikafka acls: error: {message}\n")


def test_broker_errors_are_one_line(broker: Broker) -> None:
    """Without an authorizer the broker answers SECURITY_DISABLED; unreachable brokers are one line too."""
    refused = acls(broker.bootstrap_servers, "--add", "--allow-principal", "User:a", "--topic", "t")
    assert refused.code == 1
    assert refused.err == "Error while executing ACL command: No Authorizer is configured.\n"
    unreachable = acls(f"127.0.0.1:{_free_port()}", "--list")
    assert unreachable.code == 1 and unreachable.out == "" and unreachable.err.count("\n") == 1
    assert unreachable.err.startswith("Error while executing ACL command: cannot connect to 127.0.0.1:")
