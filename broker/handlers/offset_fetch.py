"""OffsetFetch: v1-9.

Behavior:
- Committed offset, leader epoch and metadata per partition; a partition without a commit is
  offset -1 with no error. A null topic list (v2+) means every partition the group committed.
- require_stable (v7+, KIP-447): a partition with a pending transactional commit is
  UNSTABLE_OFFSET_COMMIT.
- v9 (KIP-848) adds each group's member_id and member_epoch. Only a consumer-protocol group checks
  them (Kafka's ConsumerGroup.validateOffsetFetch: UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH as the
  group's error); a classic group ignores them (ClassicGroup.validateOffsetFetch only refuses a Dead
  group).
Version notes: v2+ has a top-level error code; v5 adds committed_leader_epoch; v8 batches groups.
v10 (topics by id) is not served: Kafka 4.1 keeps it unstable (advertised only with
unstable.api.versions.enable) and advertises up to v9; it became stable in 4.2.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.handlers._shared.group import coordinator, ownership_error
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_code_for
from minikafka.coordinator.errors import GroupError
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.OFFSET_FETCH
VERSIONS = VersionRange(1, 9)


def _group(
    ctx: RequestContext, group_id: str, topics: Any, require_stable: bool, names: str,
    member: tuple[str | None, int] = (None, -1),
) -> dict[str, Any]:
    """One group's answer; `names` is the partition-list field of the request's topics, `member` the
    (member id, member epoch) of v9."""
    error = ownership_error(ctx, group_id)
    if error is None:
        try:
            coordinator(ctx).validate_offset_fetch(group_id, *member)
        except GroupError as exc:
            error = error_code_for(exc, ctx)
    wanted = None if topics is None else [(t.name, p) for t in topics for p in getattr(t, names)]
    fetched = {} if error is not None else coordinator(ctx).fetch_offsets(group_id, wanted, require_stable)
    order: dict[str, list[dict[str, Any]]] = {}
    for tp in wanted if wanted is not None else list(fetched):
        result = fetched.get(tp)
        order.setdefault(tp[0], []).append(
            {
                "partition_index": tp[1],
                "committed_offset": result.offset if result else -1,
                "committed_leader_epoch": result.leader_epoch if result else -1,
                "metadata": result.metadata if result else "",
                "error_code": result.error if result else (error or ErrorCode.none),
            }
        )
    return {
        "group_id": group_id,
        "error_code": error or ErrorCode.none,
        "topics": [{"name": name, "partitions": parts} for name, parts in order.items()],
    }


async def handle(ctx: RequestContext, request: Any) -> Any:
    require_stable = getattr(request, "require_stable", False)
    if request.__version__ >= 8:
        groups = [
            _group(ctx, g.group_id, g.topics, require_stable, "partition_indexes",
                   (getattr(g, "member_id", None), getattr(g, "member_epoch", -1)))
            for g in request.groups
        ]
        return build(response_of(request), throttle_time=0, groups=groups)
    answer = _group(ctx, request.group_id, request.topics, require_stable, "partition_indexes")
    return build(
        response_of(request), throttle_time=0, topics=answer["topics"], error_code=answer["error_code"]
    )
