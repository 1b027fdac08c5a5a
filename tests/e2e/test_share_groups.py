"""Share groups (KIP-932) with confluent-kafka's ShareConsumer (librdkafka 2.16): records handed out
to several consumers of one partition, acknowledgements (implicit and explicit ACCEPT, RELEASE,
REJECT), acquisition locks ending on the manual clock, the delivery limit, and the state in
`__share_group_state` across a kill -9 of the broker process."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Consumer, KafkaException, Message, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kio.index import load_request_schema
from kio.schema.alter_share_group_offsets.v0.request import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.delete_share_group_offsets.v0.request import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequestTopic,
)
from kio.schema.describe_share_group_offsets.v1.request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
)
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.share_acknowledge.v2 import request as share_ack
from kio.schema.share_fetch.v2 import request as share_fetch
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.share_group_heartbeat.v1 import request as share_heartbeat
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i8, i32, i64
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.build import build
from minikafka.protocol.codec import decode_response, encode_request
from minikafka.protocol.errors import ErrorCode
from minikafka.testing import Broker

from tests.e2e.test_acls import SECURED
from tests.e2e.test_acls import _config as acl_config
from tests.support.wire import Wire

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
    assert results and all(error is None for error in results.values()), results


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


def test_three_implicit_consumers_share_a_stream_without_duplicates(broker: Broker) -> None:
    group = _name("share")
    topic = _topic(broker, group)
    consumers = [_consumer(broker, group, topic) for _ in range(3)]
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    seen: list[tuple[int, bytes]] = []
    try:
        deadline = time.monotonic() + DEADLINE_S * 2
        for round_number in range(30):
            for i in range(10):  # records keep coming while the consumers read
                producer.produce(topic, value=b"s%d" % (round_number * 10 + i))
            producer.flush(10)
            for consumer in consumers:
                seen += [(m.offset(), m.value()) for m in consumer.poll(0.05) if m.error() is None]
        while len(seen) < 300 and time.monotonic() < deadline:
            for consumer in consumers:
                seen += [(m.offset(), m.value()) for m in consumer.poll(0.1) if m.error() is None]
        offsets = [offset for offset, _value in seen]
        assert len(offsets) == len(set(offsets)) == 300  # each record to one consumer, once
        assert sorted(value for _offset, value in seen) == sorted(b"s%d" % i for i in range(300))
        for consumer in consumers:
            consumer.commit_sync(10)
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
        results = consumer.commit_sync(10)
        assert results and all(error is None for error in results.values()), results
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


# --- the admin side: ShareGroupDescribe, ListGroups, ConsumerGroupDescribe, the offsets APIs, DeleteGroups ---


def _call(broker: Broker, request: Any) -> Any:
    wire = Wire(broker)
    try:
        wire.send(encode_request(1, request))
        _corr, response = decode_response(wire.receive(), request.__api_key__, request.__version__)
    finally:
        wire.close()
    return response


def _share_describe(broker: Broker, group: str) -> Any:
    (described,) = _call(broker, ShareGroupDescribeRequest(group_ids=(GroupId(group),),
                                                           include_authorized_operations=False)).groups
    return described


def _offsets(broker: Broker, group: str) -> dict[tuple[str, int], tuple[int, int]]:
    request = DescribeShareGroupOffsetsRequest(groups=(DescribeShareGroupOffsetsRequestGroup(
        group_id=GroupId(group), topics=None),))
    (answer,) = _call(broker, request).groups
    assert answer.error_code == ErrorCode.none
    return {(t.topic_name, p.partition_index): (p.start_offset, p.lag) for t in answer.topics for p in t.partitions}


def _listed(broker: Broker, kinds: tuple[str, ...]) -> dict[str, tuple[str, str, str]]:
    response = _call(broker, ListGroupsRequest(states_filter=(), types_filter=kinds))
    return {g.group_id: (g.protocol_type, g.group_state, g.group_type) for g in response.groups}


def _wait_members(broker: Broker, group: str, consumers: list[ShareConsumer], count: int) -> Any:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        described = _share_describe(broker, group)
        if described.error_code == ErrorCode.none and len(described.members) == count:
            return described
        assert time.monotonic() < deadline, described
        for consumer in consumers:
            consumer.poll(0.1)


def test_share_groups_in_the_group_admin_apis(broker: Broker) -> None:
    group = _name("share")
    topic = _topic(broker, group)
    consumers = [_consumer(broker, group, topic, explicit=True) for _ in range(2)]
    try:
        described = _wait_members(broker, group, consumers, 2)
        assert (described.group_state, described.assignor_name) == ("Stable", "simple")
        assert described.assignment_epoch == described.group_epoch
        for member in described.members:  # one partition, two members: both read it
            assert [(tp.topic_name, tp.partitions) for tp in member.assignment.topic_partitions] == [(topic, (0,))]
            assert member.subscribed_topic_names == (topic,)
        assert _listed(broker, ("share",))[group] == ("share", "Stable", "share")
        assert group not in _listed(broker, ("consumer", "classic"))
        (as_consumer,) = _call(broker, ConsumerGroupDescribeRequest(group_ids=(GroupId(group),),
                                                                     include_authorized_operations=False)).groups
        assert (as_consumer.error_code, as_consumer.error_message) == (
            ErrorCode.group_id_not_found, f"Group {group} is not a consumer group")

        # the second member leaves first: a member that polled keeps fetching in the background, and the
        # records below must all go to the first one
        consumers.pop().close()
        _wait_members(broker, group, consumers, 1)
        _produce(broker, topic, [b"o%d" % i for i in range(5)])
        got = _poll_until(consumers[0], lambda got: len(got) >= 5)
        _ack_all(consumers[0], got, AcknowledgeType.ACCEPT)
        assert _offsets(broker, group) == {(topic, 0): (5, 0)}
        _produce(broker, topic, [b"p%d" % i for i in range(3)])
        assert _offsets(broker, group) == {(topic, 0): (5, 3)}

        refused = _call(broker, DeleteGroupsRequest(groups_names=(GroupId(group),)))
        assert [r.error_code for r in refused.results] == [ErrorCode.non_empty_group]
    finally:
        for consumer in consumers:
            consumer.close()
    assert _share_describe(broker, group).group_state == "Empty"

    altered = _call(broker, AlterShareGroupOffsetsRequest(group_id=GroupId(group), topics=(
        AlterShareGroupOffsetsRequestTopic(topic_name=TopicName(topic), partitions=(
            AlterShareGroupOffsetsRequestPartition(partition_index=i32(0), start_offset=i64(2)),)),)))
    assert altered.error_code == ErrorCode.none
    assert [p.error_code for t in altered.responses for p in t.partitions] == [ErrorCode.none]
    assert _offsets(broker, group)[(topic, 0)][0] == 2
    again = _consumer(broker, group, topic, explicit=True)
    try:
        replayed = _poll_until(again, lambda got: len(got) >= 6)
        assert [m.offset() for m in replayed] == [2, 3, 4, 5, 6, 7]
        _ack_all(again, replayed, AcknowledgeType.ACCEPT)
    finally:
        again.close()

    deleted = _call(broker, DeleteShareGroupOffsetsRequest(group_id=GroupId(group), topics=(
        DeleteShareGroupOffsetsRequestTopic(topic_name=TopicName(topic)),)))
    assert (deleted.error_code, [t.error_code for t in deleted.responses]) == (ErrorCode.none, [ErrorCode.none])
    assert _offsets(broker, group) == {}
    removed = _call(broker, DeleteGroupsRequest(groups_names=(GroupId(group),)))
    assert [r.error_code for r in removed.results] == [ErrorCode.none]
    assert group not in _listed(broker, ())
    assert _share_describe(broker, group).error_code == ErrorCode.group_id_not_found


# --- the debugging tools: consumer-groups --describe, GET /state (the inspector's data), /metrics --------


def _cli(broker: Broker, *args: str) -> list[list[str]]:
    """`minikafka consumer-groups` run as a user runs it; the rows of the table it prints."""
    done = subprocess.run([sys.executable, "-m", "minikafka.broker", "consumer-groups", "--bootstrap-server",
                           broker.bootstrap_servers, *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split("\n")
    assert lines[0] == "" and lines[-1] == "", done.stdout
    return [line.split() for line in lines[1:-1]]


def test_debugging_tools_show_a_share_group(broker: Broker) -> None:
    group = _name("share")
    topic = _topic(broker, group)
    _produce(broker, topic, [b"d%d" % i for i in range(6)])
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                              "client.id": "debugger", "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    try:
        got = _poll_until(consumer, lambda got: len(got) >= 6)
        for message in got[:2]:
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        for message in got[2:]:
            consumer.acknowledge(message, AcknowledgeType.RELEASE)
        results = consumer.commit_sync(10)
        assert results and all(error is None for error in results.values()), results
        held = _batch(consumer)  # the 4 released records again, now held under a lock
        assert [m.offset() for m in held] == [2, 3, 4, 5]

        assert _cli(broker, "--describe", "--group", group) == [
            ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"], [group, topic, "0", "2", "4"]]
        members = _cli(broker, "--describe", "--group", group, "--members")
        assert members[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
        assert [(row[0], row[3], row[4], row[5]) for row in members[1:]] == [(group, "debugger", "1", f"{topic}:0")]
        state = _cli(broker, "--describe", "--group", group, "--state")
        assert state[0] == ["GROUP", "COORDINATOR", "(ID)", "STATE", "#MEMBERS"]
        assert (state[1][0], state[1][-2], state[1][-1]) == (group, "Stable", "1")

        shown = broker.state()["share_groups"][group]
        assert shown["state"] == "Stable" and [m["client_id"] for m in shown["members"]] == ["debugger"]
        assert shown["partitions"][topic]["0"] == {"start_offset": 2, "end_offset": 6, "in_flight": 4,
                                                   "acquired": 4, "lag": 4}
        metrics = broker.metrics()
        where = f'group="{group}",partition="0",topic="{topic}"'
        assert f"minikafka_share_partition_acquired_records{{{where}}} 4.0" in metrics
        assert f"minikafka_share_partition_start_offset{{{where}}} 2.0" in metrics
        assert f'minikafka_share_group_members{{group="{group}"}} 1.0' in metrics
        fetches = broker.trace(api="ShareFetch", topic=topic)
        acquired = [p["acquired_records"] for f in fetches for t in f["response"]["responses"]
                    for p in t["partitions"] if p["acquired_records"]]
        assert acquired and acquired[0] == [{"first_offset": 0, "last_offset": 5, "delivery_count": 1}]
        _ack_all(consumer, held, AcknowledgeType.ACCEPT)
    finally:
        consumer.close()


# --- transactions and the log start ----------------------------------------------------------------------


def _set_group_config(broker: Broker, group: str, key: str, value: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    entry = ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
    for future in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group,
                                                                  incremental_configs=[entry])]).values():
        future.result()


def test_read_committed_share_group_skips_aborted_records(broker: Broker) -> None:
    group = _name("share")
    topic = _topic(broker, group)
    _set_group_config(broker, group, "share.isolation.level", "read_committed")
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": _name("txn")})
    producer.init_transactions(10)
    for values, commit in (([b"aborted-1", b"aborted-2"], False), ([b"committed-1", b"committed-2"], True)):
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, value=value)
        assert producer.flush(10) == 0  # the aborted records are written before the abort, not dropped
        if commit:
            producer.commit_transaction(10)
        else:
            producer.abort_transaction(10)
    consumer = _consumer(broker, group, topic, explicit=True)
    try:
        got = _poll_until(consumer, lambda got: len(got) >= 2)
        assert _values(got) == [b"committed-1", b"committed-2"]
        _ack_all(consumer, got, AcknowledgeType.ACCEPT)
        # the aborted records and both markers were archived: the start offset is past everything
        assert _offsets(broker, group)[(topic, 0)] == (6, 0)
    finally:
        consumer.close()


def test_records_below_a_new_log_start_are_not_delivered(broker: Broker) -> None:
    group = _name("share")
    topic = _topic(broker, group)
    _produce(broker, topic, [b"l%d" % i for i in range(6)])
    consumer = _consumer(broker, group, topic, explicit=True)
    try:
        got = _poll_until(consumer, lambda got: len(got) >= 6)
        _ack_all(consumer, got, AcknowledgeType.RELEASE)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        for future in admin.delete_records([TopicPartition(topic, 0, 4)]).values():
            future.result()
        again = _poll_until(consumer, lambda got: len(got) >= 2)
        assert [(m.offset(), m.delivery_count()) for m in again] == [(4, 2), (5, 2)]
        _ack_all(consumer, again, AcknowledgeType.ACCEPT)
        assert _offsets(broker, group)[(topic, 0)] == (6, 0)
    finally:
        consumer.close()


# --- docs/share-groups.md ------------------------------------------------------------------------------


def _doc_example() -> tuple[str, str]:
    """The example of docs/share-groups.md and the output the page says it prints."""
    text = (Path(__file__).parents[2] / "docs" / "share-groups.md").read_text()
    after = text.split("<!-- example: share-groups -->", 1)[1]
    code = after.split("```python\n", 1)[1].split("```", 1)[0]
    printed = after.split("```text\n", 1)[1].split("```", 1)[0]
    return code, printed


def test_the_docs_example_runs_and_prints_what_the_page_says(tmp_path: Path) -> None:
    code, printed = _doc_example()
    script = tmp_path / "share_groups_example.py"
    script.write_text(code)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == printed


# --- the wire: share sessions, RENEW, errors --------------------------------------------------------------


def _heartbeat(broker: Broker, group: str, member: str, epoch: int, topics: tuple[str, ...] | None) -> Any:
    return _call(broker, share_heartbeat.ShareGroupHeartbeatRequest(
        group_id=GroupId(group), member_id=member, member_epoch=i32(epoch), rack_id=None,
        subscribed_topic_names=None if topics is None else tuple(TopicName(t) for t in topics)))


def _share_fetch(broker: Broker, group: str, member: str, epoch: int, topic_id: Any) -> Any:
    return _call(broker, share_fetch.ShareFetchRequest(
        group_id=GroupId(group), member_id=member, share_session_epoch=i32(epoch),
        max_wait=timedelta(milliseconds=500), min_bytes=i32(1), max_records=i32(10), batch_size=i32(10),
        topics=(share_fetch.FetchTopic(topic_id=topic_id, partitions=(
            share_fetch.FetchPartition(partition_index=i32(0), acknowledgement_batches=()),)),),
        forgotten_topics_data=()))


def _share_ack(broker: Broker, group: str, member: str, epoch: int, topic_id: Any, first: int, last: int,
               kind: int, *, renew: bool = False) -> Any:
    return _call(broker, share_ack.ShareAcknowledgeRequest(
        group_id=GroupId(group), member_id=member, share_session_epoch=i32(epoch), is_renew_ack=renew,
        topics=(share_ack.AcknowledgeTopic(topic_id=topic_id, partitions=(share_ack.AcknowledgePartition(
            partition_index=i32(0), acknowledgement_batches=(share_ack.AcknowledgementBatch(
                first_offset=i64(first), last_offset=i64(last), acknowledge_types=(i8(kind),)),)),)),)))


def _partition_error(response: Any) -> ErrorCode:
    (topic,) = response.responses
    (partition,) = topic.partitions
    return ErrorCode(partition.error_code)


def test_share_sessions_renew_and_errors_on_the_wire(broker: Broker) -> None:
    group = _name("share")
    topic = _topic(broker, group)
    _produce(broker, topic, [b"w0", b"w1", b"w2"])
    joined = _heartbeat(broker, group, "member-1", 0, (topic,))
    assert (joined.error_code, joined.member_epoch) == (ErrorCode.none, 1)
    (assigned,) = joined.assignment.topic_partitions
    topic_id = assigned.topic_id
    assert assigned.partitions == (0,)
    assert _heartbeat(broker, group, "member-1", 7, None).error_code == ErrorCode.fenced_member_epoch
    assert _heartbeat(broker, group, "nobody", 1, None).error_code == ErrorCode.unknown_member_id
    assert _heartbeat(broker, group, "m" * 37, 0, (topic,)).error_code == ErrorCode.invalid_request
    missing = _heartbeat(broker, "no-such-group", "member-1", 3, None)
    assert (missing.error_code, missing.error_message) == (ErrorCode.group_id_not_found,
                                                           "Share group no-such-group not found.")
    classic_group = _name("classic")
    classic = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": classic_group})
    classic.subscribe([topic])
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not classic.assignment():
            assert time.monotonic() < deadline
            classic.poll(0.2)
        other = _heartbeat(broker, classic_group, "member-1", 0, (topic,))
        assert (other.error_code, other.error_message) == (ErrorCode.group_id_not_found,
                                                           f"Group {classic_group} is not a share group.")
    finally:
        classic.close()

    # the id is a share group's: the classic and consumer protocols are refused
    join = _call(broker, build(load_request_schema(ApiKey.JOIN_GROUP, 5), group_id=group, member_id="",
                               session_timeout=timedelta(seconds=10), rebalance_timeout=timedelta(seconds=10),
                               protocol_type="consumer", protocols=[{"name": "range", "metadata": b""}]))
    assert join.error_code == ErrorCode.group_id_not_found
    consumer_beat = _call(broker, build(load_request_schema(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1), group_id=group,
                                        member_id="c-1", member_epoch=0, rebalance_timeout=timedelta(seconds=10),
                                        subscribed_topic_names=[topic], server_assignor=None, instance_id=None,
                                        rack_id=None, topic_partitions=[]))
    assert (consumer_beat.error_code, consumer_beat.error_message) == (
        ErrorCode.group_id_not_found, f"Group {group} is not a consumer group.")

    assert _share_fetch(broker, group, "member-1", 1, topic_id).error_code == ErrorCode.share_session_not_found
    fetched = _share_fetch(broker, group, "member-1", 0, topic_id)
    assert fetched.error_code == ErrorCode.none and fetched.acquisition_lock_timeout == timedelta(milliseconds=LOCK_MS)
    (partition,) = fetched.responses[0].partitions
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in partition.acquired_records] == [(0, 2, 1)]
    assert _share_fetch(broker, group, "member-1", 5, topic_id).error_code == ErrorCode.invalid_share_session_epoch

    def locked() -> int:
        return int(broker.state()["share_groups"][group]["partitions"][topic]["0"]["acquired"])

    broker.advance_clock(LOCK_MS - 5000)
    renewed = _share_ack(broker, group, "member-1", 1, topic_id, 0, 2, 4, renew=True)  # RENEW: a new lock
    assert (renewed.error_code, _partition_error(renewed)) == (ErrorCode.none, ErrorCode.none)
    broker.advance_clock(10_000)  # past the first lock's end, within the renewed one
    assert locked() == 3
    not_held = _share_ack(broker, group, "member-1", 2, topic_id, 0, 5, 1)
    assert _partition_error(not_held) == ErrorCode.invalid_record_state
    without_flag = _share_ack(broker, group, "member-1", 3, topic_id, 0, 2, 4)
    assert _partition_error(without_flag) == ErrorCode.invalid_request
    accepted = _share_ack(broker, group, "member-1", 4, topic_id, 0, 0, 1)
    assert _partition_error(accepted) == ErrorCode.none
    assert locked() == 2
    closed = _share_ack(broker, group, "member-1", -1, topic_id, 1, 1, 1)  # close the session: 2 is released
    assert _partition_error(closed) == ErrorCode.none
    assert locked() == 0
    assert _offsets(broker, group)[(topic, 0)] == (2, 1)
    left = _heartbeat(broker, group, "member-1", -1, None)
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)
    assert _share_describe(broker, group).group_state == "Empty"


# --- authorization ---------------------------------------------------------------------------------------


def _first_outcome(config: dict[str, Any], group: str, topic: str) -> str:
    consumer = ShareConsumer({**config, "group.id": group})
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            try:
                messages = consumer.poll(0.5)
            except KafkaException as exc:
                return str(exc.args[0].name())
            for message in messages:
                return "OK" if message.error() is None else str(message.error().name())
        return "TIMEOUT"
    finally:
        consumer.close()


def test_a_share_group_needs_read_on_the_group() -> None:
    with Broker(SECURED) as secured:
        admin = AdminClient(acl_config(secured, "admin"))
        topic, group = _name("secured"), _name("share")
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(DEADLINE_S)
        entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
        for future in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group,
                                                                      incremental_configs=[entry])]).values():
            future.result()
        producer = Producer(acl_config(secured, "admin"))
        producer.produce(topic, b"secret")
        assert producer.flush(DEADLINE_S) == 0
        alice = acl_config(secured, "alice")
        assert _first_outcome(alice, group, topic) == "GROUP_AUTHORIZATION_FAILED"
        for future in admin.create_acls([AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL,
                                                    "User:alice", "*", AclOperation.READ,
                                                    AclPermissionType.ALLOW)]).values():
            future.result(DEADLINE_S)
        assert _first_outcome(alice, group, topic) == "OK"
