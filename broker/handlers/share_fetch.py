"""ShareFetch: v1-2 (KIP-932; v2 adds KIP-1222's RENEW and IsRenewAck, Kafka 4.2).

Behavior (Kafka 4.2's KafkaApis.handleShareFetchRequest and SharePartitionManager):
- Share sessions: epoch 0 opens one for the member with the request's partitions (acknowledgements
  there are INVALID_REQUEST), each later request carries the session's next epoch and adds
  partitions or forgets them (`forgotten_topics_data`); -1 closes it after applying its
  acknowledgements, releasing what the member still holds. An unknown session is
  SHARE_SESSION_NOT_FOUND, a wrong epoch INVALID_SHARE_SESSION_EPOCH.
- Acknowledgements piggybacked per partition (ACCEPT, RELEASE, REJECT, GAP; RENEW from v2 with
  IsRenewAck, which fetches nothing) are applied first; their outcome is the partition's
  acknowledge_error_code (INVALID_RECORD_STATE for an offset the member does not hold).
- Then records are acquired for the member from every partition of the session, up to max_records
  in all: the answer has the whole batches holding them and the AcquiredRecords ranges with their
  delivery counts; AcquisitionLockTimeoutMs is the group's lock duration. Records are AVAILABLE ones
  first (released, expired), then new ones up to the high watermark (the last stable offset under
  `share.isolation.level=read_committed`, where aborted transactions' records and control records
  are archived, never delivered), bounded by `group.share.partition.max.record.locks` in flight.
- Long poll: answers when records were acquired or after max_wait (real time, as Fetch), woken by
  appends and by records released to the partitions it reads.
- Only partitions with records, an error or acknowledgements appear in the answer (Kafka's
  incremental answer). Topics are by id; an unknown id is UNKNOWN_TOPIC_ID.
Deviations: ShareAcquireMode (v2's record_limit mode) is read as batch_optimized: max_records bounds
records, not batches.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import partition_log, response_of
from minikafka.broker.handlers._shared.share import (
    PartitionEntry,
    acknowledge,
    grouped,
    request_error,
    topic_name,
)
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_code_for, error_message_for
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build, ms
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.SHARE_FETCH
VERSIONS = VersionRange(1, 2)
FINAL_EPOCH = -1


def _answer(request: Any, code: ErrorCode, message: str | None, lock_ms: int,
            entries: list[PartitionEntry]) -> Any:
    return build(response_of(request), throttle_time=0, error_code=code, error_message=message,
                 acquisition_lock_timeout=lock_ms, responses=grouped(entries, only_shown=True), node_endpoints=[])


def _acknowledge_all(ctx: RequestContext, request: Any, renew: bool) -> dict[tuple[Any, int], PartitionEntry]:
    entries: dict[tuple[Any, int], PartitionEntry] = {}
    for topic in request.topics:
        name = topic_name(ctx, topic.topic_id)
        for part in topic.partitions:
            entry = entries[(topic.topic_id, part.partition_index)] = PartitionEntry(
                topic.topic_id, name, part.partition_index)
            if name is None:
                entry.error_code = ErrorCode.unknown_topic_id
            elif part.acknowledgement_batches:
                acknowledge(ctx, request, entry, part.acknowledgement_batches, renew)
    return entries


def _acquire(ctx: RequestContext, request: Any, entry: PartitionEntry, budget: int, byte_budget: int) -> None:
    assert entry.topic is not None
    try:
        partition_log(ctx, entry.topic, entry.partition)
        fetched = ctx.services.shares.acquire(request.group_id, request.member_id, entry.topic, entry.partition,
                                              budget, byte_budget)
    except Exception as exc:
        entry.error_code = error_code_for(exc, ctx, topic=entry.topic, partition=entry.partition)
        entry.error_message = error_message_for(exc)
        return
    entry.records, entry.acquired = fetched.records, fetched.acquired


def _acquire_all(ctx: RequestContext, request: Any, entries: list[PartitionEntry]) -> int:
    """One pass over the session's partitions; the number of records acquired."""
    budget = request.max_records if request.max_records > 0 else 500
    byte_budget = min(request.max_bytes, ctx.services.config.fetch_max_bytes)
    taken = 0
    for entry in entries:
        if entry.topic is None or entry.error_code != ErrorCode.none or taken >= budget or byte_budget <= 0:
            continue
        _acquire(ctx, request, entry, budget - taken, byte_budget)
        taken += sum(a.last_offset - a.first_offset + 1 for a in entry.acquired)
        byte_budget -= len(entry.records)
    return taken


async def handle(ctx: RequestContext, request: Any) -> Any:
    shares = ctx.services.shares
    refused = request_error(ctx, request)
    if refused is not None:
        return _answer(request, refused[0], refused[1], 0, [])
    lock_ms = shares.lock_duration_ms(request.group_id)
    epoch = request.share_session_epoch
    if epoch == 0 and any(p.acknowledgement_batches for t in request.topics for p in t.partitions):
        return _answer(request, ErrorCode.invalid_request, "Acknowledge data present on initial epoch", lock_ms, [])
    renew = bool(getattr(request, "is_renew_ack", False))
    added = [(name, p.partition_index) for t in request.topics
             if (name := topic_name(ctx, t.topic_id)) is not None for p in t.partitions]
    forgotten = [(name, p) for t in request.forgotten_topics_data
                 if (name := topic_name(ctx, t.topic_id)) is not None for p in t.partitions]
    try:
        session = shares.update_session(request.group_id, request.member_id, epoch, added, forgotten)
    except Exception as exc:
        return _answer(request, error_code_for(exc, ctx), error_message_for(exc), lock_ms, [])
    by_key = _acknowledge_all(ctx, request, renew)
    if epoch == FINAL_EPOCH:
        shares.close_session(request.group_id, request.member_id)
        return _answer(request, ErrorCode.none, None, lock_ms, list(by_key.values()))
    entries = list(by_key.values())
    for topic, partition in session:
        topic_id = shares.topic_id(topic)
        if (topic_id, partition) not in by_key:
            entries.append(PartitionEntry(topic_id, topic, partition))
    if renew:
        return _answer(request, ErrorCode.none, None, lock_ms, entries)
    clock = ctx.services.clock
    deadline = clock.real_monotonic() + ms(request.max_wait) / 1000
    watched = [(e.topic, e.partition) for e in entries if e.topic is not None]
    while True:
        taken = _acquire_all(ctx, request, entries)
        remaining = deadline - clock.real_monotonic()
        if taken > 0 or remaining <= 0 or not watched:
            break
        if not await ctx.services.waiters.wait_any(watched, remaining):
            _acquire_all(ctx, request, entries)
            break
    return _answer(request, ErrorCode.none, None, lock_ms, entries)
