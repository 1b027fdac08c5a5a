"""ListOffsets: v1-11.

Behavior:
- timestamp -2 (EARLIEST): the log start offset; -1 (LATEST): the high watermark, or the last
  stable offset for read_committed; -3 (MAX_TIMESTAMP, v7+): the record with the largest timestamp;
  -4 (EARLIEST_LOCAL, v8+): as EARLIEST (no tiered storage); -5 (LATEST_TIERED, v9+, KIP-1005):
  offset, timestamp and leader epoch -1, Kafka's answer for a topic without remote storage; so is
  -6 (EARLIEST_PENDING_UPLOAD, v11+, KIP-1023), which an older version is refused
  UNSUPPORTED_VERSION for, as Kafka's ReplicaManager refuses it;
  otherwise the first record whose timestamp is >= the target, or offset -1 / timestamp -1 when
  there is none.
- Leader epoch is the partition's (always 0 on a single node) for found offsets, -1 otherwise.
- Asking the same partition twice in one request is INVALID_REQUEST for that partition, as Kafka.
Version notes: v10 adds timeout_ms, how long a remote-storage lookup may take (KIP-1075): every
lookup here is local and immediate, so it is not used.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import partition_log, response_of
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_code_for
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode, KafkaError

API_KEY = ApiKey.LIST_OFFSETS
VERSIONS = VersionRange(1, 11)

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5, -6
EARLIEST_PENDING_UPLOAD_SINCE = 11
READ_COMMITTED = 1


def _lookup(ctx: RequestContext, topic: str, partition: int, timestamp: int, committed: bool,
            version: int) -> dict[str, Any]:
    if timestamp == EARLIEST_PENDING_UPLOAD and version < EARLIEST_PENDING_UPLOAD_SINCE:
        raise KafkaError(f"timestamp {timestamp} needs ListOffsets v{EARLIEST_PENDING_UPLOAD_SINCE}",
                         code=ErrorCode.unsupported_version)
    log = partition_log(ctx, topic, partition)
    epoch = log.leader_epoch
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return {"offset": log.log_start_offset, "timestamp": -1, "leader_epoch": epoch}
    if timestamp == LATEST:
        offset = log.last_stable_offset if committed else log.high_watermark
        return {"offset": offset, "timestamp": -1, "leader_epoch": epoch}
    if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        return {"offset": -1, "timestamp": -1, "leader_epoch": -1}
    if timestamp == MAX_TIMESTAMP:
        offset, found_ts = log.max_timestamp_offset()
        return {"offset": offset, "timestamp": found_ts, "leader_epoch": epoch if offset >= 0 else -1}
    if timestamp < 0:
        raise KafkaError(f"unsupported special timestamp {timestamp}", code=ErrorCode.invalid_request)
    found = log.offset_for_timestamp(timestamp)
    if found is None:
        return {"offset": -1, "timestamp": -1, "leader_epoch": -1}
    return {"offset": found[0], "timestamp": found[1], "leader_epoch": epoch}


async def handle(ctx: RequestContext, request: Any) -> Any:
    committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    topics = []
    for topic in request.topics:
        seen: set[int] = set()
        partitions = []
        for part in topic.partitions:
            entry: dict[str, Any] = {"partition_index": part.partition_index, "error_code": ErrorCode.none}
            try:
                if part.partition_index in seen:
                    raise KafkaError("partition listed twice", code=ErrorCode.invalid_request)
                seen.add(part.partition_index)
                entry.update(_lookup(ctx, topic.name, part.partition_index, part.timestamp, committed,
                                     request.__version__))
            except Exception as exc:
                code = error_code_for(exc, ctx, topic=topic.name, partition=part.partition_index)
                entry.update(error_code=code, offset=-1, timestamp=-1, leader_epoch=-1)
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return build(response_of(request), throttle_time=0, topics=topics)
