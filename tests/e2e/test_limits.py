"""Limits under load: connection caps, idle close, pipelining bounds, and absurd but well-formed requests.

Every test drives a broker subprocess over real sockets, with real clients where the client lets us
send the request (confluent-kafka's AdminClient and Consumer) and raw frames otherwise. Nothing here
asserts a duration: the figures (latency, RSS) are measured by `make load` (bench/load.py).
"""

from __future__ import annotations

import os
import socket
import struct
from datetime import timedelta

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from minikafka.protocol.codec import decode_response, encode_request
from minikafka.testing import Broker

from tests.support.clients import create_topic
from tests.support.names import unique_topic
from tests.support.produce import ONE_PER_BATCH, produce
from tests.support.waiting import poll_until
from tests.support.wire import Wire

INT32_MAX = 2**31 - 1
POLICY_VIOLATION = 44
INVALID_REQUEST = 42
INVALID_TOPIC_EXCEPTION = 17
UNKNOWN_TOPIC_OR_PARTITION = 3
# How long the 10,000-partition creation may take on a slow, shared disk before the test gives up.
CREATION_DEADLINE_S = 300.0
# A wait long enough that a broker holding a connection would have answered if it were going to.
NO_ANSWER_WAIT_S = 1.0


def _api_versions(wire: Wire, correlation_id: int) -> int:
    wire.send(encode_request(correlation_id, ApiVersionsRequest()))
    return decode_response(wire.receive(), 18, 0)[0]


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _metadata(*names: str, create: bool = True) -> MetadataRequest:
    return MetadataRequest(topics=tuple(MetadataRequestTopic(topic_id=None, name=n) for n in names),
                           allow_auto_topic_creation=create, include_topic_authorized_operations=False)


def _fetch(topic: str, *, max_bytes: int, partition_max_bytes: int, max_wait_ms: int = 10) -> FetchRequest:
    return FetchRequest(max_wait=timedelta(milliseconds=max_wait_ms), min_bytes=1, max_bytes=max_bytes,
                        isolation_level=0, session_id=0, session_epoch=-1, topics=(
                            FetchTopic(topic=topic, partitions=(FetchPartition(
                                partition=0, fetch_offset=0, partition_max_bytes=partition_max_bytes,
                                log_start_offset=-1),)),), forgotten_topics_data=(), rack_id="")


# --------------------------------------------------------------------------------------- connections


def test_max_connections_per_ip_closes_connections_over_the_limit(broker_factory) -> None:
    broker: Broker = broker_factory(**{"max.connections.per.ip": "2"})
    first, second = Wire(broker), Wire(broker)
    assert _api_versions(first, 1) == 1 and _api_versions(second, 2) == 2
    third = Wire(broker)
    assert third.is_closed(), "Kafka closes a connection over max.connections.per.ip at once"
    assert _api_versions(first, 3) == 3, "the connections within the limit are untouched"
    first.close()

    def a_new_connection_is_answered() -> bool:
        try:
            fresh = Wire(broker)
            answered = _api_versions(fresh, 4) == 4
            fresh.close()
            return answered
        except ConnectionError:
            return False

    poll_until(a_new_connection_is_answered, message="a slot freed by a closed connection")
    second.close()


def test_max_connections_per_ip_overrides_raise_the_limit_for_one_host(broker_factory) -> None:
    broker: Broker = broker_factory(**{"max.connections.per.ip": "0",
                                              "max.connections.per.ip.overrides": "127.0.0.1:3"})
    wires = [Wire(broker) for _ in range(3)]
    assert [_api_versions(w, i) for i, w in enumerate(wires)] == [0, 1, 2]
    assert Wire(broker).is_closed()
    for wire in wires:
        wire.close()


