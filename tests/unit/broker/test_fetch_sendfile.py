"""Fetch answers whose big record sets go from the log files to the socket with sendfile, on a real socket
against an in-process broker (to reach its logs and connections), under both event loops the broker runs
on: the bytes arrive whole and in order whatever the reader's pace, after whatever the transport still
held, from a segment deleted meanwhile, and a reader that leaves mid-answer ends only its connection.
Record sets pass through the process instead where they must: to a wire tap (and over TLS, tests/e2e/
test_tls.py)."""

from __future__ import annotations

import asyncio
import errno
import inspect
import os
import socket
import struct
import time
from collections.abc import Callable, Coroutine
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import uvloop
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from minikafka.broker.config.config import BrokerConfig
from minikafka.broker.server import BrokerServer
from minikafka.broker.wire import connection as connection_module
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import decode_response, encode_request
from minikafka.protocol.records import Record, build_batch
from minikafka.storage.log import REGION_MIN_BYTES

DEADLINE_S = 15.0
SMALL_BUFFER = 8192  # socket buffers this small make the broker wait for the reader many times per answer


LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


def on_each_loop(scenario: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """A test running `scenario(server, **its other fixtures)` against a fresh in-process broker, once on
    each event loop."""
    fixtures = [name for name in inspect.signature(scenario).parameters if name != "server"]

    def test(loop: str, tmp_path: Path, **requested: Any) -> None:
        async def run() -> None:
            server = BrokerServer(BrokerConfig(host="127.0.0.1", port=0, data_dir=tmp_path / "data"))
            await server.start()
            try:
                await scenario(server, **requested)
            finally:
                await server.shutdown()

        with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
            runner.run(run())

    test.__name__, test.__doc__ = scenario.__name__, scenario.__doc__
    test.__signature__ = inspect.Signature(  # type: ignore[attr-defined]  # the fixtures pytest passes
        [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in ["loop", "tmp_path", *fixtures]])
    return pytest.mark.parametrize("loop", LOOPS)(test)  # type: ignore[no-any-return]


@pytest.fixture
def writable_waits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the broker's waits for a full socket to take more of a file region."""
    waits: list[int] = []
    original = connection_module._writable

    async def counted(fd: int) -> None:
        waits.append(fd)
        await original(fd)

    monkeypatch.setattr(connection_module, "_writable", counted)
    return waits


async def _until(predicate: Callable[[], bool], message: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {message}")
        await asyncio.sleep(0.005)


def _fill(server: BrokerServer, topic: str, partitions: int, batch_bytes: int, batches: int) -> list[bytes]:
    """Append batches of random values straight to the logs; each partition's bytes as a fetch returns them."""
    assert server.services is not None
    logs = server.services.logs
    logs.create_topic(topic, partitions)
    contents = []
    for partition in range(partitions):
        log = logs.partition(topic, partition)
        assert log is not None
        for _ in range(batches):
            now = int(time.time() * 1000)
            log.append(build_batch([Record(None, os.urandom(batch_bytes), (), now)]), now)
        contents.append(log.read(0, 1 << 30).records)
    return contents  # type: ignore[return-value]  # read without as_region: bytes


def _fetch(correlation_id: int, topic: str, partitions: int) -> bytes:
    request = FetchRequest(
        max_wait=timedelta(milliseconds=10), min_bytes=1, max_bytes=1 << 30, isolation_level=0, session_id=0,
        session_epoch=-1, topics=(FetchTopic(topic=topic, partitions=tuple(
            FetchPartition(partition=partition, fetch_offset=0, partition_max_bytes=1 << 30, log_start_offset=-1)
            for partition in range(partitions))),), forgotten_topics_data=(), rack_id="")
    return encode_request(correlation_id, request)


class SlowReader:
    """A client socket with a small receive buffer, reading a little at a time."""

    def __init__(self, port: int) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_BUFFER)
        self.port = port

    async def connect(self, server: BrokerServer) -> None:
        loop = asyncio.get_running_loop()
        self.sock.setblocking(False)
        await loop.sock_connect(self.sock, ("127.0.0.1", self.port))
        await _until(lambda: len(server._connections) == 1 and None not in
                     [connection for connection, _task in server._connections.values()], "the broker's side")
        [(connection, _task)] = server._connections.values()
        assert connection is not None
        # The broker's own send buffer small too, so that a region never fits in the socket at once.
        connection.writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SMALL_BUFFER)

    async def send(self, data: bytes) -> None:
        await asyncio.get_running_loop().sock_sendall(self.sock, data)

    async def exactly(self, count: int) -> bytes:
        loop = asyncio.get_running_loop()
        data = bytearray()
        deadline = time.monotonic() + DEADLINE_S
        while len(data) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{len(data)} of {count} bytes within {DEADLINE_S} s")
            chunk = await asyncio.wait_for(loop.sock_recv(self.sock, min(4096, count - len(data))), remaining)
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return bytes(data)

    async def frame(self) -> bytes:
        (size,) = struct.unpack(">i", await self.exactly(4))
        return await self.exactly(size)

    def close(self) -> None:
        self.sock.close()


def _records(frame: bytes) -> tuple[int, list[bytes]]:
    correlation_id, response = decode_response(frame, ApiKey.FETCH, 12)
    [topic] = response.responses
    assert all(partition.error_code == 0 for partition in topic.partitions)
    return correlation_id, [partition.records for partition in topic.partitions]


async def _answers_a_new_connection(server: BrokerServer) -> None:
    assert server.node is not None
    stream_reader, writer = await asyncio.open_connection("127.0.0.1", server.node.port)
    writer.write(encode_request(9, ApiVersionsRequest()))
    (size,) = struct.unpack(">i", await asyncio.wait_for(stream_reader.readexactly(4), DEADLINE_S))
    assert decode_response(await stream_reader.readexactly(size), ApiKey.API_VERSIONS, 0)[0] == 9
    writer.close()


