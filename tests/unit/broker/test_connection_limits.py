"""The connection registry and the connection-limit settings, against an in-process broker on a real socket.

The registry is the server's own state, so these tests run the broker in-process to read it; the
behaviour seen by clients (limits, idle close, ordering) is tested end to end in tests/e2e/test_limits.py.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import struct
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import structlog.testing
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.metadata.v12.request import MetadataRequest
from minikafka.broker import server as server_module
from minikafka.broker.config.config import BrokerConfig, ConfigError, build_config
from minikafka.broker.server import BrokerServer, _resolve_overrides
from minikafka.protocol.codec import decode_response, encode_request

DEADLINE_S = 15.0


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[BrokerServer]:
    broker = BrokerServer(BrokerConfig(host="127.0.0.1", port=0, data_dir=tmp_path / "data", queued_max_requests=2))
    await broker.start()
    yield broker
    await broker.shutdown()


async def _until(predicate: object, message: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {message}")
        await asyncio.sleep(0.01)


def _drop(port: int, payload: bytes, reset: bool) -> None:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(payload)
    if reset:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


async def test_dropped_connections_leave_the_registry_empty(server: BrokerServer) -> None:
    assert server.node is not None
    port = server.node.port
    request = encode_request(1, MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                include_topic_authorized_operations=False))
    payloads = [request[: len(request) // 2], request, request * 5, request[:3], b""]
    loop = asyncio.get_running_loop()
    for index in range(500):
        await loop.run_in_executor(None, _drop, port, payloads[index % len(payloads)], index % 2 == 1)
    await _until(lambda: server.connection_count == 0 and not server._connections_per_ip,
                 "every dropped connection to leave the registry")

    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(encode_request(7, ApiVersionsRequest()))
    (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))
    assert decode_response(await reader.readexactly(size), 18, 0)[0] == 7
    assert server.connection_count == 1
    writer.close()
    await _until(lambda: server.connection_count == 0, "the closed connection to leave the registry")


async def _api_versions_answered(port: int) -> bool:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(encode_request(7, ApiVersionsRequest()))
        (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), DEADLINE_S))
        return decode_response(await reader.readexactly(size), 18, 0)[0] == 7
    finally:
        writer.close()


async def test_accepting_goes_on_after_accept_fails(server: BrokerServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Out of descriptors (EMFILE) the acceptor logs and tries again later; a client gone from the backlog
    before it was taken (ECONNABORTED) is passed over. Clients waiting meanwhile are served afterwards."""
    assert server.node is not None
    real_accept = server_module._accept_waiting
    failures: list[OSError] = [OSError(errno.EMFILE, "Too many open files"),
                               ConnectionAbortedError(errno.ECONNABORTED, "Software caused connection abort")]

    def accept_failing_first(listener: socket.socket, family: int) -> tuple[socket.socket, object]:
        if failures:
            raise failures.pop(0)
        return real_accept(listener, family)

    monkeypatch.setattr(server_module, "_accept_waiting", accept_failing_first)
    with structlog.testing.capture_logs() as logs:
        answered = await asyncio.wait_for(
            asyncio.gather(*(_api_versions_answered(server.node.port) for _ in range(20))), DEADLINE_S)
    assert answered == [True] * 20
    assert failures == []
    assert [entry["error"] for entry in logs if entry["event"] == "accept failed"] == ["[Errno 24] Too many open files"]
    await _until(lambda: server.connection_count == 0, "the closed connections to leave the registry")


def test_connection_settings_have_kafka_names_and_defaults() -> None:
    config = build_config(environ={})
    assert (config.queued_max_requests, config.max_connections, config.max_connections_per_ip) == (
        500, 2147483647, 2147483647)
    assert config.max_connections_per_ip_overrides == {}
    assert (config.connections_max_idle_ms, config.fetch_max_bytes, config.max_partitions_per_request) == (
        600000, 57671680, 10000)
    overridden = build_config(environ={}, overrides=[
        "max.connections.per.ip.overrides=127.0.0.1:5, localhost:7,[::1]:2", "queued.max.requests=1"])
    assert overridden.max_connections_per_ip_overrides == {"127.0.0.1": 5, "localhost": 7, "::1": 2}
    assert overridden.queued_max_requests == 1


@pytest.mark.parametrize("override", [
    "queued.max.requests=0", "max.connections=-1", "max.connections.per.ip.overrides=nocount",
    "max.connections.per.ip.overrides=host:many", "max.partitions.per.request=0", "max.connections.per.ip=0",
])
def test_bad_connection_settings_are_config_errors(override: str) -> None:
    with pytest.raises(ConfigError, match=override.split("=")[0]):
        build_config(environ={}, overrides=[override])


def test_per_ip_overrides_resolve_hostnames_to_addresses() -> None:
    assert _resolve_overrides({"localhost": 3, "10.1.2.3": 4})["127.0.0.1"] == 3
    assert _resolve_overrides({"10.1.2.3": 4}) == {"10.1.2.3": 4}


