"""KIP-848 consumer groups with librdkafka's `group.protocol=consumer`, and the wire's error cases.

The brokers run in process (minikafka.testing.Broker). The heartbeat interval the broker hands out is
shortened so reconciliation steps (one heartbeat each) do not stretch the tests; the session timeout is
reached by moving the manual clock, never by waiting.
"""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.consumer_group_heartbeat.v1.request import TopicPartitions as OwnedPartitions
from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.offset_commit.v9.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_fetch.v9.request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i32Timedelta, i64
from minikafka.protocol.codec import decode_response, encode_request
from minikafka.protocol.errors import ErrorCode
from minikafka.testing import Broker

from tests.support.clients import create_topic
from tests.support.produce import produce_numbers
from tests.support.wire import Wire

HEARTBEAT_MS = 300
SESSION_MS = 45_000
FAST = {"group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS)}
PARTITIONS = 6
COMMIT_ATTEMPTS = 20


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker(FAST, mode="inprocess") as running:
        yield running


@pytest.fixture
def manual_broker() -> Iterator[Broker]:
    with Broker({**FAST, "minikafka.clock": "manual"}, mode="inprocess") as running:
        yield running


def _consumer(broker: Broker, group: str, **extra: Any) -> Consumer:
    return Consumer({
        "bootstrap.servers": broker.bootstrap_servers, "group.id": group, "group.protocol": "consumer",
        "auto.offset.reset": "earliest", "enable.auto.commit": False, **extra,
    })


def _members(broker: Broker, group: str) -> list[dict[str, Any]]:
    members: list[dict[str, Any]] = broker.state()["groups"].get(group, {}).get("members", [])
    return members


def _stable_with(broker: Broker, group: str, count: int) -> bool:
    state = broker.state()["groups"].get(group, {})
    return state.get("state") == "Stable" and len(state.get("members", [])) == count


class Consumed:
    """Every record the consumers deliver, by (partition, offset), with who got it."""

    def __init__(self) -> None:
        self.by_position: dict[tuple[int, int], list[str]] = {}
        self.stale_commits = 0

    def take(self, name: str, consumer: Consumer, message: Message | None) -> None:
        if message is None:
            return
        assert message.error() is None, message.error()
        self.by_position.setdefault((message.partition(), message.offset()), []).append(name)
        # Commit what was processed before asking for more: a partition that moves to another member
        # resumes right after it, so no record is delivered twice. A commit racing a heartbeat that
        # bumped the member epoch is STALE_MEMBER_EPOCH (Kafka 4.1 checks the epoch exactly); the
        # client has the new epoch once that answer is in, so the commit is retried, as an
        # application would.
        for attempt in range(COMMIT_ATTEMPTS):
            try:
                consumer.commit(message=message, asynchronous=False)
                return
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.STALE_MEMBER_EPOCH or attempt == COMMIT_ATTEMPTS - 1:
                    raise
                self.stale_commits += 1

    def values(self) -> int:
        return len(self.by_position)

    def duplicates(self) -> dict[tuple[int, int], list[str]]:
        return {pos: names for pos, names in self.by_position.items() if len(names) > 1}


def _poll_all(consumers: dict[str, Consumer], consumed: Consumed, until: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not until():
        assert time.monotonic() < deadline, "condition not reached"
        for name, consumer in consumers.items():
            consumed.take(name, consumer, consumer.poll(0.05))


def _assigned(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def test_join_consume_commit_and_list(broker: Broker) -> None:
    topic, group = _name("t"), _name("g")
    create_topic(broker.bootstrap_servers, topic, PARTITIONS)
    produce_numbers(broker.bootstrap_servers, topic, range(60), PARTITIONS)
    consumer = _consumer(broker, group)
    try:
        consumer.subscribe([topic])
        consumed = Consumed()
        _poll_all({"c": consumer}, consumed, lambda: consumed.values() == 60)
        assert _assigned(consumer) == set(range(PARTITIONS))
        committed = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        assert [tp.offset for tp in committed] == [10] * PARTITIONS
        state = broker.wait_for(lambda s: _stable_with(broker, group, 1))["groups"][group]
        assert state["type"] == "consumer" and state["group_epoch"] == state["assignment_epoch"] >= 1
        member = state["members"][0]
        assert member["assigned"] == {topic: list(range(PARTITIONS))}
        assert member["member_epoch"] == state["assignment_epoch"]

        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        listed = {g.group_id: g for g in admin.list_consumer_groups().result(10).valid}
        assert listed[group].type.name == "CONSUMER" and listed[group].state.name == "STABLE"
        described = admin.describe_consumer_groups([group])[group].result(10)
        assert described.type.name == "CONSUMER" and len(described.members) == 1
        assert {tp.partition for tp in described.members[0].assignment.topic_partitions} == set(range(PARTITIONS))
    finally:
        consumer.close()
    # close() leaves the group (member epoch -1): the group is empty at once.
    broker.wait_for(lambda s: s["groups"][group]["state"] == "Empty" and not s["groups"][group]["members"])


def test_scale_out_to_three_and_back_in(broker: Broker) -> None:
    topic, group = _name("t"), _name("g")
    create_topic(broker.bootstrap_servers, topic, PARTITIONS)
    consumed = Consumed()
    consumers = {"c1": _consumer(broker, group)}
    try:
        consumers["c1"].subscribe([topic])
        produce_numbers(broker.bootstrap_servers, topic, range(0, 120), PARTITIONS)
        _poll_all(consumers, consumed, lambda: consumed.values() == 120)

        for name in ("c2", "c3"):
            consumers[name] = _consumer(broker, group)
            consumers[name].subscribe([topic])
        produce_numbers(broker.bootstrap_servers, topic, range(120, 240), PARTITIONS)

        def spread() -> bool:
            owned = [_assigned(c) for c in consumers.values()]
            disjoint = sum(map(len, owned)) == len(set().union(*owned))
            if not disjoint:  # a partition is never handed over before its owner gave it up
                pytest.fail(f"a partition has two owners: {owned}")
            return (consumed.values() == 240 and _stable_with(broker, group, 3)
                    and sorted(len(o) for o in owned) == [2, 2, 2])

        _poll_all(consumers, consumed, spread)
        assert not consumed.duplicates()

        for name in ("c3", "c2"):
            consumers.pop(name).close()
        produce_numbers(broker.bootstrap_servers, topic, range(240, 360), PARTITIONS)
        _poll_all(consumers, consumed, lambda: consumed.values() == 360 and _stable_with(broker, group, 1))
        assert _assigned(consumers["c1"]) == set(range(PARTITIONS))
        assert not consumed.duplicates()
        assert set(consumed.by_position) == {(v % PARTITIONS, v // PARTITIONS) for v in range(360)}
        # After the scale-out, records were consumed by all three members.
        assert {n for names in consumed.by_position.values() for n in names} == {"c1", "c2", "c3"}
    finally:
        for consumer in consumers.values():
            consumer.close()


def _wire_heartbeat(wire: Wire, request: ConsumerGroupHeartbeatRequest, correlation: int = 1) -> Any:
    wire.send(encode_request(correlation, request))
    _corr, response = decode_response(wire.receive(), 68, 1)
    return response


def _join_request(group: str, member: str, topics: tuple[str, ...]) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(
        group_id=GroupId(group), member_id=member, member_epoch=i32(0),
        rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)),
        subscribed_topic_names=tuple(TopicName(t) for t in topics), topic_partitions=(),
    )


def test_crashed_member_is_removed_after_the_session_timeout(manual_broker: Broker) -> None:
    broker = manual_broker
    topic, group = _name("t"), _name("g")
    create_topic(broker.bootstrap_servers, topic, PARTITIONS)
    produce_numbers(broker.bootstrap_servers, topic, range(60), PARTITIONS)
    # The member that crashes speaks the wire directly: it joins, gets partitions, and goes silent
    # without leaving (as a killed process does).
    wire = Wire(broker)
    crashed = _wire_heartbeat(wire, _join_request(group, "crashed-member", (topic,)))
    assert crashed.error_code == ErrorCode.none and crashed.member_epoch == 1
    assert crashed.assignment is not None and len(crashed.assignment.topic_partitions[0].partitions) == PARTITIONS
    survivor = _consumer(broker, group)
    try:
        survivor.subscribe([topic])
        consumed = Consumed()
        # The crashed member never revokes, so the survivor gets nothing until the session ends.
        broker.wait_for(lambda s: len(_members(broker, group)) == 2)
        for _ in range(10):
            consumed.take("survivor", survivor, survivor.poll(0.05))
        assert consumed.values() == 0 and not _assigned(survivor)
        # Move the clock to just before the crashed member's deadline, let the survivor heartbeat
        # (renewing its own session from the new time), then past the deadline.
        crashed_deadline = next(m["session_deadline_ms"] for m in _members(broker, group)
                                if m["member_id"] == "crashed-member")
        now = broker.clock()["now_ms"]
        broker.advance_clock(crashed_deadline - now - 1)

        def survivor_renewed() -> bool:
            consumed.take("survivor", survivor, survivor.poll(0.05))
            member = next(m for m in _members(broker, group) if m["member_id"] != "crashed-member")
            return bool(member["session_deadline_ms"] > crashed_deadline)

        deadline = time.monotonic() + 15
        while not survivor_renewed():
            assert time.monotonic() < deadline
        broker.advance_clock(2)
        assert all(m["member_id"] != "crashed-member" for m in _members(broker, group))
        _poll_all({"survivor": survivor}, consumed, lambda: consumed.values() == 60)
        assert _assigned(survivor) == set(range(PARTITIONS))
        # The crashed member's next heartbeat finds it gone.
        late = _wire_heartbeat(wire, ConsumerGroupHeartbeatRequest(
            group_id=GroupId(group), member_id="crashed-member", member_epoch=i32(1), topic_partitions=None), 2)
        assert late.error_code == ErrorCode.unknown_member_id
    finally:
        survivor.close()
        wire.close()


def test_wire_errors_and_offset_commit_with_member_epochs(broker: Broker) -> None:
    topic, group = _name("t"), _name("g")
    create_topic(broker.bootstrap_servers, topic, 2)
    wire = Wire(broker)
    try:
        joined = _wire_heartbeat(wire, _join_request(group, "m1", (topic,)))
        assert (joined.error_code, joined.member_id, joined.member_epoch) == (ErrorCode.none, "m1", 1)
        assert joined.heartbeat_interval.total_seconds() * 1000 == HEARTBEAT_MS
        topic_id = joined.assignment.topic_partitions[0].topic_id

        def beat(epoch: int, member: str = "m1", owned: tuple[int, ...] | None = None) -> Any:
            owned_field = None if owned is None else (OwnedPartitions(topic_id=topic_id, partitions=tuple(
                i32(p) for p in owned)),)
            return _wire_heartbeat(wire, ConsumerGroupHeartbeatRequest(
                group_id=GroupId(group), member_id=member, member_epoch=i32(epoch), topic_partitions=owned_field))

        assert beat(7).error_code == ErrorCode.fenced_member_epoch
        assert beat(1, member="stranger").error_code == ErrorCode.unknown_member_id
        no_timeout = ConsumerGroupHeartbeatRequest(group_id=GroupId(group), member_id="m2", member_epoch=i32(0),
                                                   subscribed_topic_names=(TopicName(topic),), topic_partitions=())
        invalid = _wire_heartbeat(wire, no_timeout)
        assert invalid.error_code == ErrorCode.invalid_request
        assert invalid.error_message == "RebalanceTimeoutMs must be provided in first request."
        assert beat(1, owned=(0, 1)).error_code == ErrorCode.none

        def commit(epoch: int, member: str = "m1") -> ErrorCode:
            wire.send(encode_request(9, OffsetCommitRequest(
                group_id=GroupId(group), generation_id_or_member_epoch=i32(epoch), member_id=member,
                group_instance_id=None, topics=(OffsetCommitRequestTopic(name=TopicName(topic), partitions=(
                    OffsetCommitRequestPartition(partition_index=i32(0), committed_offset=i64(3),
                                                 committed_leader_epoch=i32(-1), committed_metadata=""),
                )),),
            )))
            _corr, response = decode_response(wire.receive(), 8, 9)
            return ErrorCode(response.topics[0].partitions[0].error_code)

        assert commit(1) == ErrorCode.none
        assert commit(0) == ErrorCode.stale_member_epoch
        assert commit(1, member="stranger") == ErrorCode.unknown_member_id

        def fetch(epoch: int, member: str | None) -> Any:
            wire.send(encode_request(10, OffsetFetchRequest(groups=(OffsetFetchRequestGroup(
                group_id=GroupId(group), member_id=member, member_epoch=i32(epoch),
                topics=(OffsetFetchRequestTopics(name=TopicName(topic), partition_indexes=(i32(0),)),)),),
                require_stable=False)))
            _corr, response = decode_response(wire.receive(), 9, 9)
            return response.groups[0]

        fetched = fetch(1, "m1")
        assert fetched.error_code == ErrorCode.none and fetched.topics[0].partitions[0].committed_offset == 3
        assert fetch(5, "m1").error_code == ErrorCode.stale_member_epoch
        assert fetch(-1, None).error_code == ErrorCode.none  # an admin fetch

        wire.send(encode_request(11, ListGroupsRequest(states_filter=(), types_filter=("consumer",))))
        _corr, listed = decode_response(wire.receive(), 16, 5)
        mine = [g for g in listed.groups if g.group_id == group]
        assert [(g.group_type, g.protocol_type, g.group_state) for g in mine] == [("consumer", "consumer", "Stable")]
        wire.send(encode_request(12, ListGroupsRequest(states_filter=(), types_filter=("classic",))))
        _corr, classic_only = decode_response(wire.receive(), 16, 5)
        assert all(g.group_id != group for g in classic_only.groups)

        wire.send(encode_request(13, ConsumerGroupDescribeRequest(
            group_ids=(GroupId(group), GroupId("no-such-group")), include_authorized_operations=False)))
        _corr, described = decode_response(wire.receive(), 69, 1)
        found, missing = described.groups
        assert (found.error_code, found.group_state, found.group_epoch, found.assignor_name) == (
            ErrorCode.none, "Stable", 1, "uniform")
        assert [(m.member_id, m.member_epoch, m.member_type) for m in found.members] == [("m1", 1, 1)]
        assert found.members[0].assignment.topic_partitions[0].topic_name == topic
        assert missing.error_code == ErrorCode.group_id_not_found

        # A classic JoinGroup for the consumer group's id: only the consumer protocol type may join it
        # (Kafka 4.1's classicGroupJoinToConsumerGroup), and a v4+ newcomer first gets its member id.
        def classic_join(protocol_type: str, correlation: int) -> Any:
            wire.send(encode_request(correlation, JoinGroupRequest(
                group_id=GroupId(group), session_timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
                rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)), member_id="",
                group_instance_id=None, protocol_type=protocol_type,
                protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),))))
            return decode_response(wire.receive(), 11, 5)[1]

        assert classic_join("connect", 14).error_code == ErrorCode.inconsistent_group_protocol
        assert classic_join("consumer", 15).error_code == ErrorCode.member_id_required

        left = beat(-1)
        assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)
        assert commit(-1, member="") == ErrorCode.none  # the group is empty: a simple commit is fine
    finally:
        wire.close()


