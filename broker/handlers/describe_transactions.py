"""DescribeTransactions (KIP-664): v0.

Behavior: state name (Kafka's: "Ongoing", "CompleteCommit", ...), timeout, start time, producer
id/epoch and partitions of each transactional id; unknown ids get TRANSACTIONAL_ID_NOT_FOUND.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_code_for
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.DESCRIBE_TRANSACTIONS
VERSIONS = VersionRange(0, 0)


def _describe(ctx: RequestContext, transactional_id: str) -> dict[str, Any]:
    meta = ctx.services.transactions.describe(transactional_id)
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in sorted(meta.topic_partitions):
        by_topic[topic].append(partition)
    return {
        "transaction_state": meta.state.display_name,
        "transaction_timeout": meta.txn_timeout_ms,
        "transaction_start_time": max(meta.txn_start_timestamp, -1),
        "producer_id": meta.producer_id,
        "producer_epoch": meta.producer_epoch,
        "topics": [{"topic": topic, "partitions": ids} for topic, ids in by_topic.items()],
    }


async def handle(ctx: RequestContext, request: Any) -> Any:
    states = []
    for transactional_id in request.transactional_ids:
        entry: dict[str, Any] = {"transactional_id": transactional_id, "error_code": ErrorCode.none,
                                 "transaction_state": "", "transaction_start_time": -1, "producer_id": -1,
                                 "producer_epoch": -1}
        try:
            entry.update(_describe(ctx, transactional_id))
        except Exception as exc:
            entry["error_code"] = error_code_for(exc, ctx, transactional_id=transactional_id)
        states.append(entry)
    return build(response_of(request), throttle_time=0, transaction_states=states)
