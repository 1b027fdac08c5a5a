"""DeleteShareGroupOffsets: v0 (KIP-932, Kafka 4.2).

Behavior (Kafka 4.2's GroupCoordinatorService.deleteShareGroupOffsets): deletes the share-partition
states of the given topics for an empty share group (tombstones in `__share_group_state`); the group
starts them again from `share.auto.offset.reset` when next assigned. A group with members is
NON_EMPTY_GROUP ("The group is not empty."), a classic or consumer group GROUP_ID_NOT_FOUND ("Group X is
not a share group."), an unknown group GROUP_ID_NOT_FOUND; per topic UNKNOWN_TOPIC_OR_PARTITION for a topic
that does not exist.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.handlers._shared.share import offsets_refusal
from minikafka.broker.wire.context import RequestContext
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.DELETE_SHARE_GROUP_OFFSETS
VERSIONS = VersionRange(0, 0)


def _answer(request: Any, code: ErrorCode, message: str | None, topics: list[dict[str, Any]]) -> Any:
    return build(response_of(request), throttle_time=0, error_code=code, error_message=message, responses=topics)


async def handle(ctx: RequestContext, request: Any) -> Any:
    shares = ctx.services.shares
    refusal = offsets_refusal(ctx, request.group_id)
    if refusal is not None:
        return _answer(request, *refusal, [])
    group = shares.group(request.group_id)
    if group is None:
        return _answer(request, ErrorCode.group_id_not_found, f"Group {request.group_id} not found.", [])
    if group.members:
        return _answer(request, ErrorCode.non_empty_group, "The group is not empty.", [])
    topics = []
    existing = set()
    for topic in request.topics:
        meta = ctx.services.logs.topic(topic.topic_name)
        if meta is None or meta.internal:
            topics.append({"topic_name": topic.topic_name, "topic_id": None,
                           "error_code": ErrorCode.unknown_topic_or_partition})
            continue
        existing.add(topic.topic_name)
        topics.append({"topic_name": topic.topic_name, "topic_id": meta.topic_id, "error_code": ErrorCode.none})
    shares.delete_offsets(request.group_id, existing)
    return _answer(request, ErrorCode.none, None, topics)