def test_max_connections_holds_new_connections_until_one_closes(broker_factory) -> None:
    broker: Broker = broker_factory(**{"max.connections": "2"})
    first, second = Wire(broker), Wire(broker)
    assert _api_versions(first, 1) == 1 and _api_versions(second, 2) == 2
    # The kernel completes the handshake (listen backlog) but the broker does not accept it yet.
    waiting = Wire(broker)
    waiting.send(encode_request(3, ApiVersionsRequest()))
    waiting.sock.settimeout(NO_ANSWER_WAIT_S)
    with pytest.raises(TimeoutError):
        waiting.sock.recv(1)
    first.close()
    waiting.sock.settimeout(15)
    assert decode_response(waiting.receive(), 18, 0)[0] == 3, "accepted once a connection closed"
    second.close()
    waiting.close()


def test_idle_connection_is_closed_and_active_one_kept(broker_factory) -> None:
    broker: Broker = broker_factory(**{"connections.max.idle.ms": "300"})
    idle = Wire(broker)
    assert _api_versions(idle, 1) == 1
    idle.sock.settimeout(15)
    assert idle.is_closed(), "closed by the broker after connections.max.idle.ms"
    assert "closing idle connection" in broker.logs()
    fresh = Wire(broker)
    assert _api_versions(fresh, 2) == 2
    fresh.close()