def test_committed_offsets_survive_for_the_next_member(broker: Broker) -> None:
    """A member that committed and left: the next member of the group resumes after the commits."""
    topic, group = _name("t"), _name("g")
    create_topic(broker.bootstrap_servers, topic, PARTITIONS)
    produce_numbers(broker.bootstrap_servers, topic, range(30), PARTITIONS)
    first = _consumer(broker, group)
    consumed = Consumed()
    try:
        first.subscribe([topic])
        _poll_all({"first": first}, consumed, lambda: consumed.values() == 30)
    finally:
        first.close()
    produce_numbers(broker.bootstrap_servers, topic, range(30, 60), PARTITIONS)
    second = _consumer(broker, group)
    try:
        second.subscribe([topic])
        _poll_all({"second": second}, consumed, lambda: consumed.values() == 60)
        assert not consumed.duplicates()
        assert {names[0] for names in consumed.by_position.values()} == {"first", "second"}
    finally:
        second.close()


@pytest.mark.parametrize(("profile", "advertised"), [("3.6", None), ("3.9", (0, 0)), ("4.0", (0, 1)),
                                                     ("4.1", (0, 1))])
def test_apis_68_and_69_from_kafka_4(profile: str, advertised: tuple[int, int] | None) -> None:
    """Consumer groups are generally available from Kafka 4.0 (v0-1); a recorded 3.8 or 3.9 broker advertised
    v0 of both while they were an early-access preview, and 3.6 neither."""
    with Broker({"minikafka.kafka.version": profile}, mode="inprocess") as running:
        wire = Wire(running)
        try:
            wire.send(encode_request(1, ApiVersionsRequest()))
            _corr, response = decode_response(wire.receive(), 18, 0)
        finally:
            wire.close()
    keys = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert keys.get(68) == advertised and keys.get(69) == advertised


