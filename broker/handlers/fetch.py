"""Fetch: v4-18.

Behavior:
- Long poll: answers once min_bytes are available, an error occurs, or max_wait passes. Waiting is
  woken by appends to the fetched partitions (AppendWaiters), never by polling the logs. max_wait is
  real time even under a manual clock: the client times its request in real time, so a long poll
  held until the test advances the clock would end in the client's request timeout instead.
- Returns whole batches starting with the one holding fetch_offset (clients skip the records
  before it), at most partition_max_bytes per partition and max_bytes in all, except that the
  first non-empty partition always returns at least one whole batch so a large record is never stuck.
- read_uncommitted reads to the high watermark; read_committed to the last stable offset, with
  the aborted transactions overlapping the fetched range (from `.txnindex`) so clients drop their
  records; for read_uncommitted that list is null, as in Kafka.
- An empty partition has empty records, never null: librdkafka rejects a null MessageSet.
- A partition's slice of REGION_MIN_BYTES (48 KiB) or more is not read here: it stays a region of the
  segment file, sent with sendfile as Kafka sends FileRecords (broker/wire/connection.py).
- Fetch sessions: none are created (session id 0, KIP-227 "sessionless"), so clients send full
  fetches; an incremental fetch naming a session gets FETCH_SESSION_ID_NOT_FOUND.
- OFFSET_OUT_OF_RANGE when fetch_offset is below the log start or above the log end.
- max_bytes is capped at fetch.max.bytes (55 MiB, as Kafka). A negative max_bytes or
  partition_max_bytes is INVALID_REQUEST for the partitions concerned (Kafka's LogSegment.read throws
  IllegalArgumentException there, which clients see as UNKNOWN_SERVER_ERROR).
- Topics by name up to v12, by topic id from v13 (KIP-516). An id this broker does not know (never
  created, deleted, or the id of a topic since re-created under the same name) is UNKNOWN_TOPIC_ID
  on each of its partitions, as Kafka's handleFetchRequest answers: a client holding the old id of
  a re-created topic never reads the new topic's records. Ids are resolved again on every pass of
  a long poll, so a topic deleted while the request waits answers UNKNOWN_TOPIC_ID too.
Version notes: v15 moves replica_id into the tagged replica_state (consumers send -1 either way);
v16 adds node_endpoints: with several nodes a partition led elsewhere is NOT_LEADER_OR_FOLLOWER
with the leader and its epoch in current_leader and its address there (KIP-951); v17 adds
replica_directory_id and v18 the follower's high watermark, both
follower-only fields, ignored.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import check_leader_epoch, leader_endpoints, partition_log, response_of
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_code_for
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build, ms
from minikafka.protocol.errors import ErrorCode, KafkaError

API_KEY = ApiKey.FETCH
VERSIONS = VersionRange(4, 18)

READ_COMMITTED = 1


def _topic_name(ctx: RequestContext, topic: Any, by_id: bool) -> str | None:
    """The name a requested topic entry addresses now; None for an id this broker does not know."""
    if not by_id:
        return topic.topic  # type: ignore[no-any-return]
    meta = ctx.services.logs.topic_by_id(topic.topic_id)
    return meta.name if meta is not None else None


def _read_all(ctx: RequestContext, request: Any) -> tuple[list[dict[str, Any]], int, bool]:
    """One pass over the requested partitions: (topic entries, bytes gathered, any error)."""
    by_id = request.__version__ >= 13
    # Kafka's min(max_bytes, fetch.max.bytes): a client asking for 2 GiB gets at most that much.
    budget = min(request.max_bytes, ctx.services.config.fetch_max_bytes)
    gathered = 0
    errored = False
    committed = request.isolation_level == READ_COMMITTED
    topics = []
    for topic in request.topics:
        name = _topic_name(ctx, topic, by_id)
        partitions = []
        for part in topic.partitions:
            entry: dict[str, Any] = {"partition_index": part.partition, "records": b"",
                                     "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
                                     "aborted_transactions": None}
            if name is None:
                errored = True
                entry["error_code"] = ErrorCode.unknown_topic_id
                partitions.append(entry)
                continue
            try:
                if part.partition_max_bytes < 0 or budget < 0:
                    raise KafkaError(f"negative max_bytes ({request.max_bytes}) or partition_max_bytes "
                                     f"({part.partition_max_bytes})", code=ErrorCode.invalid_request)
                log = partition_log(ctx, name, part.partition)
                check_leader_epoch(getattr(part, "current_leader_epoch", -1), log.leader_epoch)
                limit = min(part.partition_max_bytes, budget - gathered)
                last_stable = log.last_stable_offset
                upper = last_stable if committed else log.high_watermark
                if limit > 0 or gathered == 0:
                    read = log.read(part.fetch_offset, max(limit, 0), upper_bound=upper,
                                    min_one_batch=gathered == 0, as_region=True)
                    entry["records"] = read.records
                    gathered += len(read.records)
                elif part.fetch_offset < log.log_start_offset or part.fetch_offset > log.log_end_offset:
                    log.read(part.fetch_offset, 0, upper_bound=upper)  # raises OffsetOutOfRange
                entry.update(high_watermark=log.high_watermark, last_stable_offset=last_stable,
                             log_start_offset=log.log_start_offset)
                if committed:
                    entry["aborted_transactions"] = [
                        {"producer_id": t.producer_id, "first_offset": t.first_offset}
                        for t in log.collect_aborted(part.fetch_offset, upper)]
            except Exception as exc:
                errored = True
                entry["error_code"] = error_code_for(exc, ctx, topic=name, partition=part.partition)
                if (leader := getattr(exc, "current_leader", None)) is not None:
                    entry["current_leader"] = leader
            partitions.append(entry)
        topics.append({"topic": name, "topic_id": getattr(topic, "topic_id", None), "partitions": partitions})
    return topics, gathered, errored


async def handle(ctx: RequestContext, request: Any) -> Any:
    if request.__version__ >= 7 and request.session_id != 0:
        return build(response_of(request), error_code=ErrorCode.fetch_session_id_not_found, responses=[])
    clock = ctx.services.clock
    deadline = clock.real_monotonic() + ms(request.max_wait) / 1000
    by_id = request.__version__ >= 13
    # Waiters are keyed by name: an unknown id answers at once (an error), so it needs no waiter.
    watched = [(name, p.partition) for t in request.topics
               if (name := _topic_name(ctx, t, by_id)) is not None for p in t.partitions]
    while True:
        topics, gathered, errored = _read_all(ctx, request)
        remaining = deadline - clock.real_monotonic()
        if errored or gathered >= request.min_bytes or remaining <= 0 or not watched:
            break
        if not await ctx.services.waiters.wait_any(watched, remaining):
            topics, gathered, errored = _read_all(ctx, request)
            break
    endpoints = leader_endpoints(ctx, [p for t in topics for p in t["partitions"]])
    return build(response_of(request), throttle_time=0, error_code=ErrorCode.none, session_id=0,
                 responses=topics, node_endpoints=endpoints)