def test_dropped_connections_leave_no_descriptor_behind(broker: Broker) -> None:
    """Connections dropped mid-frame and mid-request are forgotten: the broker's fd count returns."""
    assert broker.alive
    pid = broker.pid
    probe = Wire(broker)
    assert _api_versions(probe, 1) == 1
    baseline = _open_fds(pid)
    request = encode_request(2, _metadata())
    for index in range(300):
        sock = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
        # Half a frame, a whole frame unanswered, or a size prefix alone, then gone.
        sock.sendall((request[: len(request) // 2], request, request[:4])[index % 3])
        if index % 2:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST, not FIN
        sock.close()
    poll_until(lambda: _open_fds(pid) <= baseline, message=f"fd count back to {baseline}")
    assert _api_versions(probe, 3) == 3
    probe.close()


# ------------------------------------------------------------------------------------------ pipelining


@pytest.mark.parametrize("queued", ["1", "3"])
def test_pipelined_requests_answered_in_order_with_a_small_queue(broker_factory, queued: str) -> None:
    broker: Broker = broker_factory(**{"queued.max.requests": queued})
    topic = unique_topic("queue")
    create_topic(broker.bootstrap_servers, topic)
    wire = Wire(broker)
    frames = [encode_request(100 + i, _metadata(topic, create=False)) if i % 2
              else encode_request(100 + i, ApiVersionsRequest()) for i in range(60)]
    wire.send(b"".join(frames))
    answered = [decode_response(wire.receive(), 3 if i % 2 else 18, 12 if i % 2 else 0) for i in range(60)]
    assert [corr for corr, _body in answered] == list(range(100, 160))
    assert all(body.topics[0].name == topic for corr, body in answered if corr % 2)
    wire.close()


def test_client_that_never_reads_does_not_stall_others(broker: Broker) -> None:
    """A client pipelining large Fetches and reading nothing is muted; others keep being served, and
    its responses, once it reads, come complete and in order."""
    topic = unique_topic("hog")
    create_topic(broker.bootstrap_servers, topic)
    produce(broker.bootstrap_servers, topic, [os.urandom(100_000) for _ in range(10)], **ONE_PER_BATCH)
    hog = Wire(broker)
    count = 40
    fetch = _fetch(topic, max_bytes=1 << 20, partition_max_bytes=1 << 20)
    hog.send(b"".join(encode_request(1000 + i, fetch) for i in range(count)))
    bystander = Wire(broker)
    for corr in range(20):
        bystander.send(encode_request(corr, _metadata(topic, create=False)))
        answered_corr, metadata = decode_response(bystander.receive(), 3, 12)
        assert answered_corr == corr and metadata.topics[0].error_code == 0
    hog.sock.settimeout(30)
    for i in range(count):
        corr, response = decode_response(hog.receive(), 1, 12)
        assert corr == 1000 + i
        assert len(response.responses[0].partitions[0].records) > 500_000
    bystander.close()
    hog.close()


# ------------------------------------------------------------------------------------ absurd requests


def _admin_error(futures: dict) -> KafkaError:
    [future] = futures.values()
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=15)
    return raised.value.args[0]


def test_create_topics_with_huge_partition_counts_is_a_policy_violation(broker: Broker) -> None:
    from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    name = unique_topic("huge")
    # librdkafka refuses more than 100,000 partitions itself; a raw frame carries 2**31-1.
    error = _admin_error(admin.create_topics([NewTopic(name, 100_000, 1)], operation_timeout=10))
    assert error.code() == KafkaError.POLICY_VIOLATION
    assert "Excessively large number of partitions" in error.str()
    wire = Wire(broker)
    wire.send(encode_request(1, CreateTopicsRequest(timeout=timedelta(seconds=5), validate_only=False, topics=(
        CreatableTopic(name=name, num_partitions=INT32_MAX, replication_factor=1, assignments=(), configs=()),))))
    [result] = decode_response(wire.receive(), 19, 7)[1].topics
    assert (result.name, result.error_code) == (name, POLICY_VIOLATION)
    wire.close()
    assert name not in admin.list_topics(timeout=10).topics, "nothing was created"


def test_create_topics_counts_the_partitions_of_the_whole_request(broker_factory) -> None:
    broker: Broker = broker_factory(**{"max.partitions.per.request": "5"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    names = [unique_topic("batch") for _ in range(2)]
    futures = admin.create_topics([NewTopic(name, 3, 1) for name in names], operation_timeout=10)
    for name, future in futures.items():
        with pytest.raises(KafkaException) as raised:
            future.result(timeout=15)
        assert raised.value.args[0].code() == KafkaError.POLICY_VIOLATION, name
    fits = unique_topic("fits")
    admin.create_topics([NewTopic(fits, 5, 1)], operation_timeout=10)[fits].result(timeout=15)


def test_create_partitions_to_huge_counts_is_a_policy_violation(broker: Broker) -> None:
    from kio.schema.create_partitions.v3.request import CreatePartitionsRequest, CreatePartitionsTopic

    topic = unique_topic("grow")
    create_topic(broker.bootstrap_servers, topic)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    error = _admin_error(admin.create_partitions([NewPartitions(topic, 100_000)], operation_timeout=10))
    assert error.code() == KafkaError.POLICY_VIOLATION
    wire = Wire(broker)
    wire.send(encode_request(1, CreatePartitionsRequest(timeout=timedelta(seconds=5), validate_only=False, topics=(
        CreatePartitionsTopic(name=topic, count=INT32_MAX, assignments=None),))))
    [result] = decode_response(wire.receive(), 37, 3)[1].results
    assert result.error_code == POLICY_VIOLATION
    wire.close()
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 1


@pytest.mark.parametrize("name", ["x" * 250, "bad/name", "a b", "ütf"])
def test_illegal_topic_names_are_invalid_topic_exception(broker: Broker, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    error = _admin_error(admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=10))
    assert error.code() == KafkaError.TOPIC_EXCEPTION


def test_metadata_auto_creating_too_many_partitions_creates_none(broker_factory) -> None:
    broker: Broker = broker_factory(**{"max.partitions.per.request": "2"})
    existing = unique_topic("known")
    create_topic(broker.bootstrap_servers, existing)
    names = [unique_topic("auto") for _ in range(3)]
    wire = Wire(broker)
    wire.send(encode_request(1, _metadata(existing, *names)))
    _corr, metadata = decode_response(wire.receive(), 3, 12)
    codes = {t.name: t.error_code for t in metadata.topics}
    assert codes == {existing: 0, **{name: POLICY_VIOLATION for name in names}}
    wire.send(encode_request(2, _metadata(*names[:2])))
    _corr, metadata = decode_response(wire.receive(), 3, 12)
    assert {t.error_code for t in metadata.topics} == {0}, "two topics of one partition fit the limit"
    wire.close()


def test_fetch_max_bytes_is_capped_and_negative_sizes_are_invalid(broker_factory) -> None:
    broker: Broker = broker_factory(**{"fetch.max.bytes": "3000"})
    topic = unique_topic("cap")
    create_topic(broker.bootstrap_servers, topic)
    produce(broker.bootstrap_servers, topic, [os.urandom(1000) for _ in range(8)], **ONE_PER_BATCH)
    wire = Wire(broker)
    wire.send(encode_request(1, _fetch(topic, max_bytes=INT32_MAX, partition_max_bytes=INT32_MAX)))
    partition = decode_response(wire.receive(), 1, 12)[1].responses[0].partitions[0]
    assert partition.error_code == 0 and 1000 < len(partition.records) <= 3000, "capped at fetch.max.bytes"
    for corr, (max_bytes, partition_max) in enumerate([(-1, 1 << 20), (1 << 20, -5), (-INT32_MAX, -1)], 2):
        wire.send(encode_request(corr, _fetch(topic, max_bytes=max_bytes, partition_max_bytes=partition_max)))
        answered, response = decode_response(wire.receive(), 1, 12)
        assert answered == corr
        assert response.responses[0].partitions[0].error_code == INVALID_REQUEST
    wire.close()


@pytest.mark.parametrize("session_timeout_ms", [1000, 3_000_000])
def test_session_timeout_out_of_range_is_invalid_session_timeout(broker: Broker,
                                                                   session_timeout_ms: int) -> None:
    topic = unique_topic("session")
    create_topic(broker.bootstrap_servers, topic)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": unique_topic("g"),
                         "session.timeout.ms": session_timeout_ms, "heartbeat.interval.ms": 100,
                         "max.poll.interval.ms": max(session_timeout_ms, 10_000)})
    consumer.subscribe([topic])
    try:
        def join_error() -> KafkaError | None:
            message = consumer.poll(0.2)
            if message is not None and message.error() is not None:
                return message.error()
            return None

        error = poll_until(join_error, timeout=20, message="the JoinGroup error")
        assert error.code() == KafkaError.INVALID_SESSION_TIMEOUT
    finally:
        consumer.close()


def test_transaction_timeout_above_the_maximum_is_invalid_transaction_timeout(broker_factory) -> None:
    broker: Broker = broker_factory(**{"transaction.max.timeout.ms": "60000"})
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": unique_topic("txn"),
                         "transaction.timeout.ms": 120_000})
    with pytest.raises(KafkaException) as raised:
        producer.init_transactions(15)
    assert raised.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT


