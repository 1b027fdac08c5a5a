"""Several nodes and listeners in one process: each node binds every listener, stops and starts on the same
ports, and a connection belongs to the node and listener it came in on (the cluster semantics on top are
tested in tests/e2e/test_cluster.py)."""

from __future__ import annotations

import asyncio
import random
import socket
import struct
from pathlib import Path

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from minikafka.broker.config.config import build_config
from minikafka.broker.server import BrokerServer
from minikafka.protocol.codec import decode_response, encode_request

DEADLINE_S = 15.0


def _free_port_block(count: int) -> int:
    """A base port whose next `count` ports are free now, outside the kernel's ephemeral range: the broker's
    own `:0` listeners and every client connection in the run take their ports from that range, so a block
    inside it could be taken between this check and the broker's bind."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    bases = [*range(10000, low - count), *range(high + 1, 65536 - count)]
    assert bases, f"no ports outside the ephemeral range {low}-{high}"
    for base in random.sample(bases, min(50, len(bases))):
        held = []
        try:
            for offset in range(count):
                held.append(socket.create_server(("127.0.0.1", base + offset)))
            return base
        except OSError:
            continue
        finally:
            for sock in held:
                sock.close()
    raise AssertionError("no block of free ports found")


async def _api_versions(port: int) -> int:
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), DEADLINE_S)
    try:
        writer.write(encode_request(7, ApiVersionsRequest(client_software_name="t", client_software_version="1")))
        (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), DEADLINE_S))
        correlation_id, response = decode_response(await reader.readexactly(size), 18, 3)
        assert response.error_code == 0
        return correlation_id
    finally:
        writer.close()


async def _refused(port: int) -> bool:
    try:
        _reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), DEADLINE_S)
    except ConnectionRefusedError:
        return True
    writer.close()
    return False


async def test_every_node_binds_every_listener_on_consecutive_ports(tmp_path: Path) -> None:
    base = _free_port_block(3)
    config = build_config(environ={}, data_dir=tmp_path / "data", overrides=[
        f"listeners=PLAINTEXT://127.0.0.1:{base},EXTERNAL://127.0.0.1:0",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT", "minikafka.nodes=3", "node.id=1"])
    server = BrokerServer(config)
    await server.start()
    try:
        assert server.services is not None
        assert server.node_ids == [1, 2, 3]
        assert [server.port_of(node_id) for node_id in (1, 2, 3)] == [base, base + 1, base + 2]
        external = [server.port_of(node_id, "EXTERNAL") for node_id in (1, 2, 3)]
        assert len(set(external) | {base, base + 1, base + 2}) == 6
        for port in [base, base + 1, base + 2, *external]:
            assert await _api_versions(port) == 7
        cluster = server.services.cluster
        assert [(n.node_id, n.port) for n in cluster.nodes_on("EXTERNAL")] == list(zip((1, 2, 3), external,
                                                                                       strict=True))
        assert [n.port for n in cluster.nodes_on("PLAINTEXT")] == [base, base + 1, base + 2]
    finally:
        await server.shutdown()


async def test_a_stopped_node_refuses_connections_drops_its_clients_and_comes_back_on_its_ports(
        tmp_path: Path) -> None:
    config = build_config(environ={}, data_dir=tmp_path / "data", port=0, overrides=["minikafka.nodes=2"])
    server = BrokerServer(config)
    await server.start()
    try:
        assert server.services is not None
        changes: list[tuple[int, bool]] = []
        server.services.cluster.node_changes.append(lambda node_id, online: changes.append((node_id, online)))
        port_2 = server.port_of(2)
        reader, writer = await asyncio.open_connection("127.0.0.1", port_2)
        writer.write(encode_request(1, ApiVersionsRequest(client_software_name="t", client_software_version="1")))
        await asyncio.wait_for(reader.readexactly(4), DEADLINE_S)
        await server.stop_node(2)
        assert changes == [(2, False)]
        assert not server.services.cluster.is_online(2) and server.services.cluster.online_ids == [1]
        assert [n.node_id for n in server.services.cluster.nodes_on("PLAINTEXT")] == [1]
        await asyncio.wait_for(reader.read(), DEADLINE_S)  # the open connection is closed: read reaches EOF
        assert await _refused(port_2)
        assert await _api_versions(server.port_of(1)) == 7, "the other node is unaffected"
        await server.start_node(2)
        assert changes == [(2, False), (2, True)] and server.services.cluster.is_online(2)
        assert await _api_versions(port_2) == 7
        writer.close()
    finally:
        await server.shutdown()


@pytest.mark.parametrize(("overrides", "message"), [
    (["listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093", "minikafka.nodes=3"], "too close"),
    (["listeners=PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9192"], "used twice"),
    (["listeners=INTERNAL://127.0.0.1:9092"], "no security protocol defined for listener INTERNAL"),
    (["listener.security.protocol.map=PLAINTEXT:TLS"], "listener.security.protocol.map"),
    (["advertised.listeners=SSL://example:9093"], "not in listeners"),
])
def test_bad_listener_configs_are_clear_errors(overrides: list[str], message: str) -> None:
    from minikafka.broker.config.config import ConfigError

    with pytest.raises(ConfigError, match=message):
        build_config(environ={}, overrides=overrides)


def test_controller_listeners_are_not_served() -> None:
    config = build_config(environ={}, overrides=[
        "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093", "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"])
    assert [listener.name for listener in config.listeners] == ["PLAINTEXT"]