async def test_nothing_more_is_read_while_a_request_is_in_hand(tmp_path: Path) -> None:
    """Kafka mutes a channel from a request's arrival to its response: requests pipelined behind a parked
    long-poll Fetch stay unread (in the socket and the receiver's bounded queue); then all are answered in order."""
    from datetime import timedelta

    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic

    server = BrokerServer(BrokerConfig(host="127.0.0.1", port=0, data_dir=tmp_path / "data"))
    await server.start()
    try:
        assert server.services is not None and server.node is not None
        server.services.logs.create_topic("parked", 1)
        fetch = FetchRequest(max_wait=timedelta(seconds=2), min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                             session_id=0, session_epoch=-1, topics=(FetchTopic(topic="parked", partitions=(
                                 FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20,
                                                log_start_offset=-1),)),), forgotten_topics_data=(), rack_id="")
        metadata = [encode_request(corr, MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                         include_topic_authorized_operations=False))
                    for corr in range(2, 202)]
        requests_seen: list[int] = []
        server.services.observers.exchanges.append(lambda exchange: requests_seen.append(exchange.correlation_id))
        reader, writer = await asyncio.open_connection("127.0.0.1", server.node.port)
        writer.write(encode_request(1, fetch) + b"".join(metadata))
        [(connection, _task)] = server._connections.values()
        await _until(lambda: connection is not None and connection.busy, "the fetch to be parked")
        assert connection is not None
        pipelined = sum(len(frame) for frame in metadata)
        await _until(lambda: connection.frames.queued_bytes > 0, "the pipelined requests to be received")
        assert requests_seen == [], "no request was handled while the fetch is in hand"
        assert connection.frames.queued_bytes <= pipelined
        answered = []
        for _ in range(1 + len(metadata)):
            (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))
            answered.append(struct.unpack(">i", (await reader.readexactly(size))[:4])[0])
        assert answered == list(range(1, 202))
        assert requests_seen == list(range(1, 202))
        writer.close()
    finally:
        await server.shutdown()


async def test_queued_max_requests_bounds_the_requests_in_hand_across_connections(tmp_path: Path) -> None:
    """With queued.max.requests=1, a second connection's request waits while the first one's Fetch is
    parked, and is answered once the slot frees."""
    from datetime import timedelta

    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic

    server = BrokerServer(BrokerConfig(host="127.0.0.1", port=0, data_dir=tmp_path / "data", queued_max_requests=1))
    await server.start()
    try:
        assert server.services is not None and server.node is not None
        server.services.logs.create_topic("parked", 1)
        fetch = FetchRequest(max_wait=timedelta(seconds=1), min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                             session_id=0, session_epoch=-1, topics=(FetchTopic(topic="parked", partitions=(
                                 FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20,
                                                log_start_offset=-1),)),), forgotten_topics_data=(), rack_id="")
        handled: list[int] = []
        server.services.observers.exchanges.append(lambda exchange: handled.append(exchange.correlation_id))
        first_reader, first_writer = await asyncio.open_connection("127.0.0.1", server.node.port)
        first_writer.write(encode_request(1, fetch))
        await _until(lambda: any(c is not None and c.busy for c, _t in server._connections.values()),
                     "the fetch to be parked")
        second_reader, second_writer = await asyncio.open_connection("127.0.0.1", server.node.port)
        second_writer.write(encode_request(2, ApiVersionsRequest()))
        (size,) = struct.unpack(">i", await asyncio.wait_for(second_reader.readexactly(4), 10))
        await second_reader.readexactly(size)
        # Unbounded, the ApiVersions would be handled at once, while the fetch waits out its second.
        assert handled == [1, 2], "the ApiVersions was handled only once the fetch released the one slot"
        (fetch_size,) = struct.unpack(">i", await asyncio.wait_for(first_reader.readexactly(4), 10))
        assert struct.unpack(">i", (await first_reader.readexactly(fetch_size))[:4])[0] == 1
        first_writer.close()
        second_writer.close()
    finally:
        await server.shutdown()


async def test_shutdown_lets_the_request_in_hand_finish(tmp_path: Path) -> None:
    """A long-poll Fetch parked when shutdown starts is still answered; the connection then closes."""
    from datetime import timedelta

    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic

    server = BrokerServer(BrokerConfig(host="127.0.0.1", port=0, data_dir=tmp_path / "data"))
    await server.start()
    assert server.services is not None and server.node is not None
    server.services.logs.create_topic("parked", 1)
    fetch = FetchRequest(max_wait=timedelta(milliseconds=500), min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                         session_id=0, session_epoch=-1, topics=(FetchTopic(topic="parked", partitions=(
                             FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20,
                                            log_start_offset=-1),)),), forgotten_topics_data=(), rack_id="")
    reader, writer = await asyncio.open_connection("127.0.0.1", server.node.port)
    writer.write(encode_request(9, fetch))
    await _until(lambda: any(c is not None and c.busy for c, _task in server._connections.values()),
                 "the fetch to be parked")
    stopping = asyncio.create_task(server.shutdown())
    (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))
    corr, response = decode_response(await reader.readexactly(size), 1, 12)
    assert corr == 9 and response.responses[0].partitions[0].error_code == 0
    assert await asyncio.wait_for(reader.read(1), 10) == b"", "closed after the answer"
    await stopping
    writer.close()
