"""OffsetDelete: v0 (KIP-496).

Behavior: deletes committed offsets of a group (tombstones). Unknown group: GROUP_ID_NOT_FOUND.
While a consumer group has members, partitions of topics its members subscribe to are
GROUP_SUBSCRIBED_TO_TOPIC, the others are deleted, and the top-level error stays NONE (Kafka 4's
OffsetMetadataManager.deleteOffsets); a non-empty group of another protocol type is NON_EMPTY_GROUP
at the top level. Unknown topics are UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.handlers._shared.group import coordinator, ownership_error
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_code_for, outcome_code
from minikafka.coordinator.errors import GroupError
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.OFFSET_DELETE
VERSIONS = VersionRange(0, 0)


async def handle(ctx: RequestContext, request: Any) -> Any:
    error = ownership_error(ctx, request.group_id)
    wanted = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    results: dict[tuple[str, int], ErrorCode] = {}
    if error is None:
        known = [tp for tp in wanted if ctx.services.logs.partition(*tp) is not None]
        results = dict.fromkeys(wanted, ErrorCode.unknown_topic_or_partition)
        try:
            deleted = coordinator(ctx).delete_offsets(request.group_id, known)
        except GroupError as exc:
            error = error_code_for(exc, ctx)
        else:
            error = ErrorCode.none
            results.update({tp: outcome_code(ctx, outcome) for tp, outcome in deleted.items()})
    if error is not ErrorCode.none:
        return build(response_of(request), throttle_time=0, error_code=error)
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, partition in wanted:
        topics.setdefault(topic, []).append(
            {"partition_index": partition, "error_code": results[(topic, partition)]}
        )
    return build(
        response_of(request),
        throttle_time=0,
        error_code=error,
        topics=[{"name": name, "partitions": parts} for name, parts in topics.items()],
    )
