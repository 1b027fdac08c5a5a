"""CreatePartitions: v0-3.

Behavior:
- Raises a topic's partition count to `count`; a count not above the current one is
  INVALID_PARTITIONS, an unknown topic UNKNOWN_TOPIC_OR_PARTITION. Assignments, when given, must
  list one entry per new partition. validate_only changes nothing.
"""

from __future__ import annotations

from typing import Any

from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.errors import InvalidPartitions, UnknownTopicOrPartition

from ..context import RequestContext
from .common import error_fields, response_of

API_KEY = ApiKey.CREATE_PARTITIONS
VERSIONS = VersionRange(0, 3)


def _grow(ctx: RequestContext, topic: Any, validate_only: bool) -> None:
    logs = ctx.services.logs
    meta = logs.topic(topic.name)
    if meta is None:
        raise UnknownTopicOrPartition(f"topic {topic.name} does not exist")
    if topic.assignments is not None and len(topic.assignments) != topic.count - meta.partitions:
        raise InvalidPartitions(
            f"{len(topic.assignments)} assignments for {topic.count - meta.partitions} new partitions")
    logs.create_partitions(topic.name, topic.count, validate_only=validate_only)
    if not validate_only:
        ctx.log.info("created partitions", topic=topic.name, count=topic.count)


async def handle(ctx: RequestContext, request: Any) -> Any:
    results = []
    seen: set[str] = set()
    for topic in request.topics:
        entry: dict[str, Any] = {"name": topic.name, "error_code": ErrorCode.none, "error_message": None}
        try:
            if topic.name in seen:
                raise KafkaError("topic listed twice", code=ErrorCode.invalid_request)
            seen.add(topic.name)
            _grow(ctx, topic, request.validate_only)
        except KafkaError as exc:
            entry.update(error_fields(exc))
        results.append(entry)
    return build(response_of(request), throttle_time=0, results=results)
