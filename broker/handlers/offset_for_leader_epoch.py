"""OffsetForLeaderEpoch: v2-4.

Behavior: answered from the partition's leader epoch history (storage/epochs.py, Kafka's
LeaderEpochFileCache.endOffsetFor): the current epoch ends at the log end offset, an older one where
the next epoch started, a newer or unknown one is UNDEFINED epoch/offset (-1/-1). Epochs start when
leadership moves between nodes (broker/wire/cluster.py); a partition led by another node is
NOT_LEADER_OR_FOLLOWER. A current_leader_epoch newer than ours is
UNKNOWN_LEADER_EPOCH, an older one FENCED_LEADER_EPOCH (KIP-320).
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import partition_log, response_of
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_code_for
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode, KafkaError

API_KEY = ApiKey.OFFSET_FOR_LEADER_EPOCH
VERSIONS = VersionRange(2, 4)


def _end_offset(ctx: RequestContext, topic: str, part: Any) -> dict[str, Any]:
    log = partition_log(ctx, topic, part.partition)
    current = part.current_leader_epoch
    if current >= 0 and current > log.leader_epoch:
        raise KafkaError("leader epoch is newer than ours", code=ErrorCode.unknown_leader_epoch)
    if current >= 0 and current < log.leader_epoch:
        raise KafkaError("leader epoch is fenced", code=ErrorCode.fenced_leader_epoch)
    epoch, end_offset = log.epochs.end_offset_for(part.leader_epoch, log.log_end_offset)
    return {"leader_epoch": epoch, "end_offset": end_offset}


async def handle(ctx: RequestContext, request: Any) -> Any:
    topics = []
    for topic in request.topics:
        partitions = []
        for part in topic.partitions:
            entry: dict[str, Any] = {"partition": part.partition, "error_code": ErrorCode.none}
            try:
                entry.update(_end_offset(ctx, topic.topic, part))
            except Exception as exc:
                entry.update(error_code=error_code_for(exc, ctx, topic=topic.topic, partition=part.partition),
                             leader_epoch=-1, end_offset=-1)
            partitions.append(entry)
        topics.append({"topic": topic.topic, "partitions": partitions})
    return build(response_of(request), throttle_time=0, topics=topics)
