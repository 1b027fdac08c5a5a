"""A handler that raises something unexpected: the request is answered UNKNOWN_SERVER_ERROR, the
connection stays open, the error is logged once with its stack trace and counted.

The broker runs in-process (so a handler can be made to fail) on a free 127.0.0.1 port and is
spoken to over a real socket, by raw frames and by confluent-kafka.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from confluent_kafka import KafkaError as ClientError
from confluent_kafka import Producer
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from minikafka.broker.config.config import BrokerConfig
from minikafka.broker.handlers import heartbeat, list_offsets
from minikafka.broker.server import BrokerServer
from minikafka.coordinator.group.classic import ClassicGroupEngine
from minikafka.coordinator.group.state import Group, GroupState, IllegalStateTransition
from minikafka.protocol.codec import decode_response, encode_request
from minikafka.protocol.errors import ErrorCode
from minikafka.storage.log import PartitionLog

TOPIC = "surprises"


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[BrokerServer]:
    broker = BrokerServer(BrokerConfig(host="127.0.0.1", port=0, data_dir=tmp_path / "data"))
    await broker.start()
    assert broker.services is not None
    broker.services.logs.create_topic(TOPIC, 2)
    yield broker
    await broker.shutdown()


async def _round_trip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, frame: bytes,
                      api_key: int, version: int) -> tuple[int, Any]:
    writer.write(frame)
    await writer.drain()
    (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))
    return decode_response(await reader.readexactly(size), api_key, version)


async def _boom(_ctx: Any, _request: Any) -> Any:
    raise RuntimeError("a bug in a handler")


async def test_handler_exception_is_answered_and_the_connection_kept(
        server: BrokerServer, monkeypatch: pytest.MonkeyPatch) -> None:
    assert server.services is not None and server.node is not None
    route = server.services.registry.route(list_offsets.API_KEY)
    assert route is not None
    # The registry offers no way to swap a handler (nothing but a test should): replace its route.
    monkeypatch.setitem(server.services.registry._routes, list_offsets.API_KEY,
                        type(route)(route.api_key, route.versions, route.advertised, _boom, route.name))
    reader, writer = await asyncio.open_connection("127.0.0.1", server.node.port)
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(ListOffsetsTopic(
        name=TOPIC, partitions=(ListOffsetsPartition(partition_index=1, current_leader_epoch=-1, timestamp=-1),)),))
    with structlog.testing.capture_logs() as logs:
        corr, response = await _round_trip(reader, writer, encode_request(41, request, client_id="probe"),
                                           list_offsets.API_KEY, 7)
    assert corr == 41
    [topic] = response.topics
    [partition] = topic.partitions
    assert (topic.name, partition.partition_index, partition.error_code) == (TOPIC, 1, ErrorCode.unknown_server_error)

    unexpected = [e for e in logs if e["event"] == "unexpected error"]
    assert len(unexpected) == 1, "logged once"
    [event] = unexpected
    assert (event["api"], event["correlation_id"], event["client_id"]) == ("LIST_OFFSETS", 41, "probe")
    assert isinstance(event["exc_info"], RuntimeError)
    assert server.services.metrics.unexpected_errors["LIST_OFFSETS"] == 1

    # The same connection still serves requests.
    corr, versions = await _round_trip(
        reader, writer, encode_request(42, ApiVersionsRequest(client_software_name="t", client_software_version="1")),
        18, 3)
    assert corr == 42 and versions.error_code == ErrorCode.none
    writer.close()


async def test_one_partitions_surprise_fails_only_that_partition(
        server: BrokerServer, monkeypatch: pytest.MonkeyPatch) -> None:
    assert server.services is not None and server.node is not None
    real_append = PartitionLog.append

    def append_failing_on_partition_1(self: PartitionLog, *args: Any, **kwargs: Any) -> Any:
        if self.topic == TOPIC and self.partition == 1:
            raise ZeroDivisionError("surprise")
        return real_append(self, *args, **kwargs)

    monkeypatch.setattr(PartitionLog, "append", append_failing_on_partition_1)
    bootstrap = f"127.0.0.1:{server.node.port}"

    def produce() -> dict[int, Any]:
        results: dict[int, Any] = {}
        producer = Producer({"bootstrap.servers": bootstrap, "retries": 0, "linger.ms": 50,
                             "enable.idempotence": False, "message.timeout.ms": 10000})
        for partition in (0, 1, 0):
            producer.produce(TOPIC, f"v{partition}".encode(), partition=partition,
                             on_delivery=lambda err, msg: results.setdefault(msg.partition(), err))
        assert producer.flush(15) == 0
        return results

    results = await asyncio.to_thread(produce)
    assert results[0] is None, "the healthy partition is written"
    assert results[1] is not None and results[1].code() == ClientError.UNKNOWN
    assert server.services.logs.partition(TOPIC, 0).log_end_offset == 2  # type: ignore[union-attr]
    assert server.services.metrics.unexpected_errors["PRODUCE"] >= 1


async def test_a_coordinator_bug_is_logged_and_counted(server: BrokerServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """An IllegalStateTransition is the coordinator's bug, not the client's: it answers
    UNKNOWN_SERVER_ERROR like any unexpected exception, logged once with its stack trace and counted."""
    assert server.services is not None and server.node is not None

    def heartbeat_hitting_a_bug(_engine: ClassicGroupEngine, **_member: Any) -> None:
        Group("g").transition_to(GroupState.STABLE, 0)  # Empty -> Stable skips the rebalance

    monkeypatch.setattr(ClassicGroupEngine, "heartbeat", heartbeat_hitting_a_bug)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.node.port)
    request = HeartbeatRequest(group_id="g", generation_id=1, member_id="m")
    with structlog.testing.capture_logs() as logs:
        corr, response = await _round_trip(reader, writer, encode_request(7, request, client_id="probe"),
                                           heartbeat.API_KEY, 4)
    assert corr == 7 and response.error_code == ErrorCode.unknown_server_error

    unexpected = [e for e in logs if e["event"] == "unexpected error"]
    assert len(unexpected) == 1, "logged once"
    [event] = unexpected
    assert (event["api"], event["correlation_id"], event["client_id"]) == ("HEARTBEAT", 7, "probe")
    assert isinstance(event["exc_info"], IllegalStateTransition)
    assert server.services.metrics.unexpected_errors["HEARTBEAT"] == 1
    writer.close()
