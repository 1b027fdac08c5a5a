"""Shutdown does not wait out a consumer's long poll (tests/e2e/test_shutdown.py has the process side).
How fast it stops is measured by bench/shutdown.py, not here."""

from __future__ import annotations

import asyncio
import struct
import time
from datetime import timedelta
from pathlib import Path

from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from minikafka.broker.config.config import BrokerConfig
from minikafka.broker.server import BrokerServer
from minikafka.protocol.codec import decode_response, encode_request

DEADLINE_S = 30.0
LONG_POLL = timedelta(minutes=10)


def _fetch(topic: str, offset: int) -> FetchRequest:
    return FetchRequest(max_wait=LONG_POLL, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
                        session_epoch=-1, topics=(FetchTopic(topic=topic, partitions=(
                            FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20,
                                           log_start_offset=-1),)),), forgotten_topics_data=(), rack_id="")


async def _until(predicate: object, message: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {message}")
        await asyncio.sleep(0.01)


async def test_a_fetch_parked_for_minutes_is_answered_at_shutdown(tmp_path: Path) -> None:
    """Both the long poll and shutdown.timeout.ms are minutes: the fetch is answered (empty) and the
    connection closed as soon as the shutdown starts, not when either runs out."""
    server = BrokerServer(BrokerConfig(host="127.0.0.1", port=0, data_dir=tmp_path / "data",
                                       shutdown_timeout_ms=int(LONG_POLL.total_seconds() * 1000)))
    await server.start()
    assert server.services is not None and server.node is not None
    server.services.logs.create_topic("parked", 1)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.node.port)
    writer.write(encode_request(5, _fetch("parked", 0)))
    await _until(lambda: any(c is not None and c.busy for c, _task in server._connections.values()),
                 "the fetch to be parked")
    stopping = asyncio.create_task(server.shutdown())
    (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), DEADLINE_S))
    corr, response = decode_response(await reader.readexactly(size), 1, 12)
    [partition] = response.responses[0].partitions
    assert corr == 5 and partition.error_code == 0 and not partition.records
    assert await asyncio.wait_for(reader.read(1), DEADLINE_S) == b"", "closed after the answer"
    await asyncio.wait_for(stopping, DEADLINE_S)
    assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()
    writer.close()
