"""Produce v13 (KIP-516: topics by id, Kafka 4.1) over the raw protocol: no client here sends it (librdkafka
2.16 stops at Produce v10, kafka-python's producer at v9, kafkajs at v7), so the requests are written
with kio as Kafka's Java producer would send them, and read back by topic id with Fetch v16."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from kio.schema.offset_commit.v9.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.produce.v12.request import PartitionProduceData as PartitionV12
from kio.schema.produce.v12.request import ProduceRequest as ProduceV12
from kio.schema.produce.v12.request import TopicProduceData as TopicV12
from kio.schema.produce.v13.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import GroupId, TopicName
from minikafka.protocol.build import ZERO_UUID
from minikafka.protocol.codec import decode_response, encode_request
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.records import Record, build_batch
from minikafka.testing import Broker

from tests.support.clients import create_topic
from tests.support.names import unique_topic
from tests.support.wire import Wire

from .test_topic_ids import _call, _fetch_request, _topic_id, _values

PRODUCE = 0
DEADLINE_S = 20.0


def _batch(*values: bytes) -> bytes:
    now_ms = int(time.time() * 1000)
    return build_batch([Record(None, value, (), now_ms) for value in values])


def _v13(topics: list[tuple[uuid.UUID, dict[int, bytes]]], acks: int = -1) -> ProduceRequest:
    return ProduceRequest(transactional_id=None, acks=acks, timeout=timedelta(seconds=5), topic_data=tuple(
        TopicProduceData(topic_id=topic_id, partition_data=tuple(
            PartitionProduceData(index=index, records=records) for index, records in partitions.items()))
        for topic_id, partitions in topics))


def _answers(body: Any) -> list[tuple[uuid.UUID | None, int, ErrorCode, int, str | None]]:
    return [(topic.topic_id, p.index, p.error_code, p.base_offset, p.error_message)
            for topic in body.responses for p in topic.partition_responses]


def _read(broker: Broker, topic_id: uuid.UUID, partition: int = 0) -> tuple[ErrorCode, int, list[bytes | None]]:
    body = _call(broker, _fetch_request(16, topic_id, (partition,)), 1)
    [answer] = body.responses[0].partitions
    return answer.error_code, answer.high_watermark, _values(answer.records)


def test_produce_v13_appends_by_topic_id_and_echoes_the_id(broker: Broker) -> None:
    topic = unique_topic("produce-v13")
    create_topic(broker.bootstrap_servers, topic, 2)
    topic_id = _topic_id(broker, topic)
    first = _call(broker, _v13([(topic_id, {0: _batch(b"a0", b"a1"), 1: _batch(b"b0")})]), PRODUCE)
    assert first.responses[0].topic_id == topic_id
    assert _answers(first) == [(topic_id, 0, ErrorCode.none, 0, None), (topic_id, 1, ErrorCode.none, 0, None)]
    [topic_answer] = first.responses
    assert topic_answer.partition_responses[0].log_start_offset == 0
    # The same log, whether named by id (v13) or by name (v12): offsets continue.
    by_name = _call(broker, ProduceV12(transactional_id=None, acks=-1, timeout=timedelta(seconds=5), topic_data=(
        TopicV12(name=TopicName(topic), partition_data=(PartitionV12(index=0, records=_batch(b"a2")),)),)), PRODUCE)
    assert [(t.name, p.error_code, p.base_offset) for t in by_name.responses for p in t.partition_responses] == [
        (topic, ErrorCode.none, 2)]
    again = _call(broker, _v13([(topic_id, {0: _batch(b"a3")})]), PRODUCE)
    assert _answers(again) == [(topic_id, 0, ErrorCode.none, 3, None)]
    assert _read(broker, topic_id, 0) == (ErrorCode.none, 4, [b"a0", b"a1", b"a2", b"a3"])
    assert _read(broker, topic_id, 1) == (ErrorCode.none, 1, [b"b0"])


def test_unknown_and_zero_ids_are_unknown_topic_id_next_to_a_known_one(broker: Broker) -> None:
    topic = unique_topic("produce-v13-mixed")
    create_topic(broker.bootstrap_servers, topic)
    topic_id = _topic_id(broker, topic)
    stranger = uuid.uuid4()
    body = _call(broker, _v13([(stranger, {0: _batch(b"x"), 1: _batch(b"y")}),
                               (topic_id, {0: _batch(b"kept"), 5: _batch(b"no-such-partition")}),
                               (ZERO_UUID, {0: _batch(b"z")})]), PRODUCE)
    answers = _answers(body)
    # Kafka's PartitionResponse(UNKNOWN_TOPIC_ID): no message, offsets -1. kio reads the zero id as None.
    assert answers[:2] == [(stranger, 0, ErrorCode.unknown_topic_id, -1, None),
                           (stranger, 1, ErrorCode.unknown_topic_id, -1, None)]
    assert answers[2] == (topic_id, 0, ErrorCode.none, 0, None)
    assert answers[3][:4] == (topic_id, 5, ErrorCode.unknown_topic_or_partition, -1)
    assert answers[4] == (None, 0, ErrorCode.unknown_topic_id, -1, None)
    assert _read(broker, topic_id) == (ErrorCode.none, 1, [b"kept"])


def test_the_old_id_of_a_recreated_topic_writes_nothing(broker: Broker) -> None:
    topic = unique_topic("produce-v13-recreated")
    create_topic(broker.bootstrap_servers, topic)
    old_id = _topic_id(broker, topic)
    assert _answers(_call(broker, _v13([(old_id, {0: _batch(b"old")})]), PRODUCE))[0][2] == ErrorCode.none
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.delete_topics([topic], operation_timeout=10)[topic].result(DEADLINE_S)
    create_topic(broker.bootstrap_servers, topic)
    new_id = _topic_id(broker, topic)
    assert new_id != old_id
    stale = _call(broker, _v13([(old_id, {0: _batch(b"meant-for-the-old-topic")})]), PRODUCE)
    assert _answers(stale) == [(old_id, 0, ErrorCode.unknown_topic_id, -1, None)]
    assert _read(broker, new_id) == (ErrorCode.none, 0, []), "nothing reached the new topic"
    fresh = _call(broker, _v13([(new_id, {0: _batch(b"new")})]), PRODUCE)
    assert _answers(fresh) == [(new_id, 0, ErrorCode.none, 0, None)]
    assert _read(broker, new_id) == (ErrorCode.none, 1, [b"new"])


def test_acks_0_to_an_unknown_id_closes_the_connection(broker: Broker) -> None:
    """No response for acks=0, so, as Kafka does for any failed acks=0 produce, the connection closes."""
    topic = unique_topic("produce-v13-acks0")
    create_topic(broker.bootstrap_servers, topic)
    topic_id = _topic_id(broker, topic)
    wire = Wire(broker)
    try:
        wire.send(encode_request(1, _v13([(topic_id, {0: _batch(b"quiet")})], acks=0)))
        wire.send(encode_request(2, _v13([(topic_id, {0: _batch(b"answered")})])))
        corr, body = decode_response(wire.receive(), PRODUCE, 13)
        assert corr == 2 and _answers(body) == [(topic_id, 0, ErrorCode.none, 1, None)], "acks=0 wrote offset 0"
        wire.send(encode_request(3, _v13([(uuid.uuid4(), {0: _batch(b"lost")})], acks=0)))
        assert wire.is_closed()
    finally:
        wire.close()


def test_internal_topics_refuse_produce_by_id(broker: Broker) -> None:
    topic = unique_topic("produce-v13-internal")
    create_topic(broker.bootstrap_servers, topic)
    # __consumer_offsets is created by the first commit.
    commit = _call(broker, OffsetCommitRequest(
        group_id=GroupId(unique_topic("group")), generation_id_or_member_epoch=-1, member_id="",
        group_instance_id=None, topics=(OffsetCommitRequestTopic(name=TopicName(topic), partitions=(
            OffsetCommitRequestPartition(partition_index=0, committed_offset=0, committed_leader_epoch=-1,
                                         committed_metadata=""),)),)), 8)
    assert commit.topics[0].partitions[0].error_code == ErrorCode.none
    offsets_id = _topic_id(broker, "__consumer_offsets")
    body = _call(broker, _v13([(offsets_id, {0: _batch(b"forged")})]), PRODUCE)
    assert [answer[:4] for answer in _answers(body)] == [
        (offsets_id, 0, ErrorCode.invalid_topic_exception, -1)]


def test_the_4_0_profile_refuses_produce_v13(broker_factory) -> None:
    broker = broker_factory(**{"minikafka.kafka.version": "4.0"})
    topic = unique_topic("produce-v13-on-4.0")
    create_topic(broker.bootstrap_servers, topic)
    topic_id = _topic_id(broker, topic)
    wire = Wire(broker)
    try:
        wire.send(encode_request(1, _v13([(topic_id, {0: _batch(b"too-new")})])))
        assert wire.is_closed(), "Kafka 4.0 had no Produce v13: an unsupported version closes the connection"
    finally:
        wire.close()


def test_librdkafka_stays_on_produce_v10_when_v13_is_offered() -> None:
    """librdkafka 2.16 knows Produce up to v10, so offering v13 changes nothing for it (and for every
    client here): its records still arrive, by name."""
    with Broker() as broker:
        topic = unique_topic("produce-v13-librdkafka")
        create_topic(broker.bootstrap_servers, topic)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
        for index in range(5):
            producer.produce(topic, value=f"m{index}".encode())
        assert producer.flush(DEADLINE_S) == 0
        versions = {entry["api_version"] for entry in broker.trace(api="Produce")}
        assert versions == {10}
        # The flight recorder names the topic a v13 request addresses by id, as it does for Fetch by id.
        topic_id = _topic_id(broker, topic)
        assert _answers(_call(broker, _v13([(topic_id, {0: _batch(b"by-id")})]), PRODUCE))[0][2] == ErrorCode.none
        [by_id] = [entry for entry in broker.trace(api="Produce") if entry["api_version"] == 13]
        assert topic in by_id["topics"]


def test_a_fault_on_a_topic_matches_produce_by_its_id() -> None:
    """A fault rule names topics; a v13 request names ids: the rule still finds the partition, and the
    injected error comes back under the requested id."""
    with Broker() as broker:
        topic, other = unique_topic("produce-v13-fault"), unique_topic("produce-v13-spared")
        create_topic(broker.bootstrap_servers, topic, 2)
        create_topic(broker.bootstrap_servers, other)
        topic_id, other_id = _topic_id(broker, topic), _topic_id(broker, other)
        broker.add_fault("Produce", "NOT_LEADER_OR_FOLLOWER", count=1, topic=topic, partition=1)
        spared = _call(broker, _v13([(other_id, {0: _batch(b"spared")})]), PRODUCE)
        assert _answers(spared) == [(other_id, 0, ErrorCode.none, 0, None)]
        hit = _call(broker, _v13([(topic_id, {0: _batch(b"p0"), 1: _batch(b"p1")})]), PRODUCE)
        assert [answer[:3] for answer in _answers(hit)] == [
            (topic_id, 0, ErrorCode.none), (topic_id, 1, ErrorCode.not_leader_or_follower)]
        retried = _call(broker, _v13([(topic_id, {1: _batch(b"p1")})]), PRODUCE)
        assert _answers(retried) == [(topic_id, 1, ErrorCode.none, 0, None)]
