"""When even the UNKNOWN_SERVER_ERROR response to a request cannot be encoded (the request's values do
not fit its response schema), dispatch closes that connection with one warning instead of letting the
encoding error escape; the broker keeps serving everyone else.

In-process broker on a free 127.0.0.1 port, spoken to over a real socket by raw frames.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from kio.schema.metadata.v11.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.request import MetadataRequest as MetadataV12
from minikafka.broker.config.config import BrokerConfig
from minikafka.broker.handlers import metadata
from minikafka.broker.server import BrokerServer
from minikafka.protocol.codec import decode_response, encode_request
from minikafka.protocol.errors import ErrorCode


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[BrokerServer]:
    broker = BrokerServer(BrokerConfig(host="127.0.0.1", port=0, data_dir=tmp_path / "data"))
    await broker.start()
    yield broker
    await broker.shutdown()


async def _boom(_ctx: Any, _request: Any) -> Any:
    raise RuntimeError("a bug in a handler")


async def test_unencodable_error_response_closes_only_that_connection(
        server: BrokerServer, monkeypatch: pytest.MonkeyPatch) -> None:
    assert server.services is not None and server.node is not None
    route = server.services.registry.route(metadata.API_KEY)
    assert route is not None
    monkeypatch.setitem(server.services.registry._routes, metadata.API_KEY,
                        type(route)(route.api_key, route.versions, route.advertised, _boom, route.name))
    # The generic error response mirrors the request's null name, which a v11 response cannot carry.
    request = MetadataRequest(topics=(MetadataRequestTopic(name=None, topic_id=None),),
                              allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.node.port)
    with structlog.testing.capture_logs() as logs:
        writer.write(encode_request(5, request))
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 10) == b"", "closed without a response"
    writer.close()

    closing = [e for e in logs if e["event"] == "closing connection"]
    assert len(closing) == 1, "one line for the close"
    assert "cannot encode the UNKNOWN_SERVER_ERROR response to METADATA v11" in closing[0]["reason"]
    assert not [e for e in logs if e["event"] == "request failed; closing connection"], "no second traceback"

    # Everyone else is still served, by the same broker.
    monkeypatch.undo()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.node.port)
    writer.write(encode_request(6, MetadataV12(topics=None, allow_auto_topic_creation=False,
                                               include_topic_authorized_operations=False)))
    await writer.drain()
    (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))
    corr, response = decode_response(await reader.readexactly(size), metadata.API_KEY, 12)
    writer.close()
    assert corr == 6 and [b.node_id for b in response.brokers] == [server.node.node_id]
    assert all(t.error_code == ErrorCode.none for t in response.topics)
