"""Share groups (KIP-932) with confluent-kafka's ShareConsumer (librdkafka 2.16): records handed out
to several consumers of one partition, acknowledgements (implicit and explicit ACCEPT, RELEASE,
REJECT), acquisition locks ending on the manual clock, the delivery limit, and the state in
`__share_group_state` across a kill -9 of the broker process."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Message, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType
from minikafka.testing import Broker

LOCK_MS = 15_000
DEADLINE_S = 20.0


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    config = {"minikafka.clock": "manual", "group.share.record.lock.duration.ms": LOCK_MS,
              "group.share.heartbeat.interval.ms": 500, "group.share.delivery.count.limit": 3}
    with Broker(config) as running:
        yield running


def _topic(broker: Broker, group: str, partitions: int = 1) -> str:
    """A new topic, and `group` set to start at the earliest offset (share.auto.offset.reset)."""
    topic = _name("queue")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result()
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result()
    return topic


def _produce(broker: Broker, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(10) == 0


def _consumer(broker: Broker, group: str, topic: str, *, explicit: bool = False) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                              "share.acknowledgement.mode": "explicit" if explicit else "implicit"})
    consumer.subscribe([topic])
    return consumer


def _poll_until(consumer: ShareConsumer, enough: Callable[[list[Message]], bool],
                deadline_s: float = DEADLINE_S) -> list[Message]:
    """Poll (acknowledging implicitly what the previous poll gave, in implicit mode) until `enough`."""
    got: list[Message] = []
    deadline = time.monotonic() + deadline_s
    while not enough(got) and time.monotonic() < deadline:
        for message in consumer.poll(0.5):
            assert message.error() is None, message.error()
            got.append(message)
    return got


def _batch(consumer: ShareConsumer) -> list[Message]:
    """The next non-empty poll's records."""
    return _poll_until(consumer, lambda got: bool(got))


def _values(messages: list[Message]) -> list[bytes]:
    return [m.value() for m in messages]  # type: ignore[misc]


def _ack_all(consumer: ShareConsumer, messages: list[Message], kind: Any) -> None:
    for message in messages:
        consumer.acknowledge(message, kind)
    results = consumer.commit_sync(10)
    assert all(error is None for error in results.values()), results


def test_one_consumer_implicit_acknowledgement_reads_everything_once(broker: Broker) -> None:
    group = _name("share")
    topic = _topic(broker, group, partitions=2)
    values = [b"v%d" % i for i in range(20)]
    _produce(broker, topic, values)
    consumer = _consumer(broker, group, topic)
    try:
        got = _poll_until(consumer, lambda got: len(got) >= 20)
        assert sorted(_values(got)) == sorted(values)
        assert {m.delivery_count() for m in got} == {1}
        consumer.commit_sync(10)  # the last poll's records, accepted implicitly
        assert _poll_until(consumer, lambda got: bool(got), deadline_s=1.5) == []
    finally:
        consumer.close()


def test_consumers_of_one_partition_get_distinct_records(broker: Broker) -> None:
    group = _name("share")
    topic = _topic(broker, group)
    consumers = [_consumer(broker, group, topic, explicit=True) for _ in range(3)]
    try:
        held = []
        for index, consumer in enumerate(consumers):
            # each consumer holds what it got (not acknowledged): the next one gets only newer records
            _produce(broker, topic, [b"%d-%d" % (index, i) for i in range(5)])
            held.append(_poll_until(consumer, lambda got: len(got) >= 5))
        for index, messages in enumerate(held):
            assert _values(messages) == [b"%d-%d" % (index, i) for i in range(5)]
        offsets = [m.offset() for messages in held for m in messages]
        assert sorted(offsets) == list(range(15))
        for consumer, messages in zip(consumers, held, strict=True):
            _ack_all(consumer, messages, AcknowledgeType.ACCEPT)
    finally:
        for consumer in consumers:
            consumer.close()


def test_release_redelivers_with_a_higher_delivery_count_and_reject_archives(broker: Broker) -> None:
    group = _name("share")
    topic = _topic(broker, group)
    _produce(broker, topic, [b"a", b"b"])
    consumer = _consumer(broker, group, topic, explicit=True)
    try:
        first = _poll_until(consumer, lambda got: len(got) >= 2)
        assert [(m.value(), m.delivery_count()) for m in first] == [(b"a", 1), (b"b", 1)]
        consumer.acknowledge(first[0], AcknowledgeType.RELEASE)
        consumer.acknowledge(first[1], AcknowledgeType.REJECT)
        consumer.commit_sync(10)
        again = _batch(consumer)
        assert [(m.offset(), m.value(), m.delivery_count()) for m in again] == [(0, b"a", 2)]
        _ack_all(consumer, again, AcknowledgeType.ACCEPT)
        _produce(broker, topic, [b"c"])
        after = _batch(consumer)
        assert [(m.offset(), m.value()) for m in after] == [(2, b"c")]  # b was rejected: archived
        _ack_all(consumer, after, AcknowledgeType.ACCEPT)
    finally:
        consumer.close()