def test_static_member_restart_keeps_its_partitions(broker: Broker) -> None:
    topic, group = _name("t"), _name("g")
    create_topic(broker.bootstrap_servers, topic, PARTITIONS)
    consumed = Consumed()
    consumers = {"static": _consumer(broker, group, **{"group.instance.id": "instance-1"}),
                 "other": _consumer(broker, group)}
    try:
        for consumer in consumers.values():
            consumer.subscribe([topic])
        produce_numbers(broker.bootstrap_servers, topic, range(60), PARTITIONS)
        _poll_all(consumers, consumed, lambda: consumed.values() == 60 and _stable_with(broker, group, 2)
                  and all(len(_assigned(c)) == 3 for c in consumers.values()))
        before = broker.state()["groups"][group]
        static_partitions = _assigned(consumers["static"])
        # close() of a static member sends epoch -2: it stays in the group with its partitions.
        consumers.pop("static").close()
        broker.wait_for(lambda s: any(m["left_static"] for m in s["groups"][group]["members"]))
        restarted = _consumer(broker, group, **{"group.instance.id": "instance-1"})
        consumers["static"] = restarted
        restarted.subscribe([topic])
        produce_numbers(broker.bootstrap_servers, topic, range(60, 120), PARTITIONS)
        _poll_all(consumers, consumed, lambda: consumed.values() == 120 and _assigned(restarted) == static_partitions
                  and _stable_with(broker, group, 2))
        after = broker.state()["groups"][group]
        # No rebalance: the group epoch did not move and the other member kept its partitions.
        assert after["group_epoch"] == before["group_epoch"]
        assert not consumed.duplicates()
    finally:
        for consumer in consumers.values():
            consumer.close()


