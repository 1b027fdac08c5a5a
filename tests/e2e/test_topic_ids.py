"""Topic ids and the newer request versions (issue 13): Fetch v13-18 by topic id, Metadata v13,
DescribeTopicPartitions, ListOffsets v9-10, DeleteTopics by id, OffsetFetch v9, ApiVersions v4 features,
and a topic deleted and re-created under its name, over the raw protocol; confluent-kafka through the same
versions, checked with the flight recorder."""

from __future__ import annotations

import dataclasses
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsV3
from kio.schema.api_versions.v4.request import ApiVersionsRequest as ApiVersionsV4
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.describe_topic_partitions.v0.request import Cursor, DescribeTopicPartitionsRequest, TopicRequest
from kio.schema.list_offsets.v9.request import ListOffsetsPartition as ListOffsetsPartitionV9
from kio.schema.list_offsets.v9.request import ListOffsetsRequest as ListOffsetsV9
from kio.schema.list_offsets.v9.request import ListOffsetsTopic as ListOffsetsTopicV9
from kio.schema.list_offsets.v10.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.metadata.v13.request import MetadataRequest, MetadataRequestTopic
from kio.schema.offset_commit.v9.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_fetch.v9.request import OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopics
from kio.schema.types import GroupId, TopicName
from minikafka.protocol.build import ZERO_UUID
from minikafka.protocol.codec import decode_response, encode_request
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.records import decode_batch, iter_batches
from minikafka.testing import Broker

from tests.support.clients import create_topic, transactional_producer
from tests.support.names import unique_topic
from tests.support.produce import SEND_AT_ONCE, numbered, produce
from tests.support.waiting import poll_until
from tests.support.wire import Listening, Wire

DEADLINE_S = 20.0
FETCH_VERSIONS = range(13, 19)


def _call(broker: Listening, request: Any, api_key: int) -> Any:
    wire = Wire(broker)
    try:
        wire.send(encode_request(7, request))
        corr, body = decode_response(wire.receive(), api_key, request.__version__)
        assert corr == 7
        return body
    finally:
        wire.close()


def _topic_id(broker: Listening, topic: str) -> uuid.UUID:
    body = _call(broker, MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=topic),),
                                         allow_auto_topic_creation=False,
                                         include_topic_authorized_operations=False), 3)
    [entry] = body.topics
    assert entry.error_code == ErrorCode.none and entry.topic_id != ZERO_UUID
    return entry.topic_id  # type: ignore[no-any-return]


def _fetch_request(version: int, topic_id: uuid.UUID, partitions: tuple[int, ...] = (0,), *,
                   max_wait_ms: int = 0, isolation_level: int = 0) -> Any:
    module = __import__(f"kio.schema.fetch.v{version}.request", fromlist=["FetchRequest"])
    parts = tuple(module.FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                                        log_start_offset=-1, partition_max_bytes=1 << 20) for p in partitions)
    extra: dict[str, Any] = {} if version >= 15 else {"replica_id": -1}
    return module.FetchRequest(**extra, max_wait=timedelta(milliseconds=max_wait_ms), min_bytes=1,
                               max_bytes=1 << 20, isolation_level=isolation_level, session_id=0, session_epoch=-1,
                               topics=(module.FetchTopic(topic_id=topic_id, partitions=parts),),
                               forgotten_topics_data=(), rack_id="")


def _values(records: bytes) -> list[bytes | None]:
    return [record.value for pos, _header in iter_batches(records) for record in decode_batch(records, pos).records]


# --- ApiVersions v4 -----------------------------------------------------------------------------------------


