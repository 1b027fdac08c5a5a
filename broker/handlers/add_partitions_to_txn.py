"""AddPartitionsToTxn: v0-3 (the client versions; v4+ are broker-to-coordinator only and not advertised).

Behavior: adds the partitions to the producer's transaction, moving it to Ongoing; the state is in
`__transaction_state` before the answer. Per-partition errors: UNKNOWN_TOPIC_OR_PARTITION for a
partition that does not exist (the others then get OPERATION_NOT_ATTEMPTED, as in Kafka), or the
transaction's error for all: INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS.
"""

from __future__ import annotations

from typing import Any

from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode, KafkaError

from ..context import RequestContext
from ..errors import error_code_for
from .common import response_of

API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
VERSIONS = VersionRange(0, 3)


async def handle(ctx: RequestContext, request: Any) -> Any:
    wanted = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    unknown = {tp for tp in wanted if ctx.services.logs.partition(*tp) is None}
    codes: dict[tuple[str, int], ErrorCode] = {}
    if unknown:
        codes = {tp: ErrorCode.unknown_topic_or_partition if tp in unknown else ErrorCode.operation_not_attempted
                 for tp in wanted}
    else:
        try:
            ctx.services.transactions.add_partitions(request.v3_and_below_transactional_id,
                                                     request.v3_and_below_producer_id,
                                                     request.v3_and_below_producer_epoch, wanted)
        except KafkaError as exc:
            codes = dict.fromkeys(wanted, error_code_for(exc, ctx))
    results = [
        {"name": topic.name, "results_by_partition": [
            {"partition_index": p, "partition_error_code": codes.get((topic.name, p), ErrorCode.none)}
            for p in topic.partitions]}
        for topic in request.v3_and_below_topics
    ]
    return build(response_of(request), throttle_time=0, results_by_topic_v3_and_below=results)