def test_regex_subscription_picks_up_a_new_topic(broker: Broker) -> None:
    prefix, group = _name("rx"), _name("g")
    first, second = f"{prefix}-a", f"{prefix}-b"
    create_topic(broker.bootstrap_servers, first, PARTITIONS)
    produce_numbers(broker.bootstrap_servers, first, range(30), PARTITIONS)
    consumer = _consumer(broker, group)
    consumed: dict[str, set[int]] = {}

    def poll_until(done: Any) -> None:
        deadline = time.monotonic() + 60
        while not done():
            assert time.monotonic() < deadline, "condition not reached"
            message = consumer.poll(0.05)
            if message is not None:
                assert message.error() is None, message.error()
                consumed.setdefault(message.topic(), set()).add(message.offset() * PARTITIONS + message.partition())

    try:
        consumer.subscribe([f"^{prefix}-.*"])
        poll_until(lambda: len(consumed.get(first, ())) == 30)
        member = _members(broker, group)[0]
        # librdkafka sends its regexes joined, each in parentheses.
        assert member["subscribed_topic_regex"] == f"(^{prefix}-.*)" and member["subscribed_topics"] == []
        create_topic(broker.bootstrap_servers, second, PARTITIONS)
        produce_numbers(broker.bootstrap_servers, second, range(30), PARTITIONS)
        poll_until(lambda: len(consumed.get(second, ())) == 30)
        assert {tp.topic for tp in consumer.assignment()} == {first, second}
    finally:
        consumer.close()