def test_other_connections_are_answered_while_ten_thousand_partitions_are_created(broker: Broker) -> None:
    """CreateTopics of max.partitions.per.request partitions makes them in slices: while it runs,
    another connection's ApiVersions and Metadata are answered, and the topic is not shown
    half-made; once it answers, all its partitions exist."""
    from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest

    partitions = 10_000
    topic = unique_topic("wide")
    creator = Wire(broker)
    creator.send(encode_request(1, CreateTopicsRequest(timeout=timedelta(seconds=600), validate_only=False, topics=(
        CreatableTopic(name=topic, num_partitions=partitions, replication_factor=1, assignments=(), configs=()),))))
    # The creation is under way once its first partition directory exists.
    poll_until(lambda: (broker.data_dir / f"{topic}-0").is_dir(), message="the first partition directory")
    bystander = Wire(broker)
    assert _api_versions(bystander, 7) == 7
    bystander.send(encode_request(8, _metadata(topic, create=False)))
    corr, metadata = decode_response(bystander.receive(), 3, 12)
    assert corr == 8
    creator.sock.setblocking(False)
    try:
        early = creator.sock.recv(1)
    except BlockingIOError:
        early = b""
    assert early == b"", "the bystander must have been answered while the creation was still running"
    [shown] = metadata.topics
    assert (shown.error_code, shown.partitions) == (UNKNOWN_TOPIC_OR_PARTITION, ()), "no half-made topic"
    creator.sock.settimeout(CREATION_DEADLINE_S)
    [created] = decode_response(creator.receive(), 19, 7)[1].topics
    assert (created.name, created.error_code, created.num_partitions) == (topic, 0, partitions)
    bystander.send(encode_request(9, _metadata(topic, create=False)))
    [after] = decode_response(bystander.receive(), 3, 12)[1].topics
    assert after.error_code == 0 and sorted(p.partition_index for p in after.partitions) == list(range(partitions))
    creator.close()
    bystander.close()
