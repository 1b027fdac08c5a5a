"""WriteTxnMarkers: v1.

Behavior: for each marker, writes a COMMIT or ABORT control batch to every listed partition led by
this node. A data partition closes the producer's open transaction there (an abort is recorded in
`.txnindex`); a `__consumer_offsets` partition also applies or drops the offsets the transaction
staged. The transaction coordinator writes its markers through the same writer
(coordinator/transaction/markers.py); this handler is the path of admin aborts of hanging
transactions (kafka-transactions.sh abort), as in Kafka.
Errors per partition: UNKNOWN_TOPIC_OR_PARTITION, PRODUCER_FENCED for an older epoch,
TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch.
Version notes: v2 (KIP-1228, which adds transaction_version) is not served, though kio reads it:
TV2 epoch rules are not implemented yet.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_code_for
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.WRITE_TXN_MARKERS
VERSIONS = VersionRange(1, 1)


def _write(ctx: RequestContext, marker: Any, topic: str, partition: int) -> None:
    ctx.services.transactions.markers.write(marker.producer_id, marker.producer_epoch, marker.coordinator_epoch,
                                            topic, partition, bool(marker.transaction_result))


async def handle(ctx: RequestContext, request: Any) -> Any:
    markers = []
    for marker in request.markers:
        topics = []
        for topic in marker.topics:
            partitions = []
            for index in topic.partition_indexes:
                code = ErrorCode.none
                try:
                    _write(ctx, marker, topic.name, index)
                except Exception as exc:
                    code = error_code_for(exc, ctx, topic=topic.name, partition=index)
                    ctx.log.info("marker rejected", topic=topic.name, partition=index, error=code.name)
                partitions.append({"partition_index": index, "error_code": code})
            topics.append({"name": topic.name, "partitions": partitions})
        markers.append({"producer_id": marker.producer_id, "topics": topics})
    return build(response_of(request), markers=markers)
