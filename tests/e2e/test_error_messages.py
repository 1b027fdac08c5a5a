"""The error messages admin calls carry are Kafka's own texts (issue 47): clients and their tests match them.

Each case runs one call through confluent-kafka's AdminClient over a real socket and compares the broker's
message, as the client hands it over, with the text Kafka 4's controller or broker writes for the same case.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from tests.conftest import BrokerProcess, unique_topic

from .helpers import create_topic


def _failure(future: Any) -> KafkaError:
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=15)
    return raised.value.args[0]


def _only(futures: dict[Any, Any]) -> Any:
    [future] = futures.values()
    return future


def _create(admin: AdminClient, topic: NewTopic) -> KafkaError:
    return _failure(_only(admin.create_topics([topic], operation_timeout=10)))


def _incremental(admin: AdminClient, topic: str, name: str, value: str) -> KafkaError:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
    return _failure(_only(admin.incremental_alter_configs([resource])))


# (case, call given an admin client and an existing one-partition topic, Kafka's code, Kafka's message);
# {topic} in the message is the existing topic's name.
Case = tuple[str, Callable[[AdminClient, str], KafkaError], int, str]
CASES: list[Case] = [
    ("create: unknown config",
     lambda admin, _: _create(admin, NewTopic(unique_topic("m"), 1, 1, config={"bad_option": "1"})),
     KafkaError.INVALID_CONFIG, "Unknown topic config name: bad_option"),
    ("create: value below the minimum",
     lambda admin, _: _create(admin, NewTopic(unique_topic("m"), 1, 1, config={"retention.ms": "-5"})),
     KafkaError.INVALID_CONFIG, "Invalid value -5 for configuration retention.ms: Value must be at least -1"),
    ("create: not a number",
     lambda admin, _: _create(admin, NewTopic(unique_topic("m"), 1, 1, config={"segment.bytes": "lots"})),
     KafkaError.INVALID_CONFIG, "Invalid value lots for configuration segment.bytes: Not a number of type INT"),
    ("create: not one of the allowed strings",
     lambda admin, _: _create(admin, NewTopic(unique_topic("m"), 1, 1, config={"cleanup.policy": "delete,shred"})),
     KafkaError.INVALID_CONFIG,
     "Invalid value shred for configuration cleanup.policy: String must be one of: compact, delete"),
    ("create: not a boolean",
     lambda admin, _: _create(admin, NewTopic(unique_topic("m"), 1, 1, config={"preallocate": "maybe"})),
     KafkaError.INVALID_CONFIG,
     "Invalid value maybe for configuration preallocate: Expected value to be either true or false"),
    ("create: ratio above its range",
     lambda admin, _: _create(admin, NewTopic(unique_topic("m"), 1, 1, config={"min.cleanable.dirty.ratio": "1.5"})),
     KafkaError.INVALID_CONFIG,
     "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
    ("create: min above max compaction lag",
     lambda admin, _: _create(admin, NewTopic(unique_topic("m"), 1, 1, config={
         "min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})),
     KafkaError.INVALID_CONFIG, "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"),
    ("create: topic exists",
     lambda admin, topic: _create(admin, NewTopic(topic, 1, 1)),
     KafkaError.TOPIC_ALREADY_EXISTS, "Topic '{topic}' already exists."),
    ("create: illegal name",
     lambda admin, _: _create(admin, NewTopic("no spaces!", 1, 1)),
     KafkaError.TOPIC_EXCEPTION, "Topic name is invalid: 'no spaces!' contains one or more characters other "
                                 "than ASCII alphanumerics, '.', '_' and '-'"),
    ("create: too many replicas",
     lambda admin, _: _create(admin, NewTopic(unique_topic("m"), 1, 3)),
     KafkaError.INVALID_REPLICATION_FACTOR, "Unable to replicate the partition 3 time(s): The target replication "
                                            "factor of 3 cannot be reached because only 1 broker(s) are registered."),
    ("create: too many partitions in one request",
     lambda admin, _: _create(admin, NewTopic(unique_topic("m"), 100_000, 1)),
     KafkaError.POLICY_VIOLATION, "Excessively large number of partitions per request."),
    ("create partitions: same count",
     lambda admin, topic: _failure(_only(admin.create_partitions([NewPartitions(topic, 1)]))),
     KafkaError.INVALID_PARTITIONS, "Topic already has 1 partition(s)."),
    ("create partitions: too many",
     lambda admin, topic: _failure(_only(admin.create_partitions([NewPartitions(topic, 100_000)]))),
     KafkaError.POLICY_VIOLATION, "Unable to perform excessively large batch operation."),
    ("incremental alter: unknown config",
     lambda admin, topic: _incremental(admin, topic, "bad_option", "1"),
     KafkaError.INVALID_CONFIG, "Unknown topic config name: bad_option"),
    ("incremental alter: bad value",
     lambda admin, topic: _incremental(admin, topic, "min.insync.replicas", "0"),
     KafkaError.INVALID_CONFIG, "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"),
    ("incremental alter: unknown topic",
     lambda admin, _: _incremental(admin, "no-such-topic-here", "retention.ms", "1000"),
     KafkaError.UNKNOWN_TOPIC_OR_PART, "The topic 'no-such-topic-here' does not exist."),
]


@pytest.mark.parametrize(("call", "code", "message"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_admin_errors_carry_kafkas_message(broker: BrokerProcess, call: Callable[[AdminClient, str], KafkaError],
                                           code: int, message: str) -> None:
    topic = unique_topic("existing")
    create_topic(broker.bootstrap, topic)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    error = call(admin, topic)
    assert (error.code(), error.str()) == (code, message.format(topic=topic))
