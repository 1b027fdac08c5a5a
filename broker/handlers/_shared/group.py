"""Helpers shared by the consumer-group handlers: the coordinator, coordinator ownership, hosts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from minikafka.coordinator.group import OFFSETS_TOPIC, GroupCoordinator
from minikafka.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from minikafka.broker.wire.context import RequestContext


def coordinator(ctx: RequestContext) -> GroupCoordinator:
    return ctx.services.groups


def ownership_error(ctx: RequestContext, group_id: str) -> ErrorCode | None:
    """NOT_COORDINATOR when another node leads the group's `__consumer_offsets` partition."""
    groups = coordinator(ctx)
    leader = ctx.services.cluster.leader_of(OFFSETS_TOPIC, groups.partition_for(group_id))
    return None if leader == ctx.node.node_id else ErrorCode.not_coordinator


def client_host(ctx: RequestContext) -> str:
    """Kafka reports the client's address as InetAddress.toString(): "/127.0.0.1"."""
    host = ctx.peer.rsplit(":", 1)[0] if ":" in ctx.peer else ctx.peer
    return "/" + host.strip("[]")


def other_group_type(ctx: RequestContext, group_id: str) -> bool:
    """A classic or KIP-848 consumer group: the share group APIs refuse it as "not a share group"."""
    groups = coordinator(ctx)
    return group_id in groups.groups or groups.consumer_group(group_id) is not None
