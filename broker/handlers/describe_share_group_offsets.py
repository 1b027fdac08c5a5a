"""DescribeShareGroupOffsets: v0-1 (KIP-932; v1 adds the lag, KIP-1226, Kafka 4.2).

Behavior: for each group, the share-partition start offset (SPSO) of the asked partitions (all the
group's share-partitions when `topics` is null), their leader epoch (0: one leader, never moved by a
share coordinator here) and, from v1, the lag: records from the SPSO to the high watermark whose
delivery is not complete. A partition the group has no state for answers start offset -1. An unknown
group is GROUP_ID_NOT_FOUND; another node's group NOT_COORDINATOR.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.handlers._shared.group import other_group_type, ownership_error
from minikafka.broker.wire.context import RequestContext
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS
VERSIONS = VersionRange(0, 1)


def _partition(index: int, start: int, lag: int) -> dict[str, Any]:
    return {"partition_index": index, "start_offset": start, "leader_epoch": 0 if start >= 0 else -1, "lag": lag,
            "error_code": ErrorCode.none}


def _group(ctx: RequestContext, entry: Any) -> dict[str, Any]:
    shares = ctx.services.shares
    error = ownership_error(ctx, entry.group_id)
    if error is not None:
        return {"group_id": entry.group_id, "topics": [], "error_code": error}
    if not shares.is_share_group(entry.group_id):
        message = (f"Group {entry.group_id} is not a share group." if other_group_type(ctx, entry.group_id)
                   else f"Group {entry.group_id} not found.")
        return {"group_id": entry.group_id, "topics": [], "error_code": ErrorCode.group_id_not_found,
                "error_message": message}
    views = {(v.topic, v.partition): v for v in shares.views(entry.group_id)}
    if entry.topics is None:
        asked: dict[str, list[int]] = {}
        for topic, partition in sorted(views):
            asked.setdefault(topic, []).append(partition)
    else:
        asked = {t.topic_name: list(t.partitions) for t in entry.topics}
    topics = []
    for topic, partitions in asked.items():
        parts = []
        for partition in partitions:
            view = views.get((topic, partition))
            parts.append(_partition(partition, view.start_offset, view.lag) if view else _partition(partition, -1, -1))
        topics.append({"topic_name": topic, "topic_id": shares.topic_id(topic), "partitions": parts})
    return {"group_id": entry.group_id, "topics": topics, "error_code": ErrorCode.none}


async def handle(ctx: RequestContext, request: Any) -> Any:
    return build(response_of(request), throttle_time=0, groups=[_group(ctx, g) for g in request.groups])
