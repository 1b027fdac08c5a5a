"""InitProducerId: v0-5.

Behavior:
- Without a transactional id (idempotent producers): a new producer id from the persisted id
  blocks, epoch 0. As in Kafka, a producer id/epoch given by the client (KIP-360, v3+) does not
  keep the old id for idempotent producers; giving only one of the two is INVALID_REQUEST.
- With a transactional id: the transaction coordinator allocates or reuses the id and bumps the
  epoch (fencing older instances); an open transaction of a previous instance is aborted first
  (CONCURRENT_TRANSACTIONS until done; clients retry); a timeout above transaction.max.timeout.ms is
  INVALID_TRANSACTION_TIMEOUT.
- KIP-360 (v3+): a transactional producer recovering from an abortable error gives its producer id
  and epoch. The current epoch bumps; the previous one (a retry whose answer was lost) gets the
  current epoch again; any other epoch, or a producer id that is neither the current one nor the
  previous one at an exhausted epoch, is PRODUCER_FENCED (INVALID_PRODUCER_EPOCH below v4).
- With `transaction.version` 2, the abort of a previous instance's open transaction is a
  transaction version 2 abort (Kafka uses the broker's level here): its epoch bumps once more.
Version notes: v6 (KIP-939 two-phase commit: enable2_pc, keep_prepared_txn) is not built; Kafka
4.1 does not advertise it either (the 4.1 profile's 0-5), so a non-2PC client uses v5 there.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_code_for
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build, ms
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

API_KEY = ApiKey.INIT_PRODUCER_ID
VERSIONS = VersionRange(0, 5)


async def handle(ctx: RequestContext, request: Any) -> Any:
    response = response_of(request)
    given_id = getattr(request, "producer_id", NO_PRODUCER_ID)
    given_epoch = getattr(request, "producer_epoch", NO_PRODUCER_EPOCH)
    if (given_id == NO_PRODUCER_ID) != (given_epoch == NO_PRODUCER_EPOCH):
        return build(response, error_code=ErrorCode.invalid_request, producer_id=-1, producer_epoch=-1)
    try:
        if request.transactional_id is not None:
            producer_id, epoch = ctx.services.transactions.init_producer_id(
                request.transactional_id, ms(request.transaction_timeout), given_id, given_epoch)
            ctx.log.info("transactional producer initialised", transactional_id=request.transactional_id,
                         producer_id=producer_id, producer_epoch=epoch)
        else:
            # A block of ids that cannot be persisted (full disk) refuses with a retriable code here too.
            producer_id, epoch = ctx.services.producer_ids.allocate(), 0
            ctx.log.info("allocated producer id", producer_id=producer_id)
    except KafkaError as exc:
        code = error_code_for(exc, ctx)
        ctx.log.info("request failed", error=code.name, reason=str(exc))
        return build(response, error_code=code, producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH)
    return build(response, error_code=ErrorCode.none, producer_id=producer_id, producer_epoch=epoch)
