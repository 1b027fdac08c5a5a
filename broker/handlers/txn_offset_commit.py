"""TxnOffsetCommit: v0-5.

Behavior: the offsets are written to the group's `__consumer_offsets` partition inside a
transactional batch of the producer and stay pending until its COMMIT marker (then they apply, if
newer than the committed value) or ABORT marker (then they are dropped). The group's partition
must already be in the transaction (AddOffsetsToTxn), else INVALID_TXN_STATE.
v3 (KIP-447) carries the consumer's generation, member id and group instance id: a stale generation
is ILLEGAL_GENERATION, an unknown member UNKNOWN_MEMBER_ID, a fenced static member
FENCED_INSTANCE_ID, so a zombie that lost its partitions in a rebalance cannot commit offsets.
v4 (KIP-890 part 1) changes nothing here. v5 with `transaction.version` 2 (KIP-890 part 2): the
client sends no AddOffsetsToTxn; the group's partition joins the transaction with this request
(Kafka's verification with AddPartitionsToTxn v5, which adds it), as a Produce v12 does.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.handlers._shared.transactions import client_transaction_version
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_code_for, outcome_code, translate
from minikafka.coordinator.group.coordinator import OffsetCommit
from minikafka.coordinator.internal_topics import OFFSETS_TOPIC
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode, KafkaError

API_KEY = ApiKey.TXN_OFFSET_COMMIT
VERSIONS = VersionRange(0, 5)



async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    commits = [
        OffsetCommit(topic.name, p.partition_index, p.committed_offset,
                     getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
        for topic in request.topics for p in topic.partitions
    ]
    results: dict[tuple[str, int], ErrorCode] = {}
    code = ErrorCode.none
    try:
        partition = services.groups.topic.partition_for(request.group_id)
        if client_transaction_version(ctx, request.__version__, 5) >= 2:
            services.groups.topic.ensure()
            services.transactions.add_partitions(request.transactional_id, request.producer_id,
                                                 request.producer_epoch, [(OFFSETS_TOPIC, partition)], 2)
        else:
            services.transactions.verify_partition(request.transactional_id, request.producer_id,
                                                   request.producer_epoch, OFFSETS_TOPIC, partition)
        outcomes = services.groups.commit_transactional_offsets(
            request.group_id, request.producer_id, request.producer_epoch, commits,
            generation_id=getattr(request, "generation_id", -1), member_id=getattr(request, "member_id", ""),
            group_instance_id=getattr(request, "group_instance_id", None))
        results = {tp: outcome_code(ctx, outcome) for tp, outcome in outcomes.items()}
    except KafkaError as exc:
        code = error_code_for(exc, ctx)
    topics = [{"name": t.name, "partitions": [
        {"partition_index": p.partition_index,
         "error_code": translate(ctx, results.get((t.name, p.partition_index), code))}
        for p in t.partitions]} for t in request.topics]
    return build(response_of(request), throttle_time=0, topics=topics)
