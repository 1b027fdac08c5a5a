"""DescribeLogDirs: v1-4.

Behavior: the data directory is this node's one log directory, named by its absolute path, as Kafka's
ReplicaManager.describeLogDirs names a live log dir. It lists the partitions this node holds a replica
of (the cluster view's replicas: in a `--nodes N` cluster, a node's share; with one node, every
partition), all of them for null topics, else the requested ones that exist (others are left out, as
in Kafka). partition_size is the log's bytes on disk; offset_lag is max(high watermark - log end
offset, 0), so 0: there are no future logs (AlterReplicaLogDirs is not served), and is_future_key is
false. v3 adds the top-level error code (NONE); v4 the directory's total and usable bytes, read from
the file system holding it as Kafka reads its FileStore.
Not served: v0 (2.8-3.9 brokers had it; kio 0.6.5 has no v0 schema, and v1 differs only in when a
throttled response is sent).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.wire.context import RequestContext
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.DESCRIBE_LOG_DIRS
VERSIONS = VersionRange(1, 4)


async def handle(ctx: RequestContext, request: Any) -> Any:
    data_dir = ctx.services.logs.data_dir
    total, _used, usable = shutil.disk_usage(data_dir)
    result = {"error_code": ErrorCode.none, "log_dir": os.path.abspath(data_dir),
              "topics": _topics(ctx, _wanted(ctx, request.topics)), "total_bytes": total, "usable_bytes": usable}
    return build(response_of(request), throttle_time=0, error_code=ErrorCode.none, results=[result])


def _wanted(ctx: RequestContext, topics: Any) -> Iterable[tuple[str, Iterable[int]]]:
    """(topic, partitions) asked about: every partition for null topics, else those requested that exist."""
    logs = ctx.services.logs
    if topics is None:
        return [(meta.name, range(meta.partitions)) for meta in sorted(logs.topics(), key=lambda m: m.name)]
    wanted = []
    for topic in topics:
        meta = logs.topic(topic.topic)
        if meta is not None:
            wanted.append((meta.name, sorted({p for p in topic.partitions if 0 <= p < meta.partitions})))
    return wanted


def _topics(ctx: RequestContext, wanted: Iterable[tuple[str, Iterable[int]]]) -> list[dict[str, Any]]:
    cluster, logs, node_id = ctx.services.cluster, ctx.services.logs, ctx.node.node_id
    topics = []
    for name, indexes in wanted:
        partitions = []
        for index in indexes:
            log = logs.partition(name, index)
            if log is None or node_id not in cluster.partition(name, index).replicas:
                continue
            partitions.append({"partition_index": index, "partition_size": log.size_bytes,
                               "offset_lag": max(log.high_watermark - log.log_end_offset, 0), "is_future_key": False})
        if partitions:
            topics.append({"name": name, "partitions": partitions})
    return topics

