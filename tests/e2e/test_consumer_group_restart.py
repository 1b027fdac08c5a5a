"""KIP-848 consumer groups survive a broker restart: two confluent-kafka (librdkafka) consumers with
`group.protocol=consumer` keep their member ids, epochs and partitions across a clean stop and a
kill -9 of the broker subprocess (same port, same data directory), and consume on without a rebalance.
And `dump-log --offsets-decoder` reads the ConsumerGroup* records the broker wrote, and consumer group
offsets expire by `offsets.retention.ms` (manual clock).
"""

from __future__ import annotations

import dataclasses
import io
import json
import time
import uuid
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Message, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.offset_commit.v9.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i64
from minikafka.coordinator.hashing import partition_for
from minikafka.protocol.codec import decode_response, encode_request
from minikafka.protocol.errors import ErrorCode
from minikafka.testing import Broker
from minikafka.tools.dump_log import main as dump_log

from tests.e2e.test_consumer_protocol import _join_request, _wire_heartbeat
from tests.support.produce import produce_numbers
from tests.support.wire import Wire

PARTITIONS = 4
BATCH = 40
HEARTBEAT_MS = 300
OFFSETS_PARTITIONS = 3
# librdkafka speaks KIP-848's ConsumerGroupHeartbeat from 2.12 on (GA).
MIN_LIBRDKAFKA = 0x020C0000

Described = tuple[int, dict[str, tuple[int, frozenset[int]]]]


@pytest.fixture(autouse=True)
def _new_enough_librdkafka() -> None:
    if confluent_kafka.libversion()[1] < MIN_LIBRDKAFKA:
        pytest.fail(f"librdkafka {confluent_kafka.libversion()[0]} has no group.protocol=consumer")


def _describe(broker: Broker, group: str) -> Described | None:
    """(group epoch, {member id: (member epoch, partitions)}) by ConsumerGroupDescribe, or None while
    the coordinator is loading or the group is not Stable."""
    wire = Wire(broker)
    try:
        wire.send(encode_request(1, ConsumerGroupDescribeRequest(
            group_ids=(GroupId(group),), include_authorized_operations=False)))
        _corr, response = decode_response(wire.receive(), 69, 1)
    finally:
        wire.sock.close()
    (described,) = response.groups
    if described.error_code != ErrorCode.none or described.group_state != "Stable":
        return None
    members = {
        m.member_id: (m.member_epoch, frozenset(p for tp in m.assignment.topic_partitions for p in tp.partitions))
        for m in described.members
    }
    return described.group_epoch, members


def _wait_described(broker: Broker, group: str, members: int, timeout: float = 30.0) -> Described:
    deadline = time.monotonic() + timeout
    while True:
        described = _describe(broker, group)
        if described is not None and len(described[1]) == members:
            return described
        assert time.monotonic() < deadline, f"group {group} not Stable with {members} members: {described}"
        time.sleep(0.1)


class Tracked:
    """A consumer and everything it was given: records by partition, and its rebalance callbacks."""

    def __init__(self, broker: Broker, group: str, topic: str) -> None:
        self.events: list[str] = []
        self.records: dict[int, list[int]] = {}
        self.consumer = Consumer({
            "bootstrap.servers": broker.bootstrap_servers, "group.id": group, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
        })
        self.consumer.subscribe([topic], on_assign=self._on("assign"), on_revoke=self._on("revoke"),
                                on_lost=self._on("lost"))

    def _on(self, kind: str) -> Any:
        def callback(_consumer: Consumer, partitions: list[Any]) -> None:
            self.events.append(f"{kind} {sorted(tp.partition for tp in partitions)}")
        return callback

    def poll(self) -> None:
        message: Message | None = self.consumer.poll(0.05)
        if message is None or message.error() is not None:
            return  # transport errors while the broker is down are expected
        self.records.setdefault(message.partition(), []).append(message.offset())

    def assigned(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.assignment())


