"""ElectLeaders: v0-2.

Behavior: elections over the `--nodes N` cluster view (broker/wire/cluster.py), as Kafka's controller
makes them (ReplicationControlManager.electLeaders). PREFERRED (v0 always) makes the first replica the
leader: ELECTION_NOT_NEEDED when it already leads, PREFERRED_LEADER_NOT_AVAILABLE when it is stopped
(out of the ISR). UNCLEAN (v1+, KIP-460) gives a leaderless partition a live replica:
ELECTION_NOT_NEEDED when it has a leader; since every online replica is in the ISR here, a leaderless
partition has no live replica, so the answer is then ELIGIBLE_LEADERS_NOT_AVAILABLE. A new leader
bumps the leader epoch, as Metadata then shows. Null topic_partitions elects for every partition and
leaves out those answered ELECTION_NOT_NEEDED; an unknown topic or partition is
UNKNOWN_TOPIC_OR_PARTITION with Kafka's message; an unknown election type fails the request with
INVALID_REQUEST. The top-level error code (v1+) is NONE.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.wire.cluster import ElectionNotNeeded, PartitionLeadership
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_fields
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.error_response import error_response
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.errors import UnknownTopicOrPartition

API_KEY = ApiKey.ELECT_LEADERS
VERSIONS = VersionRange(0, 2)

PREFERRED, UNCLEAN = 0, 1


async def handle(ctx: RequestContext, request: Any) -> Any:
    election_type = getattr(request, "election_type", PREFERRED)
    cluster = ctx.services.cluster
    elections: dict[int, Callable[[str, int], PartitionLeadership]] = {
        PREFERRED: cluster.elect_preferred, UNCLEAN: cluster.elect_unclean}
    elect = elections.get(election_type)
    if elect is None:
        # ElectLeadersRequest.getErrorResponse: the code at the top and on every partition asked about.
        return error_response(request, ErrorCode.invalid_request, f"Unknown election type {election_type}")
    if request.topic_partitions is None:
        logs = ctx.services.logs
        results = [_topic_result(ctx, elect, meta.name, range(meta.partitions), quiet=True)
                   for meta in sorted(logs.topics(), key=lambda m: m.name)]
    else:
        results = [_topic_result(ctx, elect, topic.topic, topic.partitions, quiet=False)
                   for topic in request.topic_partitions]
    return build(response_of(request), throttle_time=0, error_code=ErrorCode.none, replica_election_results=results)


def _topic_result(ctx: RequestContext, elect: Callable[[str, int], PartitionLeadership], topic: str,
                  partitions: Any, *, quiet: bool) -> dict[str, Any]:
    """One topic's results; `quiet` (every partition asked for at once) leaves out ELECTION_NOT_NEEDED."""
    results = []
    for partition in partitions:
        try:
            _check_exists(ctx, topic, partition)
            state = elect(topic, partition)
            ctx.log.info("leader elected", topic=topic, partition=partition, leader=state.leader,
                         leader_epoch=state.leader_epoch)
            results.append({"partition_id": partition, "error_code": ErrorCode.none, "error_message": None})
        except ElectionNotNeeded as exc:
            if not quiet:
                results.append({"partition_id": partition, **error_fields(ctx, exc)})
        except KafkaError as exc:
            results.append({"partition_id": partition, **error_fields(ctx, exc, topic=topic, partition=partition)})
    return {"topic": topic, "partition_result": results}


def _check_exists(ctx: RequestContext, topic: str, partition: int) -> None:
    meta = ctx.services.logs.topic(topic)
    if meta is None:
        raise UnknownTopicOrPartition(f"No such topic as {topic}")
    if not 0 <= partition < meta.partitions:
        raise UnknownTopicOrPartition(f"No such partition as {topic}-{partition}")

