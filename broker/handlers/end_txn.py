"""EndTxn: v0-5.

Behavior: Ongoing -> PrepareCommit/PrepareAbort is written to `__transaction_state` and answered;
the markers and CompleteCommit/CompleteAbort follow right after on the event loop. A retry of an
already completed transaction with the same result succeeds; while markers are pending the answer
is CONCURRENT_TRANSACTIONS; no open transaction is INVALID_TXN_STATE; an older epoch PRODUCER_FENCED.
Version notes: v4 (KIP-890 part 1) lets the broker answer TRANSACTION_ABORTABLE, which this broker
has no case for. v5 is transaction version 2 when `transaction.version` is 2 (Kafka's
TransactionVersion.transactionVersionForEndTxn): the epoch bumps at every commit or abort (so the
markers fence the ended transaction's epoch), an abort needs no partition, a retry carries the
epoch before the bump, and the response returns the producer id and the new epoch. With
`transaction.version` below 2, v5 ends the transaction as v4 does and returns no id (-1, -1).
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.handlers._shared.transactions import client_transaction_version
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_code_for
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

API_KEY = ApiKey.END_TXN
VERSIONS = VersionRange(0, 5)


async def handle(ctx: RequestContext, request: Any) -> Any:
    code = ErrorCode.none
    producer_id, epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
    try:
        producer_id, epoch = ctx.services.transactions.end_transaction(
            request.transactional_id, request.producer_id, request.producer_epoch, bool(request.committed),
            client_transaction_version(ctx, request.__version__, 5))
    except KafkaError as exc:
        code = error_code_for(exc, ctx)
        ctx.log.info("end transaction refused", transactional_id=request.transactional_id, error=code.name)
    fields: dict[str, Any] = {"throttle_time": 0, "error_code": code}
    if request.__version__ >= 5:
        fields.update(producer_id=producer_id, producer_epoch=epoch)
    return build(response_of(request), **fields)
