"""The group, transaction and share coordinators, the client metrics manager, the client quota enforcement and
the SASL server are built at first use, not at every start.

Most brokers never see a share group, a telemetry push or a SASL handshake: a start does not import or build them
(tests/testing/test_start_imports.py keeps their modules off a plain start's list). Lookups every group
request makes (is this group id a share group? which share groups are there?) answer without building the
share coordinator; a share request builds it; a data directory holding share state builds it at start so
the state is replayed with the other coordinators'. The group coordinator likewise: its first request
(FindCoordinator included) builds it, `__consumer_offsets` on disk builds it at start, and one built while the
coordinator load waits out its delay is loaded by that load. The transaction coordinator: a transactional
request builds it (an idempotent producer's id comes from the producer id block), `__transaction_state` on
disk builds it at start. The client quotas: a quota request builds them, quotas kept in the data dir build them
at start so they hold from the first request; until then no quota is set and nothing asks them. The SASL
server is built at start where a listener speaks SASL or SCRAM users are configured, so a wrong setting still
stops the start.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from minikafka.broker.config.config import BrokerConfig, ConfigError
from minikafka.broker.server import BrokerServer
from minikafka.broker.wire.services import BrokerServices
from minikafka.coordinator.group import OffsetCommit
from minikafka.coordinator.internal_topics import SHARE_STATE_TOPIC
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.build import build
from minikafka.protocol.codec import encode_request, load_request_schema
from minikafka.protocol.errors import ErrorCode

_correlation = iter(range(1, 1_000_000))


def _config(data_dir: Path) -> BrokerConfig:
    return BrokerConfig(host="127.0.0.1", port=0, data_dir=data_dir)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[BrokerServer]:
    broker = BrokerServer(_config(tmp_path / "data"))
    await broker.start()
    yield broker
    await broker.shutdown()


async def _ask(server: BrokerServer, api_key: int, version: int, **fields: Any) -> bytes:
    assert server.node is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", server.node.port)
    try:
        writer.write(encode_request(next(_correlation), build(load_request_schema(api_key, version), **fields)))
        await writer.drain()
        size = await asyncio.wait_for(reader.readexactly(4), 10)
        return await asyncio.wait_for(reader.readexactly(struct.unpack(">i", size)[0]), 10)
    finally:
        writer.close()


async def _loaded(coordinator: Any) -> None:
    """Wait for the coordinator load, which runs between requests: a few loop turns here."""
    for _ in range(1000):  # bounded: 10 s
        if coordinator.loaded:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the coordinator was not loaded within 10 s")


@contextlib.asynccontextmanager
async def _restarted(tmp_path: Path, before: Callable[[BrokerServer], Awaitable[object]]
                     ) -> AsyncIterator[BrokerServices]:
    """A broker that ran `before` and stopped, started again on the same data dir: its services."""
    first = BrokerServer(_config(tmp_path / "data"))
    await first.start()
    try:
        await before(first)
    finally:
        await first.shutdown()
    second = BrokerServer(_config(tmp_path / "data"))
    await second.start()
    try:
        assert second.services is not None
        yield second.services
    finally:
        await second.shutdown()


async def test_group_requests_do_not_build_the_share_coordinator(server: BrokerServer) -> None:
    services = server.services
    assert services is not None
    await _ask(server, ApiKey.LIST_GROUPS, 5, states_filter=(), types_filter=())
    await _ask(server, ApiKey.DELETE_GROUPS, 2, groups_names=("nobody",))
    await _ask(server, ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, group_id="g", member_id="m1", member_epoch=0,
               instance_id=None, rack_id=None, rebalance_timeout_ms=30000, subscribed_topic_names=("t",),
               server_assignor=None, topic_partitions=())
    assert services.share_coordinator.built is None
    assert services.client_metrics_manager.built is None


async def test_a_share_request_builds_it_loaded(server: BrokerServer) -> None:
    services = server.services
    assert services is not None
    await _ask(server, ApiKey.SHARE_GROUP_HEARTBEAT, 1, group_id="queue", member_id="m1", member_epoch=0,
               rack_id=None, subscribed_topic_names=("t",))
    shares = services.share_coordinator.built
    assert shares is not None and shares.loaded
    assert services.is_share_group("queue")
    assert [group.group_id for group in services.share_groups()] == ["queue"]


async def test_share_state_on_disk_builds_it_at_start(tmp_path: Path) -> None:
    async def share_state(first: BrokerServer) -> None:
        assert first.services is not None
        first.services.logs.create_topic(SHARE_STATE_TOPIC, 1)

    async with _restarted(tmp_path, share_state) as services:
        assert services.share_coordinator.built is not None


async def test_a_telemetry_request_builds_the_client_metrics_manager(tmp_path: Path) -> None:
    broker = BrokerServer(BrokerConfig(host="127.0.0.1", port=0, data_dir=tmp_path / "data",
                                       client_telemetry_enabled=True))
    await broker.start()
    try:
        assert broker.services is not None and broker.services.client_metrics_manager.built is None
        await _ask(broker, ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0,
                   client_instance_id=uuid.UUID(int=0))
        assert broker.services.client_metrics_manager.built is not None
    finally:
        await broker.shutdown()


async def test_sasl_is_built_at_the_first_scram_request_on_a_broker_without_sasl(server: BrokerServer) -> None:
    services = server.services
    assert services is not None and services.sasl_server is not None
    assert services.sasl_server.built is None
    await _ask(server, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, users=None)
    assert services.sasl_server.built is not None


async def test_configured_scram_users_build_sasl_at_start_and_a_wrong_entry_stops_it(tmp_path: Path) -> None:
    seeded = BrokerServer(BrokerConfig(host="127.0.0.1", port=0, data_dir=tmp_path / "seeded",
                                       properties={"minikafka.scram.users": "alice:secret"}))
    await seeded.start()
    try:
        assert seeded.services is not None and seeded.services.sasl_server is not None
        assert seeded.services.sasl_server.built is not None
    finally:
        await seeded.shutdown()
    wrong = BrokerServer(BrokerConfig(host="127.0.0.1", port=0, data_dir=tmp_path / "wrong",
                                      properties={"minikafka.scram.users": "alice"}))
    with pytest.raises(ConfigError, match="expected user:password"):
        await wrong.start()


async def test_a_start_and_its_first_non_group_requests_do_not_build_the_group_coordinator(
        server: BrokerServer) -> None:
    services = server.services
    assert services is not None
    await _ask(server, ApiKey.API_VERSIONS, 3, client_software_name="t", client_software_version="1")
    await _ask(server, ApiKey.METADATA, 12, topics=None, allow_auto_topic_creation=False,
               include_topic_authorized_operations=False)
    assert services.group_coordinator.built is None
    await _ask(server, ApiKey.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=("g",))
    groups = services.group_coordinator.built
    assert groups is not None and groups.loaded


async def test_offsets_on_disk_build_the_group_coordinator_at_start_and_replay_them(tmp_path: Path) -> None:
    async def commit(first: BrokerServer) -> None:
        assert first.services is not None
        first.services.logs.create_topic("t", 1)
        first.services.groups.commit_offsets(group_id="g", generation_id=-1, member_id="", group_instance_id=None,
                                             commits=[OffsetCommit("t", 0, 7, -1, "")])

    async with _restarted(tmp_path, commit) as services:
        groups = services.group_coordinator.built
        assert groups is not None
        await _loaded(groups)
        committed = groups.offsets.fetch("g", ("t", 0))
        assert committed is not None and committed.offset == 7


async def test_a_group_coordinator_built_during_the_load_delay_waits_for_the_load(tmp_path: Path) -> None:
    broker = BrokerServer(BrokerConfig(host="127.0.0.1", port=0, data_dir=tmp_path / "data",
                                       coordinator_load_delay_ms=600_000))
    await broker.start()
    try:
        services = broker.services
        assert services is not None and services.group_coordinator.built is None
        answer = await _ask(broker, ApiKey.LIST_GROUPS, 5, states_filter=(), types_filter=())
        # ListGroups v5: correlation id, tag buffer, throttle time, then the error code.
        assert struct.unpack_from(">h", answer, 9)[0] == ErrorCode.coordinator_load_in_progress
        groups = services.group_coordinator.built
        assert groups is not None and not groups.loaded
        load = broker._coordinator_load
        assert load is not None
        load.cancel()  # the held load, run now without its delay
        await asyncio.gather(load, return_exceptions=True)
        await broker._load_coordinators(0)
        assert groups.loaded and services.transaction_coordinator.built is None
        await _ask(broker, ApiKey.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=("g",))
        assert services.group_coordinator.built is groups
    finally:
        await broker.shutdown()


async def test_a_start_and_an_idempotent_producer_do_not_build_the_transaction_coordinator(
        server: BrokerServer) -> None:
    services = server.services
    assert services is not None
    server.services.logs.create_topic("t", 1)
    answer = await _ask(server, ApiKey.INIT_PRODUCER_ID, 4, transactional_id=None, transaction_timeout=60000,
                        producer_id=-1, producer_epoch=-1)
    # InitProducerId v4: correlation id, tag buffer, throttle time, then the error code and the producer id.
    error_code, producer_id = struct.unpack_from(">hq", answer, 9)
    assert error_code == ErrorCode.none and producer_id >= 0
    await _ask(server, ApiKey.DESCRIBE_PRODUCERS, 0, topics=({"name": "t", "partition_indexes": (0,)},))
    assert services.transaction_coordinator.built is None
    await _ask(server, ApiKey.INIT_PRODUCER_ID, 4, transactional_id="txn", transaction_timeout=60000,
               producer_id=-1, producer_epoch=-1)
    transactions = services.transaction_coordinator.built
    assert transactions is not None and transactions.loaded and "txn" in transactions.txns


async def test_transaction_state_on_disk_builds_the_transaction_coordinator_at_start_and_replays_it(
        tmp_path: Path) -> None:
    async def init_transactional_producer(first: BrokerServer) -> None:
        await _ask(first, ApiKey.INIT_PRODUCER_ID, 4, transactional_id="txn", transaction_timeout=60000,
                   producer_id=-1, producer_epoch=-1)

    async with _restarted(tmp_path, init_transactional_producer) as services:
        transactions = services.transaction_coordinator.built
        assert transactions is not None
        await _loaded(transactions)
        assert "txn" in transactions.txns
        assert services.crash_points.reach == transactions.crash_point  # wired when built at start too


async def test_the_state_snapshot_and_a_metrics_scrape_look_without_building_a_coordinator(
        server: BrokerServer) -> None:
    from minikafka.broker.control.admin_http import state_snapshot
    from minikafka.broker.observe.prometheus import render

    services = server.services
    assert services is not None
    snapshot = state_snapshot(services)
    assert snapshot["groups"] == {} and snapshot["share_groups"] == {}
    assert b'kafka_server_group_coordinator_metrics_classic_group_count{state="Stable"} 0.0' in render(services)
    assert snapshot["transactions"] == {}
    assert b'minikafka_transactions_open 0.0' in render(services)
    assert services.group_coordinator.built is None and services.share_coordinator.built is None
    assert services.transaction_coordinator.built is None


async def test_a_start_and_requests_without_quotas_do_not_build_the_quota_enforcement(server: BrokerServer) -> None:
    from minikafka.broker.observe.prometheus import render

    services = server.services
    assert services is not None
    await _ask(server, ApiKey.API_VERSIONS, 3, client_software_name="t", client_software_version="1")
    # CreateTopics counts its partitions against controller_mutation_rate where a quota is set.
    answer = await _ask(server, ApiKey.CREATE_TOPICS, 7, timeout_ms=5000, validate_only=False, topics=(
        {"name": "t", "num_partitions": 2, "replication_factor": 1, "assignments": (), "configs": ()},))
    assert services.logs.topic("t") is not None, answer
    assert b"kafka_server_produce_byte_rate" in render(services)  # the families, empty
    assert services.client_quotas.built is None
    await _ask(server, ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, components=(), strict=False)
    quotas = services.client_quotas.built
    assert quotas is not None and not quotas.any_enabled


async def test_quotas_on_disk_build_the_enforcement_at_start(tmp_path: Path) -> None:
    async def set_quota(first: BrokerServer) -> None:
        await _ask(first, ApiKey.ALTER_CLIENT_QUOTAS, 1, validate_only=False, entries=(
            {"entity": ({"entity_type": "client-id", "entity_name": "busy"},),
             "ops": ({"key": "request_percentage", "value": 12.5, "remove": False},)},))

    async with _restarted(tmp_path, set_quota) as services:
        quotas = services.client_quotas.built
        assert quotas is not None and quotas.any_enabled and quotas.request.enabled
