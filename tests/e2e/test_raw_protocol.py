"""The wire itself: ApiVersions negotiation, framing guards, bad requests, ordering, acks=0."""

from __future__ import annotations

import struct
import uuid

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsV3
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from minikafka.protocol.codec import decode_response, encode_request
from minikafka.testing import Broker

from tests.support.clients import create_topic
from tests.support.names import unique_topic
from tests.support.wire import Wire, produce_raw


def test_api_versions_v0_to_v3(broker: Broker) -> None:
    wire = Wire(broker)
    wire.send(encode_request(1, ApiVersionsV0()))
    _corr, v0 = decode_response(wire.receive(), 18, 0)
    keys = {k.api_key: (k.min_version, k.max_version) for k in v0.api_keys}
    assert keys[18] == (0, 4) and keys[0] == (0, 13) and keys[1] == (4, 18)
    wire.send(encode_request(2, ApiVersionsV3(client_software_name="t", client_software_version="1")))
    frame = wire.receive()
    corr, v3 = decode_response(frame, 18, 3)
    assert corr == 2 and v3.error_code == 0 and len(v3.api_keys) == len(v0.api_keys)
    # Features as Kafka 4.2 reports them at v3 (tests/e2e/test_topic_ids.py checks v4 and the profiles).
    assert [(f.name, f.min_version, f.max_version) for f in v3.supported_features] == [("metadata.version", 7, 29)]
    assert v3.finalized_features_epoch >= 0
    wire.close()


def test_too_new_api_versions_is_answered_at_v0(broker: Broker) -> None:
    wire = Wire(broker)
    # A v5 request: kio has no schema for it, so the header is written by hand.
    client = b"future"
    wire.send(struct.pack(">ihhih", 2 + 2 + 4 + 2 + len(client) + 1, 18, 5, 77, len(client)) + client + b"\x00")
    frame = wire.receive()
    corr, error_code = struct.unpack_from(">ih", frame)
    assert (corr, error_code) == (77, 35)
    _corr, body = decode_response(frame, 18, 0)
    assert any(k.api_key == 0 for k in body.api_keys)
    wire.close()


def test_unknown_api_key_closes_only_that_connection(broker: Broker) -> None:
    bystander = Wire(broker)
    victim = Wire(broker)
    victim.send(struct.pack(">ihhih", 10, 9999, 0, 1, 0))
    assert victim.is_closed()
    bystander.send(encode_request(5, ApiVersionsV0()))
    assert decode_response(bystander.receive(), 18, 0)[0] == 5
    bystander.close()


@pytest.mark.parametrize("size", [0, -5, 200_000_000])
def test_bad_frame_sizes_close_the_connection(broker: Broker, size: int) -> None:
    wire = Wire(broker)
    wire.send(struct.pack(">i", size) + b"\x00" * 16)
    assert wire.is_closed()


def test_garbage_body_closes_the_connection(broker: Broker) -> None:
    wire = Wire(broker)
    body = struct.pack(">hhih", 3, 12, 1, 1) + b"x" + b"\xff" * 20  # a Metadata v12 header, then junk
    wire.send(struct.pack(">i", len(body)) + body)
    assert wire.is_closed()
    fresh = Wire(broker)
    fresh.send(encode_request(9, ApiVersionsV0()))
    assert decode_response(fresh.receive(), 18, 0)[0] == 9


def test_pipelined_requests_are_answered_in_order(broker: Broker) -> None:
    topic = unique_topic("pipe")
    create_topic(broker.bootstrap_servers, topic, 2)
    wire = Wire(broker)
    request = MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=topic),),
                              allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    wire.send(b"".join(encode_request(corr, request) for corr in range(100, 150)))
    answers = [decode_response(wire.receive(), 3, 12) for _ in range(50)]
    assert [corr for corr, _ in answers] == list(range(100, 150))
    metadata = answers[0][1]
    assert metadata.topics[0].name == topic and len(metadata.topics[0].partitions) == 2
    assert metadata.topics[0].topic_id != uuid.UUID(int=0)
    wire.close()


