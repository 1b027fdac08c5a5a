"""Small helpers shared by handlers: partition lookup and the response class.

Exceptions become error codes in one place, `..errors` (error_code_for, error_fields), which also
holds the per-API, per-version translations (PRODUCER_FENCED to old clients and the like).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from minikafka.broker.wire.cluster import NO_LEADER
from minikafka.protocol.codec import response_class
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.errors import UnknownTopicOrPartition

if TYPE_CHECKING:
    from minikafka.broker.wire.context import RequestContext
    from minikafka.storage.log import PartitionLog


class NotLeaderOrFollower(KafkaError):
    """The partition is led by another node (or by none); KIP-951 responses name the current leader."""

    error_code = ErrorCode.not_leader_or_follower

    def __init__(self, topic: str, partition: int, leader: int, leader_epoch: int) -> None:
        where = f"node {leader}" if leader != NO_LEADER else "no node (all its replicas are down)"
        super().__init__(f"{topic}-{partition} is led by {where}")
        self.current_leader = {"leader_id": leader, "leader_epoch": leader_epoch if leader != NO_LEADER else -1}


class NotEnoughReplicas(KafkaError):
    error_code = ErrorCode.not_enough_replicas


def check_min_insync_replicas(ctx: RequestContext, log: PartitionLog, topic: str, partition: int) -> None:
    """An acks=all write needs min.insync.replicas in the ISR, checked before the append as Kafka's
    Partition.appendRecordsToLeader does (with its message). Replicas here hold no copy of their own, so
    the ISR cannot shrink during an append: NOT_ENOUGH_REPLICAS_AFTER_APPEND never arises."""
    minimum = log.config.min_insync_replicas
    if minimum <= 1:
        return  # the leader itself is always in its ISR
    isr = ctx.services.cluster.partition(topic, partition).isr
    if len(isr) < minimum:
        raise NotEnoughReplicas(f"The size of the current ISR Set({', '.join(map(str, isr))}) is insufficient to "
                                f"satisfy the min.isr requirement of {minimum} for partition {topic}-{partition}")


def partition_log(ctx: RequestContext, topic: str, partition: int) -> PartitionLog:
    """The log of a partition this node leads; UNKNOWN_TOPIC_OR_PARTITION, else NOT_LEADER_OR_FOLLOWER."""
    log = ctx.services.logs.partition(topic, partition)
    if log is None:
        raise UnknownTopicOrPartition(f"{topic}-{partition} does not exist on this node")
    cluster = ctx.services.cluster
    leader = cluster.leader_of(topic, partition)
    if leader != ctx.node.node_id:
        raise NotLeaderOrFollower(topic, partition, leader, cluster.partition(topic, partition).leader_epoch)
    return log


def check_leader_epoch(current_leader_epoch: int, leader_epoch: int) -> None:
    """KIP-320: a client's idea of the leader epoch (-1: none) older than the leader's is fenced, a newer one
    is not known yet here."""
    if current_leader_epoch < 0 or current_leader_epoch == leader_epoch:
        return
    if current_leader_epoch < leader_epoch:
        raise KafkaError(f"leader epoch {current_leader_epoch} is fenced by {leader_epoch}",
                         code=ErrorCode.fenced_leader_epoch)
    raise KafkaError(f"leader epoch {current_leader_epoch} is newer than {leader_epoch}",
                     code=ErrorCode.unknown_leader_epoch)


def leader_endpoints(ctx: RequestContext, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """KIP-951's node_endpoints: the address, on the request's listener, of every leader an entry names."""
    cluster = ctx.services.cluster
    leaders = sorted({leader["leader_id"] for entry in entries if (leader := entry.get("current_leader"))
                      and leader["leader_id"] != NO_LEADER})
    nodes = [cluster.endpoint(ctx.session.listener_name, node_id) for node_id in leaders]
    return [{"node_id": n.node_id, "host": n.host, "port": n.port, "rack": n.rack} for n in nodes]


def response_of(request: Any) -> type:
    return response_class(request.__api_key__, request.__version__)
