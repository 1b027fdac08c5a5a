"""OffsetCommit: v2-9.

Behavior:
- generation -1 with an empty member id on an Empty or unknown group is a simple commit (an
  unmanaged consumer, e.g. assign() + commit); otherwise the member and generation must match:
  UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS (CompletingRebalance),
  FENCED_INSTANCE_ID (v7+ static members), checked in the order of Kafka 4's
  ClassicGroup.validateOffsetCommit: member, then generation, then state, so an older generation
  during CompletingRebalance is ILLEGAL_GENERATION. Commits during PreparingRebalance with the
  current generation are accepted, as in Kafka. A generation for a group that does not exist is
  ILLEGAL_GENERATION, GROUP_ID_NOT_FOUND from v9 (as Kafka 4).
- A KIP-848 consumer group checks the member id and member epoch (Kafka's
  ConsumerGroup.validateOffsetCommit): -1 with no members is a simple commit; an unknown member is
  UNKNOWN_MEMBER_ID, another epoch STALE_MEMBER_EPOCH, and a consumer member committing below v9
  UNSUPPORTED_VERSION.
- A partition of an unknown topic is UNKNOWN_TOPIC_OR_PARTITION; metadata over 4096 bytes is
  OFFSET_METADATA_TOO_LARGE. The rest are written as one batch of OffsetCommitKey v1 / Value v3
  records to the group's `__consumer_offsets` partition.
Version notes: v2-4 carry retention_time (-1: broker default); a set retention writes a v1 value
with an expire timestamp, as Kafka did. v6 adds committed_leader_epoch, v7 group.instance.id.
v10 (topics by id only) is not served: Kafka 4.1 keeps it unstable (advertised only with
unstable.api.versions.enable) and advertises up to v9; it became stable in 4.2.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.handlers._shared.group import coordinator, ownership_error
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import outcome_code
from minikafka.coordinator.errors import GroupError, PartitionOutcomes
from minikafka.coordinator.group import OffsetCommit
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build, ms
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.OFFSET_COMMIT
VERSIONS = VersionRange(2, 9)


def _response(request: Any, errors: dict[tuple[str, int], ErrorCode]) -> Any:
    topics = [
        {
            "name": topic.name,
            "partitions": [
                {"partition_index": p.partition_index, "error_code": errors[(topic.name, p.partition_index)]}
                for p in topic.partitions
            ],
        }
        for topic in request.topics
    ]
    return build(response_of(request), throttle_time=0, topics=topics)


async def handle(ctx: RequestContext, request: Any) -> Any:
    everything = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    error = ownership_error(ctx, request.group_id)
    if error is not None:
        return _response(request, dict.fromkeys(everything, error))
    retention = ms(getattr(request, "retention_time", None))
    expire = ctx.services.clock.now_ms() + retention if retention >= 0 else -1
    errors: dict[tuple[str, int], ErrorCode] = {}
    commits = []
    for topic in request.topics:
        for p in topic.partitions:
            if ctx.services.logs.partition(topic.name, p.partition_index) is None:
                errors[(topic.name, p.partition_index)] = ErrorCode.unknown_topic_or_partition
                continue
            commits.append(
                OffsetCommit(
                    topic.name,
                    p.partition_index,
                    p.committed_offset,
                    getattr(p, "committed_leader_epoch", -1),
                    p.committed_metadata,
                    expire,
                )
            )
    if commits:
        outcomes: PartitionOutcomes
        try:
            outcomes = coordinator(ctx).commit_offsets(
                group_id=request.group_id,
                generation_id=request.generation_id_or_member_epoch,
                member_id=request.member_id,
                group_instance_id=getattr(request, "group_instance_id", None),
                commits=commits,
                api_version=request.__version__,
            )
        except GroupError as exc:
            outcomes = {(c.topic, c.partition): exc for c in commits}
        errors.update({tp: outcome_code(ctx, outcome) for tp, outcome in outcomes.items()})
    return _response(request, errors)