def test_pipelined_produce_answers_all_arrive_in_order_before_a_close(broker: Broker) -> None:
    """Answers to pipelined Produce requests may share one send; none may be lost or reordered, even when
    an acks=0 request sits in the pipeline, or the request after the last one is garbage and closes the
    connection (a Produce header with a garbage body)."""
    from datetime import timedelta

    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
    from minikafka.protocol.records import Record, build_batch

    topic = unique_topic("pipe-produce")
    create_topic(broker.bootstrap_servers, topic, 1)
    wire = Wire(broker)

    def produce(acks: int) -> ProduceRequest:
        return ProduceRequest(transactional_id=None, acks=acks, timeout=timedelta(seconds=5), topic_data=(
            TopicProduceData(name=topic, partition_data=(PartitionProduceData(
                index=0, records=build_batch([Record(None, b"v", (), 1)])),)),))

    acks_by_correlation = {corr: 0 if corr == 110 else -1 for corr in range(100, 125)}
    metadata = MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=topic),),
                               allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    header = encode_request(400, produce(-1))
    garbage_body = header[4:4 + 2 + 2 + 4 + 2 + len("minikafka") + 1] + b"\xff" * 32
    wire.send(b"".join(encode_request(corr, produce(acks)) for corr, acks in acks_by_correlation.items())
              + encode_request(200, metadata)
              + b"".join(encode_request(corr, produce(-1)) for corr in range(300, 310))
              + struct.pack(">i", len(garbage_body)) + garbage_body)
    answered = [corr for corr, acks in acks_by_correlation.items() if acks] + [200, *range(300, 310)]
    frames = [wire.receive() for _ in answered]
    correlations = [struct.unpack_from(">i", frame)[0] for frame in frames]
    assert correlations == answered
    offsets = [decode_response(frame, 0, 9)[1].responses[0].partition_responses[0].base_offset
               for frame, corr in zip(frames, correlations, strict=True) if corr != 200]
    # acks=0 at 110 still appended (offset 10), unanswered: the answered offsets skip it.
    assert offsets == [*range(0, 10), *range(11, 25), *range(25, 35)]
    assert wire.is_closed()
    wire.close()


def test_acks_0_produce_gets_no_response(broker: Broker) -> None:
    from datetime import timedelta

    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
    from minikafka.protocol.records import Record, build_batch

    topic = unique_topic("acks0")
    create_topic(broker.bootstrap_servers, topic)
    wire = Wire(broker)
    produce = ProduceRequest(transactional_id=None, acks=0, timeout=timedelta(seconds=5), topic_data=(
        TopicProduceData(name=topic, partition_data=(
            PartitionProduceData(index=0, records=build_batch([Record(None, b"fire-and-forget", (), 1)])),)),))
    wire.send(encode_request(1, produce))
    wire.send(encode_request(2, ApiVersionsV0()))
    assert decode_response(wire.receive(), 18, 0)[0] == 2, "the next frame read answers the next request"
    wire.close()


def _round_trip(broker: Broker, request: object, api_key: int, version: int) -> object:
    wire = Wire(broker)
    try:
        wire.send(encode_request(1, request))
        return decode_response(wire.receive(), api_key, version)[1]
    finally:
        wire.close()


def test_fetch_out_of_range_and_offset_for_leader_epoch(broker: Broker) -> None:
    from datetime import timedelta

    from confluent_kafka import Producer
    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
    from kio.schema.offset_for_leader_epoch.v4.request import (
        OffsetForLeaderEpochRequest,
        OffsetForLeaderPartition,
        OffsetForLeaderTopic,
    )

    topic = unique_topic("raw")
    create_topic(broker.bootstrap_servers, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(3):
        producer.produce(topic, value=str(i).encode())
    assert producer.flush(10) == 0

    def fetch(offset: int) -> object:
        request = FetchRequest(max_wait=timedelta(milliseconds=10), min_bytes=1, max_bytes=1 << 20,
                               isolation_level=0, session_id=0, session_epoch=-1, topics=(
                                   FetchTopic(topic=topic, partitions=(FetchPartition(
                                       partition=0, fetch_offset=offset, partition_max_bytes=1 << 20,
                                       log_start_offset=-1),)),), forgotten_topics_data=(), rack_id="")
        return _round_trip(broker, request, 1, 12).responses[0].partitions[0]  # type: ignore[attr-defined]

    beyond = fetch(99)
    # OFFSET_OUT_OF_RANGE, with the watermarks unknown (-1) as Kafka answers a failed partition read
    assert (beyond.error_code, beyond.high_watermark, beyond.log_start_offset) == (1, -1, -1)
    at_end = fetch(3)
    assert at_end.error_code == 0 and at_end.records == b""  # empty, never null, for librdkafka
    data = fetch(1)
    assert data.high_watermark == 3 and data.records  # the batch holding offset 1

    epochs = OffsetForLeaderEpochRequest(replica_id=-1, topics=(OffsetForLeaderTopic(topic=topic, partitions=(
        OffsetForLeaderPartition(partition=0, current_leader_epoch=0, leader_epoch=0),)),))
    answer = _round_trip(broker, epochs, 23, 4).topics[0].partitions[0]  # type: ignore[attr-defined]
    assert (answer.error_code, answer.leader_epoch, answer.end_offset) == (0, 0, 3)
    newer = OffsetForLeaderEpochRequest(replica_id=-1, topics=(OffsetForLeaderTopic(topic=topic, partitions=(
        OffsetForLeaderPartition(partition=0, current_leader_epoch=5, leader_epoch=5),)),))
    assert _round_trip(broker, newer, 23, 4).topics[0].partitions[0].error_code == 75  # UNKNOWN_LEADER_EPOCH


def test_describe_cluster(broker: Broker) -> None:
    from kio.schema.describe_cluster.v1.request import DescribeClusterRequest

    response = _round_trip(broker, DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                          endpoint_type=1), 60, 1)
    assert response.error_code == 0 and response.controller_id == 1  # type: ignore[attr-defined]
    assert [(b.broker_id, b.port) for b in response.brokers] == [(1, broker.port)]  # type: ignore[attr-defined]
    assert response.cluster_id  # type: ignore[attr-defined]


