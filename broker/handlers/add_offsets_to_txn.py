"""AddOffsetsToTxn: v0-3.

Behavior: adds the group's `__consumer_offsets` partition to the producer's transaction, so the
COMMIT or ABORT marker reaches it and applies or drops the offsets TxnOffsetCommit staged there.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_code_for
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode, KafkaError

API_KEY = ApiKey.ADD_OFFSETS_TO_TXN
VERSIONS = VersionRange(0, 3)


async def handle(ctx: RequestContext, request: Any) -> Any:
    code = ErrorCode.none
    try:
        ctx.services.groups.topic.ensure()
        ctx.services.transactions.add_offsets(request.transactional_id, request.producer_id, request.producer_epoch,
                                              request.group_id, ctx.services.groups.topic.num_partitions)
    except KafkaError as exc:
        code = error_code_for(exc, ctx)
    return build(response_of(request), throttle_time=0, error_code=code)