def _poll_until(consumers: list[Tracked], done: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, [(c.records, c.events) for c in consumers]
        for consumer in consumers:
            consumer.poll()


def _total(consumers: list[Tracked]) -> int:
    return sum(len(offsets) for c in consumers for offsets in c.records.values())


@pytest.mark.parametrize("hard", [False, True], ids=["sigterm", "kill-9"])
def test_consumers_keep_their_assignment_across_a_broker_restart(broker_factory: Any, hard: bool) -> None:
    broker: Broker = broker_factory(**{
        "group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS),
        "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    })
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(15)
    consumers = [Tracked(broker, group, topic), Tracked(broker, group, topic)]
    try:
        # Each member owns its half before anything is produced: the member that joins first takes every
        # partition, and with nothing committed the other would read the partitions it is given from 0 again
        # (a loaded CI run let the first member read records before the second one joined).
        _poll_until(consumers, lambda: all(len(c.assigned()) == PARTITIONS // 2 for c in consumers)
                    and _describe(broker, group) is not None)
        produce_numbers(broker.bootstrap_servers, topic, range(BATCH), PARTITIONS, timeout=30)
        _poll_until(consumers, lambda: _total(consumers) == BATCH)
        before = _wait_described(broker, group, 2)
        owners_before = [c.assigned() for c in consumers]
        assert sorted(p for epoch_parts in before[1].values() for p in epoch_parts[1]) == list(range(PARTITIONS))
        events_before = [list(c.events) for c in consumers]

        broker.restart(hard=hard)
        # Straight after the load: the same group, members, epochs and partitions (nothing rejoined).
        assert _wait_described(broker, group, 2) == before
        produce_numbers(broker.bootstrap_servers, topic, range(BATCH, 2 * BATCH), PARTITIONS, timeout=30)
        _poll_until(consumers, lambda: _total(consumers) == 2 * BATCH)
        # A few heartbeats later, still nothing moved: no epoch bump, no callback, same owners.
        heartbeats_done = time.monotonic() + 3 * HEARTBEAT_MS / 1000
        _poll_until(consumers, lambda: time.monotonic() > heartbeats_done)
        assert _wait_described(broker, group, 2) == before
        assert [c.events for c in consumers] == events_before
        assert [c.assigned() for c in consumers] == owners_before
        for consumer, owned in zip(consumers, owners_before, strict=True):
            # Each went on with its own partitions, from where it was, without a duplicate.
            assert set(consumer.records) <= owned
            for offsets in consumer.records.values():
                assert offsets == list(range(len(offsets)))
        assert _total(consumers) == 2 * BATCH
    finally:
        for consumer in consumers:
            consumer.consumer.close()


def test_dump_log_decodes_the_consumer_group_records(broker_factory: Any) -> None:
    broker: Broker = broker_factory(**{
        "group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS),
        "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    })
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(15)
    consumer = Tracked(broker, group, topic)
    try:
        _poll_until([consumer], lambda: len(consumer.assigned()) == PARTITIONS)
        (member_id,) = _wait_described(broker, group, 1)[1]
    finally:
        consumer.consumer.close()  # leaves: the member's tombstones follow
    broker.stop()
    partition_dir = Path(broker.data_dir) / f"__consumer_offsets-{partition_for(group, OFFSETS_PARTITIONS)}"
    out, err = io.StringIO(), io.StringIO()
    segments = sorted(str(p) for p in partition_dir.glob("*.log"))
    assert dump_log(["--files", *segments, "--offsets-decoder", "--json"], out, err) == 0, err.getvalue()
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    records = [(e["key"], e["payload"]) for e in events if "payload" in e]
    ours = [(key["type"], payload) for key, payload in records if key["data"].get("groupId") == group]
    types = [record_type for record_type, payload in ours if payload is not None]
    # The join: subscription, group epoch, target, assignment epoch, current assignment.
    assert types[:5] == ["5", "3", "7", "6", "8"]
    subscription = next(payload["data"] for record_type, payload in ours if record_type == "5" and payload)
    assert subscription["subscribedTopicNames"] == [topic] and subscription["rebalanceTimeoutMs"] > 0
    current = next(payload["data"] for record_type, payload in ours if record_type == "8" and payload)
    assert current["memberEpoch"] == 1
    assert sorted(current["assignedPartitions"][0]["partitions"]) == list(range(PARTITIONS))
    member_tombstones = [(key["type"], key["data"]["memberId"]) for key, payload in records
                         if payload is None and key["data"].get("memberId") == member_id]
    assert member_tombstones == [("8", member_id), ("7", member_id), ("5", member_id)]
    # The leave, last: the member's tombstones, the bumped group epoch, the (empty) target's epoch.
    assert [(record_type, payload is None) for record_type, payload in ours[-5:]] == [
        ("8", True), ("7", True), ("5", True), ("3", False), ("6", False)]


RETENTION_MS = 10_000
CHECK_MS = 1_000


def _commit(wire: Wire, group: str, member: str, epoch: int, topic: str, offset: int) -> ErrorCode:
    wire.send(encode_request(2, OffsetCommitRequest(
        group_id=GroupId(group), generation_id_or_member_epoch=i32(epoch), member_id=member,
        group_instance_id=None, topics=(OffsetCommitRequestTopic(name=TopicName(topic), partitions=(
            OffsetCommitRequestPartition(partition_index=i32(0), committed_offset=i64(offset),
                                         committed_leader_epoch=i32(-1), committed_metadata=""),
        )),),
    )))
    _corr, response = decode_response(wire.receive(), 8, 9)
    return ErrorCode(response.topics[0].partitions[0].error_code)


def test_consumer_group_offsets_expire_as_kafkas() -> None:
    """offsets.retention.ms on the manual clock: an offset of a topic the group does not subscribe to
    expires while the member lives; once the group is empty, the rest expire and the group is deleted."""
    overrides = {"minikafka.clock": "manual", "offsets.retention.ms": str(RETENTION_MS),
                 "offsets.retention.check.interval.ms": str(CHECK_MS)}
    with Broker(overrides, mode="inprocess") as broker:
        subscribed, other, group = (f"{p}-{uuid.uuid4().hex[:8]}" for p in ("sub", "other", "g"))
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        for topic in (subscribed, other):
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
        wire = Wire(broker)
        joined = _wire_heartbeat(wire, _join_request(group, "m1", (subscribed,)))
        assert (joined.error_code, joined.member_epoch) == (ErrorCode.none, 1)
        assert _commit(wire, group, "m1", 1, subscribed, 5) == ErrorCode.none
        assert _commit(wire, group, "m1", 1, other, 7) == ErrorCode.none

        def committed() -> dict[str, int]:
            request = ConsumerGroupTopicPartitions(group, [TopicPartition(subscribed, 0), TopicPartition(other, 0)])
            result = admin.list_consumer_group_offsets([request])[group].result(10)
            return {tp.topic: tp.offset for tp in result.topic_partitions if tp.offset >= 0}

        assert committed() == {subscribed: 5, other: 7}
        broker.advance_clock(RETENTION_MS + CHECK_MS)
        # The member's session (45 s) is still on; only the unsubscribed topic's offset went.
        assert committed() == {subscribed: 5}
        leave = dataclasses.replace(_join_request(group, "m1", (subscribed,)), member_epoch=i32(-1))
        left = _wire_heartbeat(wire, leave, correlation=3)
        assert left.error_code == ErrorCode.none
        assert group in {g.group_id for g in admin.list_consumer_groups().result(10).valid}
        broker.advance_clock(CHECK_MS)
        assert committed() == {}
        assert group not in {g.group_id for g in admin.list_consumer_groups().result(10).valid}
