"""AddPartitionsToTxn: v0-5.

Behavior (v0-3, the client versions): adds the partitions to the producer's transaction, moving it
to Ongoing; the state is in `__transaction_state` before the answer. Per-partition errors:
UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist (the others then get
OPERATION_NOT_ATTEMPTED, as in Kafka), or the transaction's error for all:
INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS.
v4-5 (KIP-890, the broker-to-coordinator format that Kafka's partition leaders batch): a list of
transactions, each answered on its own under its transactional id. `verify_only` checks the
partitions without writing (Kafka's handleVerifyPartitionsInTransaction): a partition outside the
transaction is TRANSACTION_ABORTABLE, a pending Prepare* CONCURRENT_TRANSACTIONS, another epoch
PRODUCER_FENCED. Without `verify_only` the partitions are added and, with `transaction.version` 2,
the transaction becomes a version 2 one (Kafka's transactionVersionForAddPartitionsToTxn: v4+ is
TV_2; a Produce v12 adds this way). No authorizer here, so Kafka's CLUSTER_ACTION check for v4+
always passes.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.handlers._shared.transactions import client_transaction_version
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_code_for, outcome_code, translate
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode, KafkaError

API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
VERSIONS = VersionRange(0, 5)

TopicPartition = tuple[str, int]


def _add(ctx: RequestContext, transactional_id: str, producer_id: int, producer_epoch: int,
         wanted: list[TopicPartition], version: int) -> dict[TopicPartition, ErrorCode]:
    unknown = {tp for tp in wanted if ctx.services.logs.partition(*tp) is None}
    if unknown:
        return {tp: ErrorCode.unknown_topic_or_partition if tp in unknown else ErrorCode.operation_not_attempted
                for tp in wanted}
    try:
        ctx.services.transactions.add_partitions(transactional_id, producer_id, producer_epoch, wanted, version)
    except KafkaError as exc:
        return dict.fromkeys(wanted, error_code_for(exc, ctx))
    return {}


def _verify(ctx: RequestContext, transactional_id: str, producer_id: int, producer_epoch: int,
            wanted: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
    try:
        outcomes = ctx.services.transactions.verify_partitions(transactional_id, producer_id, producer_epoch, wanted)
    except KafkaError as exc:
        return dict.fromkeys(wanted, error_code_for(exc, ctx))
    return {tp: outcome_code(ctx, outcome) for tp, outcome in outcomes.items()}


def _topic_results(topics: Any, codes: dict[TopicPartition, ErrorCode], ctx: RequestContext) -> list[dict[str, Any]]:
    return [
        {"name": topic.name, "results_by_partition": [
            {"partition_index": p,
             "partition_error_code": translate(ctx, codes.get((topic.name, p), ErrorCode.none))}
            for p in topic.partitions]}
        for topic in topics
    ]


async def handle(ctx: RequestContext, request: Any) -> Any:
    if request.__version__ <= 3:
        wanted = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
        codes = _add(ctx, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                     request.v3_and_below_producer_epoch, wanted, 0)
        return build(response_of(request), throttle_time=0,
                     results_by_topic_v3_and_below=_topic_results(request.v3_and_below_topics, codes, ctx))
    version = client_transaction_version(ctx, request.__version__, 4)
    results = []
    for txn in request.transactions:
        wanted = [(t.name, p) for t in txn.topics for p in t.partitions]
        if txn.verify_only:
            codes = _verify(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted)
        else:
            codes = _add(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted, version)
        results.append({"transactional_id": txn.transactional_id,
                        "topic_results": _topic_results(txn.topics, codes, ctx)})
    return build(response_of(request), throttle_time=0, error_code=ErrorCode.none, results_by_transaction=results)
