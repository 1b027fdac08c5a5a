"""ShareAcknowledge: v1-2 (KIP-932; v2 adds KIP-1222's RENEW and IsRenewAck, Kafka 4.2).

Behavior (Kafka 4.2's KafkaApis.handleShareAcknowledgeRequest): acknowledges records the member
acquired (ACCEPT, RELEASE, REJECT, GAP, and RENEW from v2 with IsRenewAck, which renews their
acquisition locks) within its share session: epoch 0 cannot open a session
(INVALID_SHARE_SESSION_EPOCH), an unknown session is SHARE_SESSION_NOT_FOUND, a wrong epoch
INVALID_SHARE_SESSION_EPOCH, and -1 closes the session after the acknowledgements, releasing what the
member still holds. Per partition: INVALID_RECORD_STATE for offsets the member does not hold (that
batch changes nothing), UNKNOWN_TOPIC_ID for a topic id this broker does not know.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.handlers._shared.share import NO_LEADER, PartitionEntry, acknowledge, request_error, topic_name
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_code_for, error_message_for
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.SHARE_ACKNOWLEDGE
VERSIONS = VersionRange(1, 2)
FINAL_EPOCH = -1


def _answer(request: Any, code: ErrorCode, message: str | None, lock_ms: int, entries: list[PartitionEntry]) -> Any:
    by_topic: dict[Any, list[dict[str, Any]]] = {}
    for entry in entries:
        code_of = entry.error_code if entry.error_code != ErrorCode.none else entry.ack_error_code
        message_of = entry.error_message if entry.error_code != ErrorCode.none else entry.ack_error_message
        by_topic.setdefault(entry.topic_id, []).append({
            "partition_index": entry.partition, "error_code": code_of, "error_message": message_of,
            "current_leader": NO_LEADER})
    return build(response_of(request), throttle_time=0, error_code=code, error_message=message,
                 acquisition_lock_timeout=lock_ms,
                 responses=[{"topic_id": t, "partitions": p} for t, p in by_topic.items()], node_endpoints=[])


async def handle(ctx: RequestContext, request: Any) -> Any:
    shares = ctx.services.shares
    refused = request_error(ctx, request)
    if refused is not None:
        return _answer(request, refused[0], refused[1], 0, [])
    lock_ms = shares.lock_duration_ms(request.group_id)
    try:
        shares.check_session(request.group_id, request.member_id, request.share_session_epoch)
    except Exception as exc:
        return _answer(request, error_code_for(exc, ctx), error_message_for(exc), lock_ms, [])
    renew = bool(getattr(request, "is_renew_ack", False))
    entries = []
    for topic in request.topics:
        name = topic_name(ctx, topic.topic_id)
        for part in topic.partitions:
            entry = PartitionEntry(topic.topic_id, name, part.partition_index)
            acknowledge(ctx, request, entry, part.acknowledgement_batches, renew)
            entries.append(entry)
    if request.share_session_epoch == FINAL_EPOCH:
        shares.close_session(request.group_id, request.member_id)
    return _answer(request, ErrorCode.none, None, lock_ms, entries)
