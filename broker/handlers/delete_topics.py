"""DeleteTopics: v1-6.

Behavior:
- Topics named by name, or by topic id at v6+. Unknown names are UNKNOWN_TOPIC_OR_PARTITION, unknown
  ids UNKNOWN_TOPIC_ID. delete.topic.enable=false gives TOPIC_DELETION_DISABLED.
Simplifications: internal topics (__consumer_offsets, __transaction_state) are refused with
INVALID_TOPIC_EXCEPTION, because deleting them would lose coordinator state.
"""

from __future__ import annotations

from typing import Any

from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import ZERO_UUID, build
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.errors import InvalidTopic, UnknownTopicOrPartition

from ..context import RequestContext
from ..errors import error_fields
from .common import response_of

API_KEY = ApiKey.DELETE_TOPICS
VERSIONS = VersionRange(1, 6)


def _targets(request: Any) -> list[tuple[str | None, Any]]:
    if hasattr(request, "topic_names"):
        return [(name, None) for name in request.topic_names]
    return [(t.name, t.topic_id) for t in request.topics]


def _delete(ctx: RequestContext, name: str | None, topic_id: Any) -> dict[str, Any]:
    logs = ctx.services.logs
    meta = logs.topic(name) if name is not None else logs.topic_by_id(topic_id)
    if meta is None:
        if name is None:
            raise KafkaError(f"unknown topic id {topic_id}", code=ErrorCode.unknown_topic_id)
        raise UnknownTopicOrPartition(f"topic {name} does not exist")
    if not ctx.services.config.delete_topic_enable:
        raise KafkaError("topic deletion is disabled", code=ErrorCode.topic_deletion_disabled)
    if meta.internal:
        raise InvalidTopic(f"internal topic {meta.name} cannot be deleted")
    logs.delete_topic(meta.name)
    ctx.log.info("deleted topic", topic=meta.name)
    return {"name": meta.name, "topic_id": meta.topic_id}


async def handle(ctx: RequestContext, request: Any) -> Any:
    results = []
    for name, topic_id in _targets(request):
        entry: dict[str, Any] = {"name": name, "topic_id": topic_id or ZERO_UUID, "error_code": ErrorCode.none}
        try:
            entry.update(_delete(ctx, name, topic_id))
        except Exception as exc:
            entry.update(error_fields(ctx, exc, topic=name))
        results.append(entry)
    return build(response_of(request), throttle_time=0, responses=results)
