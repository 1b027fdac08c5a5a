"""EndTxn: v0-3.

Behavior: Ongoing -> PrepareCommit/PrepareAbort is written to `__transaction_state` and answered;
the markers and CompleteCommit/CompleteAbort follow right after on the event loop. A retry of an
already completed transaction with the same result succeeds; while markers are pending the answer
is CONCURRENT_TRANSACTIONS; no open transaction is INVALID_TXN_STATE; an older epoch PRODUCER_FENCED.
Version notes: v4 (TRANSACTION_ABORTABLE) and v5 (KIP-890 epoch bump) are not advertised.
"""

from __future__ import annotations

from typing import Any

from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode, KafkaError

from ..context import RequestContext
from ..errors import error_code_for
from .common import response_of

API_KEY = ApiKey.END_TXN
VERSIONS = VersionRange(0, 3)


async def handle(ctx: RequestContext, request: Any) -> Any:
    code = ErrorCode.none
    try:
        ctx.services.transactions.end_transaction(request.transactional_id, request.producer_id,
                                                  request.producer_epoch, bool(request.committed))
    except KafkaError as exc:
        code = error_code_for(exc, ctx)
        ctx.log.info("end transaction refused", transactional_id=request.transactional_id, error=code.name)
    return build(response_of(request), throttle_time=0, error_code=code)
