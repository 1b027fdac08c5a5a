"""AlterShareGroupOffsets: v0 (KIP-932, Kafka 4.2).

Behavior (Kafka 4.2's GroupCoordinatorService.alterShareGroupOffsets): sets the share-partition start
offset of the given partitions of an empty share group, or of a group that does not exist yet (it is
created empty); what was in flight is dropped and a ShareSnapshot is written to `__share_group_state`.
A group with members is NON_EMPTY_GROUP ("The group is not empty."), a classic or consumer group
GROUP_ID_NOT_FOUND ("Group X is not a share group."). Per partition: UNKNOWN_TOPIC_OR_PARTITION for a
topic or partition that does not exist.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.handlers._shared.share import offsets_refusal
from minikafka.broker.wire.context import RequestContext
from minikafka.coordinator.share.group import ShareGroup
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.ALTER_SHARE_GROUP_OFFSETS
VERSIONS = VersionRange(0, 0)


def _answer(request: Any, code: ErrorCode, message: str | None, topics: list[dict[str, Any]]) -> Any:
    return build(response_of(request), throttle_time=0, error_code=code, error_message=message, responses=topics)


async def handle(ctx: RequestContext, request: Any) -> Any:
    shares = ctx.services.shares
    refusal = offsets_refusal(ctx, request.group_id)
    if refusal is not None:
        return _answer(request, *refusal, [])
    group = shares.group(request.group_id)
    if group is not None and group.members:
        return _answer(request, ErrorCode.non_empty_group, "The group is not empty.", [])
    shares.groups.setdefault(request.group_id, ShareGroup(request.group_id))
    topics = []
    for topic in request.topics:
        meta = ctx.services.logs.topic(topic.topic_name)
        parts = []
        for part in topic.partitions:
            code = ErrorCode.none
            if meta is None or meta.internal or not 0 <= part.partition_index < meta.partitions:
                code = ErrorCode.unknown_topic_or_partition
            else:
                shares.alter_offset(request.group_id, topic.topic_name, part.partition_index, part.start_offset)
            parts.append({"partition_index": part.partition_index, "error_code": code})
        topics.append({"topic_name": topic.topic_name, "topic_id": meta.topic_id if meta else None,
                       "partitions": parts})
    return _answer(request, ErrorCode.none, None, topics)
