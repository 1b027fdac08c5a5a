"""Helpers of the ShareFetch and ShareAcknowledge handlers: topic ids, acknowledgements, entries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from minikafka.broker.handlers._shared.group import other_group_type, ownership_error
from minikafka.broker.wire.errors import error_code_for, error_message_for
from minikafka.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from minikafka.broker.wire.context import RequestContext

NO_LEADER = {"leader_id": -1, "leader_epoch": -1}


@dataclass(slots=True)
class PartitionEntry:
    """One partition of a ShareFetch/ShareAcknowledge answer, filled as the request is worked through."""

    topic_id: Any
    topic: str | None
    partition: int
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None
    ack_error_code: ErrorCode = ErrorCode.none
    ack_error_message: str | None = None
    records: bytes = b""
    acquired: tuple[Any, ...] = ()
    acknowledged: bool = False

    def shown(self) -> bool:
        return bool(self.acknowledged or self.acquired or self.error_code != ErrorCode.none)

    def fields(self) -> dict[str, Any]:
        return {"partition_index": self.partition, "error_code": self.error_code,
                "error_message": self.error_message, "acknowledge_error_code": self.ack_error_code,
                "acknowledge_error_message": self.ack_error_message, "current_leader": NO_LEADER,
                "records": self.records,
                "acquired_records": [{"first_offset": a.first_offset, "last_offset": a.last_offset,
                                      "delivery_count": a.delivery_count} for a in self.acquired]}


def topic_name(ctx: RequestContext, topic_id: Any) -> str | None:
    meta = ctx.services.logs.topic_by_id(topic_id)
    return meta.name if meta is not None and not meta.internal else None


def acknowledge(ctx: RequestContext, request: Any, entry: PartitionEntry, batches: Any, renew_allowed: bool) -> None:
    """Apply one partition's acknowledgement batches; the outcome goes in the entry's ack error."""
    entry.acknowledged = True
    if entry.topic is None:
        entry.ack_error_code = ErrorCode.unknown_topic_id
        return
    try:
        ctx.services.shares.acknowledge(
            request.group_id, request.member_id, entry.topic, entry.partition,
            [(b.first_offset, b.last_offset, [int(t) for t in b.acknowledge_types]) for b in batches],
            renew_allowed=renew_allowed)
    except Exception as exc:
        entry.ack_error_code = error_code_for(exc, ctx, topic=entry.topic, partition=entry.partition)
        entry.ack_error_message = error_message_for(exc)


def grouped(entries: list[PartitionEntry], *, only_shown: bool) -> list[dict[str, Any]]:
    by_topic: dict[Any, list[dict[str, Any]]] = {}
    for entry in entries:
        if only_shown and not entry.shown():
            continue
        by_topic.setdefault(entry.topic_id, []).append(entry.fields())
    return [{"topic_id": topic_id, "partitions": partitions} for topic_id, partitions in by_topic.items()]


def request_error(ctx: RequestContext, request: Any) -> tuple[ErrorCode, str] | None:
    """What both APIs refuse before touching a session."""
    if not request.group_id:
        return ErrorCode.invalid_request, "GroupId must be set."
    if not request.member_id:
        return ErrorCode.invalid_request, "MemberId must be set."
    if not ctx.services.shares.loaded:
        return ErrorCode.coordinator_load_in_progress, "the share coordinator is loading"
    return None


def offsets_refusal(ctx: RequestContext, group_id: str) -> tuple[ErrorCode, str | None] | None:
    """Alter/DeleteShareGroupOffsets: a group another node coordinates, or a group of another type, refused
    whole before its topics are looked at."""
    error = ownership_error(ctx, group_id)
    if error is not None:
        return error, None
    if other_group_type(ctx, group_id):
        return ErrorCode.group_id_not_found, f"Group {group_id} is not a share group."
    return None