@on_each_loop
async def test_record_sets_reach_a_reader_slower_than_the_socket_whole(
        server: BrokerServer, writable_waits: list[int]) -> None:
    contents = _fill(server, "slow", 3, 50_000, 8)
    assert all(len(records) >= REGION_MIN_BYTES for records in contents)
    assert server.node is not None
    reader = SlowReader(server.node.port)
    try:
        await reader.connect(server)
        await reader.send(_fetch(7, "slow", 3))
        assert _records(await reader.frame()) == (7, contents)
    finally:
        reader.close()
    assert writable_waits  # the socket filled and the broker waited for the reader, not the bytes


@on_each_loop
async def test_a_region_is_sent_after_what_the_transport_still_held(
        server: BrokerServer, writable_waits: list[int]) -> None:
    # The first answer's record sets are below REGION_MIN_BYTES, so its bytes go through the transport,
    # which still holds most of them when the second answer's region is due.
    small = _fill(server, "held", 12, REGION_MIN_BYTES // 2, 1)
    big = _fill(server, "after", 1, 100_000, 6)
    assert server.node is not None
    reader = SlowReader(server.node.port)
    try:
        await reader.connect(server)
        await reader.send(_fetch(1, "held", 12) + _fetch(2, "after", 1))
        assert _records(await reader.frame()) == (1, small)
        assert _records(await reader.frame()) == (2, big)
    finally:
        reader.close()
    assert writable_waits


@on_each_loop
async def test_a_segment_deleted_while_it_is_being_sent_still_sends_what_was_read(
        server: BrokerServer, writable_waits: list[int]) -> None:
    contents = _fill(server, "doomed", 1, 100_000, 10)
    assert server.node is not None and server.services is not None
    reader = SlowReader(server.node.port)
    try:
        await reader.connect(server)
        await reader.send(_fetch(3, "doomed", 1))
        await _until(lambda: bool(writable_waits), "the broker to wait for the reader mid-answer")
        server.services.logs.delete_topic("doomed")
        assert _records(await reader.frame()) == (3, contents)
    finally:
        reader.close()


@on_each_loop
async def test_a_reader_leaving_mid_answer_ends_only_its_connection(
        server: BrokerServer, writable_waits: list[int]) -> None:
    _fill(server, "left", 1, 100_000, 10)
    assert server.node is not None
    reader = SlowReader(server.node.port)
    await reader.connect(server)
    await reader.send(_fetch(4, "left", 1))
    await _until(lambda: bool(writable_waits), "the broker to wait for the reader mid-answer")
    reader.close()
    await _until(lambda: server.connection_count == 0, "the connection to end")
    await _answers_a_new_connection(server)


@on_each_loop
async def test_a_wire_tap_sees_the_record_sets_that_are_sent(server: BrokerServer) -> None:
    contents = _fill(server, "tapped", 2, 100_000, 2)
    tapped: list[bytes] = []

    class Tap:
        def connection_opened(self, *_args: Any) -> None:
            pass

        def frame(self, _connection_id: int, from_client: bool, data: bytes) -> None:
            if not from_client:
                tapped.append(data)

        def connection_closed(self, _connection_id: int) -> None:
            pass

    assert server.node is not None and server.services is not None
    server.services.observers.taps.append(Tap())
    reader = SlowReader(server.node.port)
    try:
        await reader.connect(server)
        await reader.send(_fetch(5, "tapped", 2))
        frame = await reader.frame()
    finally:
        reader.close()
    assert _records(frame) == (5, contents)
    assert tapped == [struct.pack(">i", len(frame)) + frame]


@on_each_loop
async def test_where_sendfile_is_unsupported_the_record_sets_are_read_and_written(
        server: BrokerServer, monkeypatch: pytest.MonkeyPatch) -> None:
    contents = _fill(server, "nosendfile", 2, 100_000, 2)
    calls: list[int] = []

    def unsupported(*args: Any) -> int:
        calls.append(args[2])
        raise OSError(errno.EINVAL, "Invalid argument")

    # As sendfile(2) answers for a file system that cannot splice its pages (some FUSE ones).
    monkeypatch.setattr(connection_module.os, "sendfile", unsupported)
    assert server.node is not None
    reader = SlowReader(server.node.port)
    try:
        await reader.connect(server)
        for correlation_id in (6, 7):
            await reader.send(_fetch(correlation_id, "nosendfile", 2))
            assert _records(await reader.frame()) == (correlation_id, contents)
    finally:
        reader.close()
    assert len(calls) == 1  # tried once; the connection's later record sets were read straight away


@on_each_loop
async def test_a_segment_cut_short_under_a_region_closes_the_connection_only(
        server: BrokerServer, writable_waits: list[int]) -> None:
    _fill(server, "cut", 1, 100_000, 10)
    assert server.node is not None and server.services is not None
    log = server.services.logs.partition("cut", 0)
    assert log is not None
    reader = SlowReader(server.node.port)
    try:
        await reader.connect(server)
        await reader.send(_fetch(8, "cut", 1))
        await _until(lambda: bool(writable_waits), "the broker to wait for the reader mid-answer")
        os.truncate(log.segments[0].log_path, 1000)  # the disk lost the file's tail under the broker
        with pytest.raises(ConnectionError):
            await reader.frame()  # the answer cannot be finished: the connection is closed instead
    finally:
        reader.close()
    await _until(lambda: server.connection_count == 0, "the connection to end")
    await _answers_a_new_connection(server)