def test_api_versions_v4_reports_supported_and_finalized_features(broker: Broker) -> None:
    v4 = _call(broker, ApiVersionsV4(client_software_name="t", client_software_version="1"), 18)
    supported = {f.name: (f.min_version, f.max_version) for f in v4.supported_features}
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in v4.finalized_features}
    # Kafka 4.2: metadata.version 3.3-IV3 (7) to 4.2-IV1 (29); transaction.version as built (to 2, KIP-890).
    # group.version 1: the KIP-848 consumer protocol (ConsumerGroupHeartbeat) is served; ELR is on (KIP-966).
    elr = "eligible.leader.replicas.version"
    expected_supported = {"metadata.version": (7, 29), "kraft.version": (0, 1), "transaction.version": (0, 2),
                          "group.version": (0, 1), elr: (0, 1)}
    expected_finalized = {"metadata.version": (29, 29), "group.version": (1, 1), elr: (1, 1)}
    if 76 in {k.api_key for k in v4.api_keys}:  # share.version 1 (KIP-932) once ShareGroupHeartbeat is served
        expected_supported["share.version"], expected_finalized["share.version"] = (0, 1), (1, 1)
    assert supported == expected_supported
    assert finalized == expected_finalized, \
        "transaction.version 0 (the default) is not finalized"
    assert v4.finalized_features_epoch >= 0
    keys = {k.api_key: (k.min_version, k.max_version) for k in v4.api_keys}
    assert keys[1] == (4, 18) and keys[3] == (0, 13) and keys[2] == (1, 11) and keys[75] == (0, 0)
    assert keys[8] == (2, 9) and keys[9] == (1, 9) and keys[20] == (1, 6) and keys[18] == (0, 4)


def test_api_versions_v3_leaves_out_features_with_minimum_0(broker: Broker) -> None:
    v3 = _call(broker, ApiVersionsV3(client_software_name="t", client_software_version="1"), 18)
    assert [(f.name, f.min_version, f.max_version) for f in v3.supported_features] == [("metadata.version", 7, 29)]
    # Only the supported ranges leave out minimum 0; group.version is finalized at 1 (KIP-848 served).
    share = ["share.version"] if 76 in {k.api_key for k in v3.api_keys} else []
    assert [f.name for f in v3.finalized_features] == ["metadata.version", "eligible.leader.replicas.version",
                                                       "group.version", *share]


def test_finalized_transaction_version_follows_the_broker_s_setting(broker_factory) -> None:
    broker = broker_factory(**{"transaction.version": "1"})
    v4 = _call(broker, ApiVersionsV4(client_software_name="t", client_software_version="1"), 18)
    finalized = {f.name: f.max_version_level for f in v4.finalized_features}
    share = {"share.version": 1} if 76 in {k.api_key for k in v4.api_keys} else {}
    assert finalized == {"metadata.version": 29, "transaction.version": 1, "group.version": 1,
                         "eligible.leader.replicas.version": 1, **share}


@pytest.mark.parametrize(("profile", "metadata_version", "fetch_max"), [("4.0", 25, 17), ("3.x", 21, 17)])
def test_profiles_report_their_release_s_metadata_version(broker_factory, profile: str, metadata_version: int,
                                                         fetch_max: int) -> None:
    broker = broker_factory(**{"minikafka.kafka.version": profile})
    v3 = _call(broker, ApiVersionsV3(client_software_name="t", client_software_version="1"), 18)
    # group.version 1 from 4.0 (KIP-848 consumer groups); a 3.x profile has no such feature.
    expected = {"metadata.version": metadata_version} | ({"group.version": 1} if profile == "4.0" else {})
    assert {f.name: f.max_version_level for f in v3.finalized_features} == expected
    keys = {k.api_key: (k.min_version, k.max_version) for k in v3.api_keys}
    assert keys[1][1] == fetch_max
    assert (75 in keys) == (profile == "4.0"), "DescribeTopicPartitions is advertised by Kafka 4.x only"


def test_profile_before_kip_778_reports_no_features(broker_factory) -> None:
    broker = broker_factory(**{"minikafka.kafka.version": "2.8"})
    wire = Wire(broker)
    wire.send(encode_request(3, ApiVersionsV3(client_software_name="t", client_software_version="1")))
    frame = wire.receive()
    wire.close()
    _corr, v3 = decode_response(frame, 18, 3)
    assert v3.supported_features == () and v3.finalized_features_epoch == -1
    assert frame[-1:] == b"\x00", "no tagged fields written when nothing is finalized"


# --- Fetch by topic id ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_fetch_by_topic_id(broker: Broker, version: int) -> None:
    topic = unique_topic(f"fetch-v{version}")
    create_topic(broker.bootstrap_servers, topic, 2)
    produce(broker.bootstrap_servers, topic, [b"one", b"two"], timeout=DEADLINE_S, **SEND_AT_ONCE)
    topic_id = _topic_id(broker, topic)
    body = _call(broker, _fetch_request(version, topic_id, (0, 1)), 1)
    assert body.error_code == ErrorCode.none
    [answer] = body.responses
    assert answer.topic_id == topic_id
    by_partition = {p.partition_index: p for p in answer.partitions}
    assert all(p.error_code == ErrorCode.none for p in by_partition.values())
    assert sorted(v for p in by_partition.values() for v in _values(p.records)) == [b"one", b"two"]
    assert sum(p.high_watermark for p in by_partition.values()) == 2


