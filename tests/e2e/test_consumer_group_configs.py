"""Dynamic GROUP configs (IncrementalAlterConfigs, KIP-848) applied to a consumer group over the wire:
the heartbeat interval a ConsumerGroupHeartbeat response carries and the session timeout that expels a
silent member. The broker runs on the manual clock, so the timeout is reached by moving it."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i32Timedelta
from minikafka.protocol.codec import decode_response, encode_request
from minikafka.protocol.errors import ErrorCode
from minikafka.testing import Broker

from tests.support.wire import Wire

BROKER_SESSION_MS = 45_000
GROUP_SESSION_MS = 50_000


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker({"minikafka.clock": "manual"}, mode="inprocess") as running:
        yield running


def _set_group_configs(broker: Broker, group: str, **values: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    resource = ConfigResource(ResourceType.GROUP, group)
    for key, value in values.items():
        resource.add_incremental_config(ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET))
    admin.incremental_alter_configs([resource])[resource].result(15)


def _heartbeat(wire: Wire, correlation: int, group: str, member: str, epoch: int, topic: str | None) -> Any:
    joining: dict[str, Any] = {} if topic is None else {
        "rebalance_timeout": i32Timedelta.parse(datetime.timedelta(seconds=60)),
        "subscribed_topic_names": (TopicName(topic),), "topic_partitions": ()}
    request = ConsumerGroupHeartbeatRequest(group_id=GroupId(group), member_id=member, member_epoch=i32(epoch),
                                            **{"topic_partitions": None, **joining})
    wire.send(encode_request(correlation, request))
    _corr, response = decode_response(wire.receive(), 68, 1)
    return response


def _members(broker: Broker, group: str) -> set[str]:
    return {m["member_id"] for m in broker.state()["groups"].get(group, {}).get("members", [])}


def test_group_configs_set_heartbeat_interval_and_session_timeout(broker: Broker) -> None:
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
    wire = Wire(broker)
    try:
        first = _heartbeat(wire, 1, group, "m1", 0, topic)
        assert (first.error_code, first.member_epoch) == (ErrorCode.none, 1)
        assert first.heartbeat_interval.total_seconds() * 1000 == 5000  # the broker's default
        _set_group_configs(broker, group, **{"consumer.heartbeat.interval.ms": "7000",
                                             "consumer.session.timeout.ms": str(GROUP_SESSION_MS)})
        # The next heartbeat carries the group's interval and restarts the session with the group's timeout.
        renewed = _heartbeat(wire, 2, group, "m1", 1, None)
        assert renewed.error_code == ErrorCode.none
        assert renewed.heartbeat_interval.total_seconds() * 1000 == 7000
        broker.advance_clock(BROKER_SESSION_MS + 1)
        assert _members(broker, group) == {"m1"}  # the broker's 45 s alone would have expelled it
        broker.advance_clock(GROUP_SESSION_MS - BROKER_SESSION_MS)
        assert _members(broker, group) == set()
        late = _heartbeat(wire, 3, group, "m1", 1, None)
        assert late.error_code == ErrorCode.unknown_member_id
    finally:
        wire.close()