@pytest.mark.parametrize("version", [1, 2])
def test_api_versions_v1_and_v2(broker: Broker, version: int) -> None:
    from importlib import import_module

    request_cls = import_module(f"kio.schema.api_versions.v{version}.request").ApiVersionsRequest
    wire = Wire(broker)
    wire.send(encode_request(40 + version, request_cls()))
    corr, body = decode_response(wire.receive(), 18, version)
    assert corr == 40 + version and body.error_code == 0
    keys = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert keys[18] == (0, 4) and keys[3][0] == 0 and keys[1][1] >= 12
    assert body.throttle_time.total_seconds() == 0
    wire.close()


def test_describe_configs_synonyms_in_precedence_order(broker_factory) -> None:
    """Kafka lists a topic config's synonyms most-specific first: topic, static broker, default."""
    from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource

    broker = broker_factory(**{"message.max.bytes": "2000000"})
    plain = unique_topic("synplain")
    overridden = unique_topic("synover")
    create_topic(broker.bootstrap_servers, plain)
    create_topic(broker.bootstrap_servers, overridden, config={"max.message.bytes": "3000000"})
    request = DescribeConfigsRequest(include_synonyms=True, include_documentation=False, resources=tuple(
        DescribeConfigsResource(resource_type=2, resource_name=name, configuration_keys=("max.message.bytes",))
        for name in (plain, overridden)))
    results = _round_trip(broker, request, 32, 4).results  # type: ignore[attr-defined]
    described = {}
    for result in results:
        assert result.error_code == 0
        [entry] = result.configs
        assert entry.name == "max.message.bytes"
        described[result.resource_name] = (entry.value, entry.config_source,
                                           [(s.name, s.value, s.source) for s in entry.synonyms])
    assert described[plain] == ("2000000", 4, [("message.max.bytes", "2000000", 4),
                                               ("message.max.bytes", "1048588", 5)])
    assert described[overridden] == ("3000000", 1, [("max.message.bytes", "3000000", 1),
                                                    ("message.max.bytes", "2000000", 4),
                                                    ("message.max.bytes", "1048588", 5)])


def test_fetch_long_poll_is_answered_when_data_arrives(broker: Broker) -> None:
    """A Fetch with max_wait 20 s on an empty partition answers with records produced while it waits."""
    from datetime import timedelta

    from confluent_kafka import Producer
    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic

    topic = unique_topic("longpoll")
    create_topic(broker.bootstrap_servers, topic)
    request = FetchRequest(max_wait=timedelta(seconds=20), min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                           session_id=0, session_epoch=-1, topics=(FetchTopic(topic=topic, partitions=(
                               FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20,
                                              log_start_offset=-1),)),), forgotten_topics_data=(), rack_id="")
    waiting = Wire(broker)
    waiting.sock.settimeout(30)
    waiting.send(encode_request(7, request))
    # A second request on the same connection is queued behind the parked fetch.
    waiting.send(encode_request(8, ApiVersionsV0()))
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": False})
    producer.produce(topic, value=b"woken")
    assert producer.flush(10) == 0
    corr, response = decode_response(waiting.receive(), 1, 12)
    assert corr == 7
    partition = response.responses[0].partitions[0]
    assert partition.error_code == 0 and partition.high_watermark == 1
    from minikafka.protocol.records import decode_all

    [batch] = decode_all(partition.records)
    assert [r.value for r in batch.records] == [b"woken"]
    assert decode_response(waiting.receive(), 18, 0)[0] == 8
    waiting.close()