@pytest.mark.parametrize("version", [13, 16, 18])
def test_fetch_of_an_unknown_topic_id_is_unknown_topic_id(broker: Broker, version: int) -> None:
    stranger = uuid.uuid4()
    body = _call(broker, _fetch_request(version, stranger, (0, 3), max_wait_ms=5000), 1)
    [answer] = body.responses
    assert answer.topic_id == stranger
    assert [(p.partition_index, p.error_code, p.records) for p in answer.partitions] == [
        (0, ErrorCode.unknown_topic_id, b""), (3, ErrorCode.unknown_topic_id, b"")]
    zero = _call(broker, _fetch_request(version, ZERO_UUID), 1)
    assert zero.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_id


def test_fetch_of_a_missing_partition_of_a_known_id(broker: Broker) -> None:
    topic = unique_topic("fetch-nopart")
    create_topic(broker.bootstrap_servers, topic)
    body = _call(broker, _fetch_request(16, _topic_id(broker, topic), (5,)), 1)
    assert body.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition


def test_recreated_topic_gets_a_new_id_and_the_old_id_reads_nothing(broker: Broker) -> None:
    topic = unique_topic("recreated")
    create_topic(broker.bootstrap_servers, topic)
    produce(broker.bootstrap_servers, topic, [b"old-1", b"old-2"], timeout=DEADLINE_S, **SEND_AT_ONCE)
    old_id = _topic_id(broker, topic)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.delete_topics([topic], operation_timeout=10)[topic].result(DEADLINE_S)
    create_topic(broker.bootstrap_servers, topic)
    produce(broker.bootstrap_servers, topic, [b"new-1"], timeout=DEADLINE_S, **SEND_AT_ONCE)
    new_id = _topic_id(broker, topic)
    assert new_id != old_id
    stale = _call(broker, _fetch_request(16, old_id), 1)
    assert stale.responses[0].topic_id == old_id
    [partition] = stale.responses[0].partitions
    assert partition.error_code == ErrorCode.unknown_topic_id and partition.records == b""
    fresh = _call(broker, _fetch_request(16, new_id), 1)
    assert _values(fresh.responses[0].partitions[0].records) == [b"new-1"]
    by_old_id = _call(broker, MetadataRequest(topics=(MetadataRequestTopic(topic_id=old_id, name=None),),
                                              allow_auto_topic_creation=False,
                                              include_topic_authorized_operations=False), 3)
    assert by_old_id.topics[0].error_code == ErrorCode.unknown_topic_id
    # Deleting by the old id must not delete the new topic.
    deleted = _call(broker, DeleteTopicsRequest(topics=(DeleteTopicState(name=None, topic_id=old_id),),
                                                timeout=timedelta(seconds=10)), 20)
    [result] = deleted.responses
    assert (result.name, result.topic_id, result.error_code) == (None, old_id, ErrorCode.unknown_topic_id)
    assert _topic_id(broker, topic) == new_id


def test_topic_deleted_during_a_long_poll_answers_unknown_topic_id(broker: Broker) -> None:
    topic = unique_topic("deleted-while-polling")
    create_topic(broker.bootstrap_servers, topic)
    topic_id = _topic_id(broker, topic)
    wire = Wire(broker, timeout=DEADLINE_S)
    # Fetch from the end: nothing to return, so the broker waits up to max_wait.
    request = _fetch_request(16, topic_id, max_wait_ms=15000)
    wire.send(encode_request(11, request))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.delete_topics([topic], operation_timeout=10)[topic].result(DEADLINE_S)
    create_topic(broker.bootstrap_servers, topic)
    # An append to the re-created topic wakes the poll, which finds the old id gone.
    produce(broker.bootstrap_servers, topic, [b"new"], timeout=DEADLINE_S, **SEND_AT_ONCE)
    started = time.monotonic()
    _corr, body = decode_response(wire.receive(), 1, 16)
    wire.close()
    [partition] = body.responses[0].partitions
    assert partition.error_code == ErrorCode.unknown_topic_id and partition.records == b""
    assert time.monotonic() - started < 10, "woken by the append, not by max_wait"


