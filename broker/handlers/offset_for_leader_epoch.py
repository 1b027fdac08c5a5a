"""OffsetForLeaderEpoch: v2-4.

Behavior: a single node has one leader epoch per partition (0), starting at the log start, so
the end offset of any requested epoch <= the current one is the log end offset; a requested epoch
above it gives UNDEFINED epoch/offset (-1/-1). A current_leader_epoch newer than ours is
UNKNOWN_LEADER_EPOCH, an older one FENCED_LEADER_EPOCH (KIP-320).
"""

from __future__ import annotations

from typing import Any

from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode, KafkaError

from ..context import RequestContext
from ..errors import error_code_for
from .common import partition_log, response_of

API_KEY = ApiKey.OFFSET_FOR_LEADER_EPOCH
VERSIONS = VersionRange(2, 4)


def _end_offset(ctx: RequestContext, topic: str, part: Any) -> dict[str, Any]:
    log = partition_log(ctx, topic, part.partition)
    current = part.current_leader_epoch
    if current >= 0 and current > log.leader_epoch:
        raise KafkaError("leader epoch is newer than ours", code=ErrorCode.unknown_leader_epoch)
    if current >= 0 and current < log.leader_epoch:
        raise KafkaError("leader epoch is fenced", code=ErrorCode.fenced_leader_epoch)
    if part.leader_epoch > log.leader_epoch:
        return {"leader_epoch": -1, "end_offset": -1}
    return {"leader_epoch": log.leader_epoch, "end_offset": log.log_end_offset}


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
