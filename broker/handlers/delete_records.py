"""DeleteRecords: v0-2.

Behavior: advances each partition's log start offset to `offset` (-1 means the high watermark),
deleting segments wholly below it; the response's low watermark is the new log start. An offset
above the high watermark is OFFSET_OUT_OF_RANGE; an unknown partition UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import partition_log, response_of
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_code_for
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.DELETE_RECORDS
VERSIONS = VersionRange(0, 2)

HIGH_WATERMARK = -1


async def handle(ctx: RequestContext, request: Any) -> Any:
    topics = []
    for topic in request.topics:
        partitions = []
        for part in topic.partitions:
            entry: dict[str, Any] = {"partition_index": part.partition_index, "error_code": ErrorCode.none,
                                     "low_watermark": -1}
            try:
                log = partition_log(ctx, topic.name, part.partition_index)
                offset = log.high_watermark if part.offset == HIGH_WATERMARK else part.offset
                entry["low_watermark"] = ctx.services.logs.delete_records(topic.name, part.partition_index, offset)
                ctx.log.info("deleted records", topic=topic.name, partition=part.partition_index,
                             low_watermark=entry["low_watermark"])
            except Exception as exc:
                entry["error_code"] = error_code_for(exc, ctx, topic=topic.name, partition=part.partition_index)
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return build(response_of(request), throttle_time=0, topics=topics)