# --- Metadata v13, DescribeTopicPartitions, ListOffsets v9-10 ----------------------------------------------


def test_metadata_v13_by_name_and_by_id(broker: Broker) -> None:
    topic = unique_topic("md13")
    create_topic(broker.bootstrap_servers, topic, 3)
    topic_id = _topic_id(broker, topic)
    body = _call(broker, MetadataRequest(topics=(MetadataRequestTopic(topic_id=topic_id, name=None),),
                                         allow_auto_topic_creation=False,
                                         include_topic_authorized_operations=False), 3)
    assert body.error_code == ErrorCode.none
    [entry] = body.topics
    assert (entry.name, entry.topic_id, len(entry.partitions)) == (topic, topic_id, 3)


def test_describe_topic_partitions_pages_with_a_cursor(broker: Broker) -> None:
    prefix = unique_topic("dtp")
    first, second = f"{prefix}-a", f"{prefix}-b"
    create_topic(broker.bootstrap_servers, first, 3)
    create_topic(broker.bootstrap_servers, second, 2)
    names = (TopicRequest(name=second), TopicRequest(name=f"{prefix}-missing"), TopicRequest(name=first))
    page = _call(broker, DescribeTopicPartitionsRequest(topics=names, response_partition_limit=4), 75)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in page.topics] == [
        (first, [0, 1, 2]), (second, [0])], "name order, cut by the partition limit"
    assert (page.next_cursor.topic_name, page.next_cursor.partition_index) == (second, 1)
    assert page.topics[0].topic_id == _topic_id(broker, first) and page.topics[0].topic_authorized_operations > 0
    partition = page.topics[0].partitions[0]
    assert (partition.leader_id, partition.replica_nodes, partition.isr_nodes) == (1, (1,), (1,))
    rest = _call(broker, DescribeTopicPartitionsRequest(topics=names, response_partition_limit=4,
                                                        cursor=Cursor(topic_name=second, partition_index=1)), 75)
    assert [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in rest.topics] == [
        (f"{prefix}-b", ErrorCode.none, [1]), (f"{prefix}-missing", ErrorCode.unknown_topic_or_partition, [])]
    assert rest.next_cursor is None
    exact = _call(broker, DescribeTopicPartitionsRequest(topics=names[::2], response_partition_limit=3), 75)
    assert [t.name for t in exact.topics] == [first]
    assert (exact.next_cursor.topic_name, exact.next_cursor.partition_index) == (second, 0)


def test_describe_topic_partitions_refuses_a_cursor_outside_the_topic_list(broker: Broker) -> None:
    topic = unique_topic("dtp-cursor")
    create_topic(broker.bootstrap_servers, topic)
    body = _call(broker, DescribeTopicPartitionsRequest(topics=(TopicRequest(name=topic),),
                                                        cursor=Cursor(topic_name="a-not-listed", partition_index=0)),
                 75)
    assert [(t.name, t.error_code) for t in body.topics] == [(topic, ErrorCode.invalid_request)]


def test_describe_all_topics(broker: Broker) -> None:
    topic = unique_topic("dtp-all")
    create_topic(broker.bootstrap_servers, topic, 2)
    body = _call(broker, DescribeTopicPartitionsRequest(topics=()), 75)
    names = [t.name for t in body.topics]
    assert names == sorted(names) and topic in names and body.next_cursor is None


def test_list_offsets_v9_and_v10(broker: Broker) -> None:
    topic = unique_topic("lo10")
    create_topic(broker.bootstrap_servers, topic)
    produce(broker.bootstrap_servers, topic, [b"a", b"b", b"c"], timeout=DEADLINE_S, **SEND_AT_ONCE)
    latest_tiered, latest, earliest = -5, -1, -2
    v10 = _call(broker, ListOffsetsRequest(replica_id=-1, isolation_level=0, timeout=timedelta(seconds=5), topics=(
        ListOffsetsTopic(name=TopicName(topic), partitions=(
            ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=latest),)),)), 2)
    assert (v10.topics[0].partitions[0].error_code, v10.topics[0].partitions[0].offset) == (ErrorCode.none, 3)
    for timestamp, expected in ((latest_tiered, (-1, -1, -1)), (earliest, (0, -1, 0))):
        v9 = _call(broker, ListOffsetsV9(replica_id=-1, isolation_level=0, topics=(
            ListOffsetsTopicV9(name=TopicName(topic), partitions=(
                ListOffsetsPartitionV9(partition_index=0, current_leader_epoch=-1, timestamp=timestamp),)),)), 2)
        answer = v9.topics[0].partitions[0]
        assert answer.error_code == ErrorCode.none
        assert (answer.offset, answer.timestamp, answer.leader_epoch) == expected