def test_records_of_a_consumer_that_stops_are_redelivered_when_the_lock_expires(broker: Broker) -> None:
    group = _name("share")
    topic = _topic(broker, group)
    _produce(broker, topic, [b"x%d" % i for i in range(4)])
    stalled = _consumer(broker, group, topic, explicit=True)
    other = _consumer(broker, group, topic, explicit=True)
    try:
        taken = _poll_until(stalled, lambda got: len(got) >= 4)
        assert len(taken) == 4
        # The stalled consumer never acknowledges (as if killed mid-batch): nothing for the other one...
        assert _poll_until(other, lambda got: bool(got), deadline_s=1.5) == []
        broker.advance_clock(LOCK_MS + 1)
        # ...until the acquisition lock ends, then the same records with a higher delivery count.
        again = _poll_until(other, lambda got: len(got) >= 4)
        assert [(m.offset(), m.delivery_count()) for m in again] == [(i, 2) for i in range(4)]
        _ack_all(other, again, AcknowledgeType.ACCEPT)
    finally:
        other.close()
        stalled.close()


def test_a_consumer_closed_without_acknowledging_gives_its_records_back(broker: Broker) -> None:
    group = _name("share")
    topic = _topic(broker, group)
    _produce(broker, topic, [b"y0", b"y1"])
    first = _consumer(broker, group, topic, explicit=True)
    second = _consumer(broker, group, topic, explicit=True)
    try:
        assert len(_poll_until(first, lambda got: len(got) >= 2)) == 2
        first.close()  # closes its share session: the broker releases what it held, no lock to wait for
        again = _poll_until(second, lambda got: len(got) >= 2)
        assert [(m.offset(), m.delivery_count()) for m in again] == [(0, 2), (1, 2)]
        _ack_all(second, again, AcknowledgeType.ACCEPT)
    finally:
        second.close()


def test_the_delivery_limit_archives_a_poison_record(broker: Broker) -> None:
    group = _name("share")
    topic = _topic(broker, group)
    _produce(broker, topic, [b"poison"])
    consumer = _consumer(broker, group, topic, explicit=True)
    try:
        counts = []
        for _ in range(3):  # group.share.delivery.count.limit=3
            got = _batch(consumer)
            assert _values(got) == [b"poison"]
            counts.append(got[0].delivery_count())
            _ack_all(consumer, got, AcknowledgeType.RELEASE)
        assert counts == [1, 2, 3]
        _produce(broker, topic, [b"next"])
        after = _batch(consumer)
        assert [(m.offset(), m.value()) for m in after] == [(1, b"next")]
        _ack_all(consumer, after, AcknowledgeType.ACCEPT)
    finally:
        consumer.close()


def test_latest_is_the_default_start(broker: Broker) -> None:
    topic = _name("queue")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1)])[topic].result()
    _produce(broker, topic, [b"before"])
    group = _name("share")
    consumer = _consumer(broker, group, topic)
    try:
        # the share-partition starts at the end once the group is assigned it: wait for the assignment
        assert _poll_until(consumer, lambda got: bool(got), deadline_s=2.0) == []
        _produce(broker, topic, [b"after"])
        assert _values(_batch(consumer)) == [b"after"]
    finally:
        consumer.close()


def test_acknowledgements_survive_a_kill_9(tmp_path: Any) -> None:
    config = {"group.share.heartbeat.interval.ms": 500, "share.coordinator.state.topic.num.partitions": 3}
    with Broker(config, mode="process", data_dir=tmp_path / "data") as broker:
        group = _name("share")
        topic = _topic(broker, group)
        _produce(broker, topic, [b"r%d" % i for i in range(10)])
        consumer = _consumer(broker, group, topic, explicit=True)
        got = _poll_until(consumer, lambda got: len(got) >= 10)
        for message in got[:5]:
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        consumer.acknowledge(got[5], AcknowledgeType.RELEASE)
        assert all(error is None for error in consumer.commit_sync(10).values())
        # r6..r9 stay acquired, unacknowledged, when the broker dies
        broker.restart(hard=True)
        consumer.close()
        after = _consumer(broker, group, topic, explicit=True)
        try:
            again = _poll_until(after, lambda got: len(got) >= 5)
            assert [(m.offset(), m.delivery_count()) for m in again] == [(5, 2), (6, 1), (7, 1), (8, 1), (9, 1)]
            _ack_all(after, again, AcknowledgeType.ACCEPT)
            assert _poll_until(after, lambda got: bool(got), deadline_s=1.5) == []
        finally:
            after.close()
