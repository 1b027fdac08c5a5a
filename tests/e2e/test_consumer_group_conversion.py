"""Moving a group between the KIP-848 consumer protocol and the classic one with librdkafka: once the
consumer group is empty, a classic consumer's JoinGroup replaces it by a classic group (Kafka's
maybeDeleteEmptyConsumerGroup) and goes on from the offsets the consumer-protocol member committed.
Non-empty groups convert online, as Kafka 4.1's group.consumer.migration.policy=bidirectional: a
consumer-protocol member joining a classic group upgrades it (the classic members go on inside the
consumer group, their partitions handed out by the server-side assignor through SyncGroup), and when
it leaves, the group goes back to classic."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.types import GroupId
from minikafka.protocol.codec import decode_response, encode_request
from minikafka.protocol.errors import ErrorCode
from minikafka.testing import Broker

from tests.e2e.test_consumer_protocol import _join_request, _wire_heartbeat
from tests.support.produce import produce_numbers
from tests.support.waiting import poll_until
from tests.support.wire import Wire

PARTITIONS = 3
FIRST, SECOND = range(0, 30), range(30, 60)


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({"group.consumer.heartbeat.interval.ms": "300"}, mode="inprocess") as running:
        yield running


def _consume(consumer: Consumer, expected: int, timeout: float = 30.0) -> list[int]:
    values: list[int] = []
    deadline = time.monotonic() + timeout
    while len(values) < expected:
        assert time.monotonic() < deadline, f"got {len(values)} of {expected} records"
        message = consumer.poll(0.1)
        if message is not None and not message.error():
            values.append(int(message.value()))
    return values


def _group_type(admin: AdminClient, group: str) -> Any:
    return admin.describe_consumer_groups([group])[group].result(15).type


def test_a_classic_consumer_takes_over_an_empty_consumer_group(broker: Broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(15)
    produce_numbers(broker.bootstrap_servers, topic, FIRST, PARTITIONS)
    common = {"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False}
    modern = Consumer({**common, "group.protocol": "consumer"})
    try:
        modern.subscribe([topic])
        assert sorted(_consume(modern, len(FIRST))) == list(FIRST)
        modern.commit(asynchronous=False)
        assert _group_type(admin, group).name == "CONSUMER"
    finally:
        modern.close()
    produce_numbers(broker.bootstrap_servers, topic, SECOND, PARTITIONS)
    classic = Consumer({**common, "group.protocol": "classic", "session.timeout.ms": 6000})
    try:
        classic.subscribe([topic])
        # It starts from the consumer group's committed offsets: only the second batch, no record twice.
        assert sorted(_consume(classic, len(SECOND))) == list(SECOND)
        assert _group_type(admin, group).name == "CLASSIC"
    finally:
        classic.close()


# -- non-empty groups (Kafka 4.1's online migration, group.consumer.migration.policy=bidirectional) ----

MIGRATION_PARTITIONS = 6
RETRIABLE_COMMIT_ERRORS = (KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS,
                           KafkaError.UNKNOWN_MEMBER_ID, KafkaError.STALE_MEMBER_EPOCH)


class Ledger:
    """What the consumers delivered, and what each processed and committed (by record value). Each
    consumer commits what it processed before it polls again; a commit refused because the member's
    generation or epoch moved on is tried again while the consumer still owns the partition (a commit
    covers every earlier offset), and dropped once the partition has moved: its new owner resumes from
    the last committed offset (at least once). A record committed by two consumers would mean two
    members owned its partition at once."""

    def __init__(self) -> None:
        self.delivered: set[int] = set()
        self.committed: dict[int, list[str]] = {}
        self.by_member: dict[str, int] = {}
        # consumer -> (topic, partition) -> [(offset, value)] delivered and not committed yet
        self._pending: dict[str, dict[tuple[str, int], list[tuple[int, int]]]] = {}

    def take(self, name: str, consumer: Consumer, message: Any) -> None:
        pending = self._pending.setdefault(name, {})
        if message is not None:
            assert message.error() is None, message.error()
            value = int(message.value())
            self.delivered.add(value)
            pending.setdefault((message.topic(), message.partition()), []).append((message.offset(), value))
        owned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
        for tp, records in pending.items():
            if not records:
                continue
            if tp not in owned:
                records.clear()
                continue
            try:
                consumer.commit(offsets=[TopicPartition(tp[0], tp[1], records[-1][0] + 1)], asynchronous=False)
            except KafkaException as exc:
                if exc.args[0].code() not in RETRIABLE_COMMIT_ERRORS:
                    raise
                continue
            for _offset, value in records:
                self.committed.setdefault(value, []).append(name)
            self.by_member[name] = self.by_member.get(name, 0) + len(records)
            records.clear()

    def twice(self) -> dict[int, list[str]]:
        return {value: names for value, names in self.committed.items() if len(names) > 1}


def _poll_until(consumers: dict[str, Consumer], ledger: Ledger, done: Any, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"not reached: committed {len(ledger.committed)}, by {ledger.by_member}"
        for name, consumer in consumers.items():
            ledger.take(name, consumer, consumer.poll(0.05))


def _partitions(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def _exclusive_cover(consumers: dict[str, Consumer]) -> bool:
    owned = [_partitions(c) for c in consumers.values()]
    return all(owned) and sum(len(o) for o in owned) == MIGRATION_PARTITIONS \
        and set().union(*owned) == set(range(MIGRATION_PARTITIONS))


def _committed_offsets(broker: Broker, group: str, topic: str) -> dict[int, int]:
    return _committed_offsets_at(broker.bootstrap_servers, group, topic)


def _committed_offsets_at(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(MIGRATION_PARTITIONS)])
    listed = admin.list_consumer_group_offsets([request])[group].result(15)
    return {tp.partition: tp.offset for tp in listed.topic_partitions}


def _ends(values: range) -> dict[int, int]:
    """The end offset of each partition of a fresh topic after `values` were produced round the partitions."""
    return {p: len([v for v in values if v % MIGRATION_PARTITIONS == p]) for p in range(MIGRATION_PARTITIONS)}


@pytest.mark.parametrize("strategy", ["range,roundrobin", "cooperative-sticky"], ids=["eager", "cooperative"])
def test_a_consumer_member_upgrades_a_consuming_classic_group_and_leaving_downgrades_it(broker: Broker,
                                                                                       strategy: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, MIGRATION_PARTITIONS, 1)])[topic].result(15)
    common = {"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False}
    classic_config = {**common, "group.protocol": "classic", "session.timeout.ms": 6000,
                      "heartbeat.interval.ms": 300, "partition.assignment.strategy": strategy}
    ledger = Ledger()
    classics = {"classic-1": Consumer({**classic_config, "client.id": "classic-1"}),
                "classic-2": Consumer({**classic_config, "client.id": "classic-2"})}
    modern = Consumer({**common, "group.protocol": "consumer", "client.id": "modern"})
    try:
        for consumer in classics.values():
            consumer.subscribe([topic])
        first = range(0, 300)
        produce_numbers(broker.bootstrap_servers, topic, first, MIGRATION_PARTITIONS)
        _poll_until(classics, ledger, lambda: len(ledger.committed) >= 100 and _exclusive_cover(classics))
        assert _group_type(admin, group).name == "CLASSIC"

        # Upgrade: a consumer-protocol member joins the classic group while it consumes.
        modern.subscribe([topic])
        everyone = {**classics, "modern": modern}
        second = range(300, 600)
        produce_numbers(broker.bootstrap_servers, topic, second, MIGRATION_PARTITIONS)
        _poll_until(everyone, ledger, lambda: len(ledger.committed) == 600 and ledger.by_member.get("modern", 0) > 0
                    and _exclusive_cover(everyone))
        assert _group_type(admin, group).name == "CONSUMER"
        described = admin.describe_consumer_groups([group])[group].result(15)
        assert len(described.members) == 3
        assert not ledger.twice()
        assert _committed_offsets(broker, group, topic) == _ends(range(0, 600))

        # Downgrade: the consumer-protocol member leaves; the classic members carry on in a classic group.
        modern.close()
        third = range(600, 900)
        produce_numbers(broker.bootstrap_servers, topic, third, MIGRATION_PARTITIONS)
        _poll_until(classics, ledger, lambda: len(ledger.committed) == 900 and _exclusive_cover(classics))
        assert _group_type(admin, group).name == "CLASSIC"
        assert not ledger.twice()
        assert ledger.delivered == set(range(900))
        assert _committed_offsets(broker, group, topic) == _ends(range(0, 900))
    finally:
        for consumer in classics.values():
            consumer.close()


def _member_types(broker: Broker, group: str) -> dict[str, tuple[int, int]] | None:
    """{member id: (member type, member epoch)} by ConsumerGroupDescribe v1 (type 0 classic, 1 consumer
    protocol), or None while the coordinator is loading or the group is not a consumer group."""
    wire = Wire(broker)
    try:
        wire.send(encode_request(1, ConsumerGroupDescribeRequest(
            group_ids=(GroupId(group),), include_authorized_operations=False)))
        _corr, response = decode_response(wire.receive(), 69, 1)
    finally:
        wire.sock.close()
    (described,) = response.groups
    if described.error_code != ErrorCode.none:
        return None
    return {m.member_id: (int(m.member_type), int(m.member_epoch)) for m in described.members}


@pytest.mark.parametrize("hard", [False, True], ids=["sigterm", "kill-9"])
def test_a_mixed_group_goes_on_after_a_broker_restart(broker_factory: Any, hard: bool) -> None:
    broker: Broker = broker_factory(**{"group.consumer.heartbeat.interval.ms": "300",
                                              "offsets.topic.num.partitions": "3"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, MIGRATION_PARTITIONS, 1)])[topic].result(15)
    common = {"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False}
    ledger = Ledger()
    consumers = {
        "classic": Consumer({**common, "group.protocol": "classic", "session.timeout.ms": 10000,
                             "heartbeat.interval.ms": 300}),
        "modern": Consumer({**common, "group.protocol": "consumer"}),
    }
    try:
        consumers["classic"].subscribe([topic])
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for value in range(0, 120):
            producer.produce(topic, str(value).encode(), partition=value % MIGRATION_PARTITIONS)
        assert producer.flush(15) == 0
        _poll_until({"classic": consumers["classic"]}, ledger, lambda: len(ledger.committed) >= 30)
        consumers["modern"].subscribe([topic])
        _poll_until(consumers, ledger, lambda: len(ledger.committed) == 120 and _exclusive_cover(consumers))
        before = _member_types(broker, group)
        assert before is not None and sorted(t for t, _ in before.values()) == [0, 1]

        broker.restart(hard=hard)
        deadline = time.monotonic() + 30
        while (after := _member_types(broker, group)) is None:
            assert time.monotonic() < deadline, "the consumer group did not come back"
            time.sleep(0.1)
        # Replayed with its classic member (ClassicMemberMetadata) and both members' epochs.
        assert after == before
        for value in range(120, 240):
            producer.produce(topic, str(value).encode(), partition=value % MIGRATION_PARTITIONS)
        assert producer.flush(30) == 0
        _poll_until(consumers, ledger, lambda: len(ledger.committed) == 240 and _exclusive_cover(consumers))
        assert not ledger.twice() and ledger.delivered == set(range(240))
        assert _committed_offsets_at(broker.bootstrap_servers, group, topic) == _ends(range(240))
    finally:
        for consumer in consumers.values():
            consumer.close()


def test_kafka_python_and_aiokafka_classic_members_inside_a_consumer_group(broker: Broker) -> None:
    """kafka-python and aiokafka (classic protocol only) join a consumer group next to a librdkafka
    consumer-protocol member: the server-side assignor splits the partitions among all three through
    SyncGroup; when the consumer-protocol member leaves, the group is classic again and the two
    classic clients share the partitions by themselves."""
    kafka_python = pytest.importorskip("tests.e2e.test_groups_kafka_python")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, MIGRATION_PARTITIONS, 1)])[topic].result(15)
    modern = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                       "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    modern_open = True
    old = aio = None
    try:
        modern.subscribe([topic])

        def modern_assigned() -> bool:
            modern.poll(0.05)  # the topic is empty: this only drives librdkafka's callbacks
            return bool(modern.assignment())

        # The consumer group exists before the classic clients come. Started together, a loaded
        # machine can let them form a classic group first, which the consumer-protocol member then
        # converts while the classic leader's SyncGroup is under way: that SyncGroup names the group's
        # chosen protocol, not the member's first, and gets INCONSISTENT_GROUP_PROTOCOL (Kafka's
        # classicGroupSyncToConsumerGroup checks the same), which kafka-python treats as fatal.
        poll_until(modern_assigned, timeout=60, message="the consumer-protocol member's assignment")
        old = kafka_python.Polled(kafka_python.consumer(broker.bootstrap_servers, group, topic))
        aio = _AiokafkaMember(broker.bootstrap_servers, group, topic)

        def split(members: list[Any]) -> bool:
            owned = [{tp.partition for tp in m.assignment()} for m in members]
            return all(owned) and sum(len(o) for o in owned) == MIGRATION_PARTITIONS \
                and set().union(*owned) == set(range(MIGRATION_PARTITIONS))

        def three_split() -> bool:
            modern.poll(0.05)
            return split([modern, old, aio])

        poll_until(three_split, timeout=60, message="three members to split")
        assert _group_type(admin, group).name == "CONSUMER"
        modern.close()
        modern_open = False
        poll_until(lambda: split([old, aio]), timeout=60, message="the classic members to split")
        assert _group_type(admin, group).name == "CLASSIC"
    finally:
        # Closed here even when an assertion failed: a CI run's failure leaked this consumer, which
        # went on reconnecting to the stopped broker through the next tests.
        if modern_open:
            modern.close()
        if old is not None:
            old.close()
        if aio is not None:
            aio.close()


class _AiokafkaMember:
    """An aiokafka consumer on its own event loop thread; `assignment()` as the other clients'."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        aiokafka = pytest.importorskip("aiokafka")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

        async def start() -> Any:
            consumer = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                                 auto_offset_reset="earliest", session_timeout_ms=6000,
                                                 heartbeat_interval_ms=300, metadata_max_age_ms=1000)
            await consumer.start()
            return consumer

        self._consumer = asyncio.run_coroutine_threadsafe(start(), self._loop).result(30)
        self._poller = asyncio.run_coroutine_threadsafe(self._poll(), self._loop)

    async def _poll(self) -> None:
        while True:
            await self._consumer.getmany(timeout_ms=200)

    def assignment(self) -> set[Any]:
        return set(self._consumer.assignment())

    def close(self) -> None:
        self._poller.cancel()
        asyncio.run_coroutine_threadsafe(self._consumer.stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
def test_the_migration_policy_can_refuse_the_upgrade(policy: str) -> None:
    """`group.consumer.migration.policy` without upgrades: a consumer-protocol join of a classic group
    that has members is GROUP_ID_NOT_FOUND with Kafka's message, and the classic members go on."""
    with Broker({"group.consumer.migration.policy": policy}, mode="inprocess") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(topic, MIGRATION_PARTITIONS, 1)])[topic].result(15)
        classic = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                            "group.protocol": "classic", "session.timeout.ms": 6000})
        try:
            classic.subscribe([topic])
            poll_until(lambda: classic.poll(0.05) is None and len(_partitions(classic)) == MIGRATION_PARTITIONS,
                       timeout=30, message="the classic consumer to get every partition")
            wire = Wire(broker)
            try:
                refused = _wire_heartbeat(wire, _join_request(group, uuid.uuid4().hex, (topic,)))
            finally:
                wire.sock.close()
            assert refused.error_code == ErrorCode.group_id_not_found
            assert refused.error_message == (f"Cannot upgrade classic group {group} to consumer group because "
                                             f"online upgrade is disabled.")
            assert _group_type(admin, group).name == "CLASSIC"
            assert len(_partitions(classic)) == MIGRATION_PARTITIONS
        finally:
            classic.close()