# --- DeleteTopics by id, OffsetFetch v9 ----------------------------------------------------------------------


def test_delete_topics_by_id_and_the_entries_kafka_refuses(broker: Broker) -> None:
    by_id, both, doubled = (unique_topic(f"del-{what}") for what in ("id", "both", "doubled"))
    for topic in (by_id, both, doubled):
        create_topic(broker.bootstrap_servers, topic)
    ids = {topic: _topic_id(broker, topic) for topic in (by_id, both, doubled)}
    request = DeleteTopicsRequest(timeout=timedelta(seconds=10), topics=(
        DeleteTopicState(name=None, topic_id=ids[by_id]),
        DeleteTopicState(name=None, topic_id=ZERO_UUID),
        DeleteTopicState(name=both, topic_id=ids[both]),
        DeleteTopicState(name=doubled, topic_id=ZERO_UUID),
        DeleteTopicState(name=doubled, topic_id=ZERO_UUID),
    ))
    results = {(r.name, r.topic_id): (r.error_code, r.error_message) for r in _call(broker, request, 20).responses}
    invalid = ErrorCode.invalid_request
    assert results == {
        (by_id, ids[by_id]): (ErrorCode.none, None),
        (None, None): (invalid, "Neither topic name nor id were specified."),  # kio reads the zero id as None
        (both, ids[both]): (invalid, "You may not specify both topic name and topic id."),
        (doubled, None): (invalid, "Duplicate topic name."),
    }
    topics = set(AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=10).topics)
    assert by_id not in topics and both in topics and doubled in topics


def test_offset_fetch_v9_for_a_classic_group(broker: Broker) -> None:
    topic = unique_topic("of9")
    create_topic(broker.bootstrap_servers, topic)
    group = GroupId(unique_topic("of9-group"))
    commit = _call(broker, OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=(OffsetCommitRequestTopic(name=TopicName(topic), partitions=(
            OffsetCommitRequestPartition(partition_index=0, committed_offset=42, committed_leader_epoch=-1,
                                         committed_metadata="m"),)),)), 8)
    assert commit.topics[0].partitions[0].error_code == ErrorCode.none
    # A classic group ignores member id and epoch (Kafka's ClassicGroup.validateOffsetFetch).
    for member_id, epoch in ((None, -1), ("someone", 7)):
        fetched = _call(broker, OffsetFetchRequest(require_stable=True, groups=(OffsetFetchRequestGroup(
            group_id=group, member_id=member_id, member_epoch=epoch,
            topics=(OffsetFetchRequestTopics(name=TopicName(topic), partition_indexes=(0,)),)),)), 9)
        [answer] = fetched.groups
        assert answer.error_code == ErrorCode.none
        [partition] = answer.topics[0].partitions
        assert (partition.committed_offset, partition.metadata, partition.error_code) == (42, "m", ErrorCode.none)


# --- confluent-kafka through the new versions -------------------------------------------------------------


def _highest_version(broker: Broker, api: str) -> int:
    return max(entry["api_version"] for entry in broker.trace(api=api))


def test_confluent_uses_fetch_by_id_and_metadata_v13() -> None:
    with Broker() as broker:
        topic = unique_topic("confluent-ids")
        create_topic(broker.bootstrap_servers, topic, 2)
        produce(broker.bootstrap_servers, topic, numbered(20), timeout=DEADLINE_S, **SEND_AT_ONCE)
        group = unique_topic("confluent-ids-group")
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "fetch.wait.max.ms": 100})
        consumer.subscribe([topic])
        received: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        try:
            while len(received) < 20 and time.monotonic() < deadline:
                for message in consumer.consume(num_messages=100, timeout=0.2):
                    assert message.error() is None, message.error()
                    received.append(message.value())
            assert sorted(received) == sorted(f"v{i}".encode() for i in range(20))
            consumer.commit(asynchronous=False)
            committed = consumer.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
            assert sum(tp.offset for tp in committed) == 20
        finally:
            consumer.close()
        # librdkafka 2.16 takes the newest it knows of what is offered: Fetch v16 (by topic id), Metadata v13,
        # OffsetCommit and OffsetFetch v9.
        assert _highest_version(broker, "Fetch") == 16
        assert _highest_version(broker, "Metadata") == 13
        assert _highest_version(broker, "OffsetCommit") == 9 and _highest_version(broker, "OffsetFetch") == 9
        fetches = [e for e in broker.trace(api="Fetch") if e["api_version"] == 16]
        assert any(topic in e["topics"] for e in fetches), "the recorder names the topic a fetch by id reads"


