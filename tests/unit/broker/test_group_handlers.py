"""The consumer-group handlers across their versions: kio requests in, encodable responses out."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from kio.index import load_request_schema
from minikafka.broker.config.config import BrokerConfig
from minikafka.broker.handlers import all_handler_modules
from minikafka.broker.security.session import plaintext_session
from minikafka.broker.wire.cluster import ClusterView, Node
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wiring import make_group_coordinator
from minikafka.coordinator.group import OffsetCommit
from minikafka.coordinator.share.coordinator import ShareCoordinator
from minikafka.protocol.build import build
from minikafka.protocol.codec import encode_response
from minikafka.protocol.errors import ErrorCode as E

from ..coordinator.group.fakes import FakeClock, FakeLogManager

NODE = Node(1, "127.0.0.1", 9092)
HANDLERS = {int(m.API_KEY): m for m in all_handler_modules()}


@dataclasses.dataclass
class Services:
    config: Any
    clock: Any
    cluster: Any
    logs: Any
    groups: Any = None
    shares: Any = None

    def is_share_group(self, group_id: str) -> bool:
        return bool(self.shares.is_share_group(group_id))

    def share_groups(self) -> list[Any]:
        return list(self.shares.groups.values())


@pytest.fixture
def services() -> Services:
    logs, clock = FakeLogManager(), FakeClock()
    logs.create_topic("t", 4)
    s = Services(BrokerConfig(), clock, ClusterView("c", [NODE]), logs)
    s.groups = make_group_coordinator(s.config, logs, clock)
    s.shares = ShareCoordinator(logs, clock)  # the group handlers refuse share group ids
    return s


async def call(services: Services, api_key: int, version: int, **fields: Any) -> Any:
    request = build(load_request_schema(api_key, version), **fields)
    ctx = RequestContext(api_key, version, 1, "cli", 1, "127.0.0.1:5555", NODE, services,  # type: ignore[arg-type]
                         plaintext_session("127.0.0.1"))
    response = await HANDLERS[api_key].handle(ctx, request)
    encode_response(1, response)
    return response


@pytest.mark.parametrize("version", range(7))
async def test_find_coordinator(services: Services, version: int) -> None:
    r = await call(services, 10, version, key="g", key_type=0, coordinator_keys=["g", "h"])
    entries = r.coordinators if version >= 4 else [r]
    assert all(e.node_id == 1 and e.port == 9092 and e.error_code is E.none for e in entries)
    assert services.logs.topic("__consumer_offsets").partitions == 50


async def join_and_sync(services: Services, version: int, group: str) -> str:
    fields = dict(group_id=group, session_timeout=10000, rebalance_timeout=20000, member_id="",
                  protocol_type="consumer", protocols=[{"name": "range", "metadata": b"x"}])
    r = await call(services, 11, version, **fields)
    if version >= 4:
        assert r.error_code is E.member_id_required
        r = await call(services, 11, version, **{**fields, "member_id": r.member_id})
    assert r.error_code is E.none and r.generation_id == 1 and r.leader == r.member_id and len(r.members) == 1
    s = await call(services, 14, min(version, 5), group_id=group, generation_id=1, member_id=r.member_id,
                   assignments=[{"member_id": r.member_id, "assignment": b"A"}])
    assert s.error_code is E.none and s.assignment == b"A"
    return r.member_id


@pytest.mark.parametrize("version", [0, 1, 3, 4, 5, 7, 9])
async def test_join_sync_heartbeat_commit(services: Services, version: int) -> None:
    member = await join_and_sync(services, version, "g")
    hb = await call(services, 12, min(version, 4), group_id="g", generation_id=1, member_id=member)
    assert hb.error_code is E.none
    bad = await call(services, 12, min(version, 4), group_id="g", generation_id=5, member_id=member)
    assert bad.error_code is E.illegal_generation
    for commit_version in (2, 6, 9):
        c = await call(services, 8, commit_version, group_id="g", generation_id_or_member_epoch=1,
                       member_id=member, topics=[{"name": "t", "partitions": [
                           {"partition_index": 0, "committed_offset": 5, "committed_metadata": "m"},
                           {"partition_index": 9, "committed_offset": 5}]}])
        errors = [p.error_code for p in c.topics[0].partitions]
        assert errors == [E.none, E.unknown_topic_or_partition]


@pytest.mark.parametrize("version", [1, 2, 5, 7, 8])
async def test_offset_fetch(services: Services, version: int) -> None:
    services.groups.commit_offsets(group_id="g", generation_id=-1, member_id="", group_instance_id=None,
                                   commits=[OffsetCommit("t", 0, 7, 2, "meta")])
    r = await call(services, 9, version, group_id="g", topics=[{"name": "t", "partition_indexes": [0, 1]}],
                   groups=[{"group_id": "g", "topics": None}])
    topics = r.groups[0].topics if version >= 8 else r.topics
    parts = {p.partition_index: p for p in topics[0].partitions}
    assert parts[0].committed_offset == 7 and parts[0].metadata == "meta"
    if version < 8:
        assert parts[1].committed_offset == -1


async def test_describe_list_leave_delete(services: Services) -> None:
    member = await join_and_sync(services, 5, "g")
    d = await call(services, 15, 5, groups=["g", "missing"])
    assert [g.group_state for g in d.groups] == ["Stable", "Dead"]
    assert d.groups[0].members[0].member_assignment == b"A"
    listed = await call(services, 16, 4, states_filter=["stable"])
    assert [(g.group_id, g.group_state) for g in listed.groups] == [("g", "Stable")]
    deleted = await call(services, 42, 2, groups_names=["g", "missing"])
    assert [x.error_code for x in deleted.results] == [E.non_empty_group, E.group_id_not_found]
    left = await call(services, 13, 3, group_id="g", members=[{"member_id": member}, {"member_id": "nobody"}])
    assert [m.error_code for m in left.members] == [E.none, E.unknown_member_id]
    old = await call(services, 13, 0, group_id="g", member_id="nobody")
    assert old.error_code is E.unknown_member_id
    deleted = await call(services, 42, 2, groups_names=["g"])
    assert deleted.results[0].error_code is E.none


async def test_offset_delete(services: Services) -> None:
    r = await call(services, 47, 0, group_id="nope", topics=[{"name": "t", "partitions": [{"partition_index": 0}]}])
    assert r.error_code is E.group_id_not_found
    await join_and_sync(services, 5, "g")
    r = await call(services, 47, 0, group_id="g", topics=[{"name": "t", "partitions": [{"partition_index": 0}]}])
    assert r.error_code is E.none and r.topics[0].partitions[0].error_code is E.none
