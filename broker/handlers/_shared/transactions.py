"""What the transactional APIs (Produce, AddPartitionsToTxn, TxnOffsetCommit, EndTxn) share."""

from __future__ import annotations

from minikafka.broker.wire.context import RequestContext


def client_transaction_version(ctx: RequestContext, request_version: int, first_tv2_version: int) -> int:
    """2 when the request's version is a transaction version 2 one and the broker enabled it, else 0."""
    enabled = ctx.services.config.transaction_version >= 2  # every Produce asks: builds no coordinator
    return 2 if enabled and request_version >= first_tv2_version else 0