def test_confluent_read_committed_over_fetch_by_id() -> None:
    with Broker() as broker:
        topic = unique_topic("confluent-rc-ids")
        create_topic(broker.bootstrap_servers, topic)
        producer = transactional_producer(broker.bootstrap_servers, unique_topic("txn"))
        producer.begin_transaction()
        producer.produce(topic, value=b"aborted")
        producer.flush(DEADLINE_S)
        producer.abort_transaction(DEADLINE_S)
        producer.begin_transaction()
        producer.produce(topic, value=b"committed")
        producer.commit_transaction(DEADLINE_S)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "rc-ids",
                             "isolation.level": "read_committed", "enable.auto.commit": False,
                             "fetch.wait.max.ms": 100})
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        try:
            def read_committed_value() -> bool:
                for message in consumer.consume(num_messages=10, timeout=0.2):
                    assert message.error() is None, message.error()
                    values.append(message.value())
                return b"committed" in values

            poll_until(read_committed_value, timeout=DEADLINE_S, message="the committed record")
        finally:
            consumer.close()
        assert values == [b"committed"], "the aborted record is dropped, through the aborted list of Fetch by id"
        fetches = [e for e in broker.trace(api="Fetch") if topic in e["topics"]]
        assert fetches and {e["api_version"] for e in fetches} == {16}
        assert any(e["request"].get("isolation_level") == 1 for e in fetches)


# --- fault rules with a topic filter match fetches by id ---------------------------------------------------


def test_topic_fault_rule_matches_a_fetch_by_id() -> None:
    with Broker() as broker:
        faulted, spared = unique_topic("fault-hit"), unique_topic("fault-spared")
        for topic in (faulted, spared):
            create_topic(broker.bootstrap_servers, topic)
            produce(broker.bootstrap_servers, topic, [topic.encode()], timeout=DEADLINE_S, **SEND_AT_ONCE)
        broker.add_fault("Fetch", "NOT_LEADER_OR_FOLLOWER", topic=faulted, count=1)
        ids = {topic: _topic_id(broker, topic) for topic in (faulted, spared)}
        module = __import__("kio.schema.fetch.v16.request", fromlist=["FetchRequest"])
        request = _fetch_request(16, ids[faulted])
        both = (*request.topics, module.FetchTopic(topic_id=ids[spared], partitions=request.topics[0].partitions))
        request = dataclasses.replace(request, topics=both)
        body = _call(broker, request, 1)
        by_id = {t.topic_id: t.partitions[0] for t in body.responses}
        assert by_id[ids[faulted]].error_code == ErrorCode.not_leader_or_follower
        assert by_id[ids[spared]].error_code == ErrorCode.none
        assert _values(by_id[ids[spared]].records) == [spared.encode()]
        assert broker.faults() == [], "the rule fired once and is used up"


def test_topic_fault_rule_fires_for_confluent_fetches() -> None:
    with Broker() as broker:
        topic = unique_topic("fault-confluent")
        create_topic(broker.bootstrap_servers, topic)
        produce(broker.bootstrap_servers, topic, [b"after-the-fault"], timeout=DEADLINE_S, **SEND_AT_ONCE)
        broker.add_fault("Fetch", "NOT_LEADER_OR_FOLLOWER", topic=topic, count=2)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "fault-ids",
                             "enable.auto.commit": False, "fetch.wait.max.ms": 100})
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        try:
            def consumed() -> bool:
                for message in consumer.consume(num_messages=10, timeout=0.2):
                    if message.error() is None:
                        values.append(message.value())
                return bool(values)

            poll_until(consumed, timeout=DEADLINE_S, message="the record after the fault")
        finally:
            consumer.close()
        assert values == [b"after-the-fault"] and broker.faults() == []
        faulted = [e for e in broker.trace(api="Fetch") if "NOT_LEADER_OR_FOLLOWER" in e["errors"]]
        assert len(faulted) == 2 and {e["api_version"] for e in faulted} == {16}