def test_consume_transform_produce_with_member_epochs(broker: Broker) -> None:
    """KIP-447 with a consumer-protocol group: TxnOffsetCommit carries the member id and epoch."""
    source, sink, group = _name("src"), _name("sink"), _name("g")
    create_topic(broker.bootstrap_servers, source, PARTITIONS)
    create_topic(broker.bootstrap_servers, sink, PARTITIONS)
    produce_numbers(broker.bootstrap_servers, source, range(30), PARTITIONS)
    consumer = _consumer(broker, group, **{"isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": _name("tx")})
    try:
        producer.init_transactions(15)
        consumer.subscribe([source])
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 30:
            assert time.monotonic() < deadline, "not everything consumed"
            message = consumer.poll(0.05)
            if message is None:
                continue
            assert message.error() is None, message.error()
            producer.begin_transaction()
            producer.produce(sink, message.value(), partition=message.partition())
            producer.send_offsets_to_transaction(
                [TopicPartition(source, message.partition(), message.offset() + 1)],
                consumer.consumer_group_metadata(), 15)
            producer.commit_transaction(15)
            seen += 1
        committed = consumer.committed([TopicPartition(source, p) for p in range(PARTITIONS)], timeout=10)
        assert [tp.offset for tp in committed] == [5] * PARTITIONS
        member = _members(broker, group)[0]
        assert member["member_epoch"] >= 1
    finally:
        consumer.close()