def test_request_over_configured_socket_request_max_bytes_closes(broker_factory) -> None:
    broker = broker_factory(**{"socket.request.max.bytes": "1024"})
    small = Wire(broker)
    small.send(encode_request(1, ApiVersionsV0(), client_id="c" * 500))
    assert decode_response(small.receive(), 18, 0)[0] == 1
    big = Wire(broker)
    big.send(encode_request(2, ApiVersionsV0(), client_id="c" * 2000))
    assert big.is_closed()
    small.send(encode_request(3, ApiVersionsV0()))
    assert decode_response(small.receive(), 18, 0)[0] == 3
    small.close()


def test_garbage_body_after_a_valid_header_closes_the_connection(broker: Broker) -> None:
    wire = Wire(broker)
    header = encode_request(4, MetadataRequest(topics=(), allow_auto_topic_creation=False,
                                               include_topic_authorized_operations=False))
    # Keep the request header (api key, version, correlation id, client id, tagged fields), replace the body.
    header_length = 2 + 2 + 4 + 2 + len("minikafka") + 1
    body = header[4:4 + header_length] + b"\xff" * 32
    wire.send(struct.pack(">i", len(body)) + body)
    assert wire.is_closed()


def test_produce_errors(broker: Broker) -> None:
    from minikafka.protocol.records import Record, build_batch

    topic = unique_topic("prodErr")
    create_topic(broker.bootstrap_servers, topic)
    good = build_batch([Record(b"k", b"v", (), 1_700_000_000_000)])
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF  # flips a byte of the record: the CRC no longer matches
    wire = Wire(broker)
    assert produce_raw(wire, 1, topic, bytes(corrupt)).error_code == 2  # CORRUPT_MESSAGE
    assert produce_raw(wire, 2, topic, good, partition=3).error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    accepted = produce_raw(wire, 3, topic, good)
    assert (accepted.error_code, accepted.base_offset) == (0, 0)  # nothing was stored by the failures
    second = produce_raw(wire, 4, topic, build_batch([Record(None, b"a", (), 1), Record(None, b"b", (), 2)]))
    assert (second.error_code, second.base_offset) == (0, 1)
    wire.close()
    invalid_acks = Wire(broker)
    assert produce_raw(invalid_acks, 5, topic, good, acks=2).error_code == 21  # INVALID_REQUIRED_ACKS
    invalid_acks.close()


def test_list_offsets_modes_and_unknown_partition(broker: Broker) -> None:
    from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
    from minikafka.protocol.records import Record, build_batch

    topic = unique_topic("rawlo")
    create_topic(broker.bootstrap_servers, topic)
    base = 1_700_000_000_000
    wire = Wire(broker)
    batch = build_batch([Record(None, str(i).encode(), (), base + ts) for i, ts in enumerate([5, 30, 10, 20])])
    assert produce_raw(wire, 1, topic, batch).error_code == 0
    wire.close()

    def lookup(timestamp: int, partition: int = 0) -> tuple[int, int, int]:
        request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(ListOffsetsTopic(name=topic, partitions=(
            ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1, timestamp=timestamp),)),))
        answer = _round_trip(broker, request, 2, 7).topics[0].partitions[0]  # type: ignore[attr-defined]
        return answer.error_code, answer.offset, answer.timestamp

    assert lookup(-2) == (0, 0, -1)  # earliest
    assert lookup(-1) == (0, 4, -1)  # latest
    assert lookup(-3) == (0, 1, base + 30)  # max timestamp: the record, inside one uncompressed batch
    assert lookup(base + 11) == (0, 1, base + 30)  # first record at or after the target, in offset order
    assert lookup(base + 31) == (0, -1, -1)
    assert lookup(-1, partition=5)[0] == 3  # UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_asked_with_and_without_authorized_operations_answers_each_as_asked(broker: Broker) -> None:
    """A topic's entry is kept between answers; asking for its authorized operations must still change it."""
    topic = unique_topic("ops")
    create_topic(broker.bootstrap_servers, topic, 2)
    wire = Wire(broker)

    def operations(include: bool, correlation_id: int) -> list[int]:
        request = MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=topic),
                                          MetadataRequestTopic(topic_id=None, name=unique_topic("absent"))),
                                  allow_auto_topic_creation=False, include_topic_authorized_operations=include)
        wire.send(encode_request(correlation_id, request))
        _correlation_id, answer = decode_response(wire.receive(), 3, 12)
        assert [len(t.partitions) for t in answer.topics] == [2, 0]
        return [t.topic_authorized_operations for t in answer.topics]

    not_asked = -(2**31)
    for correlation_id, include in enumerate((False, True, False, True)):
        found, absent = operations(include, correlation_id)
        assert (found == not_asked) is (not include) and (absent == not_asked) is (not include)
        assert found == absent
    wire.close()
