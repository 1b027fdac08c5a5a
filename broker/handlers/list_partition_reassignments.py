"""ListPartitionReassignments: v0.

Behavior: the reassignments under way in the `--nodes N` cluster view (broker/wire/cluster.py), as
Kafka's ReplicationControlManager.listPartitionReassignments lists them: every one for null topics,
else those among the requested partitions (unknown topics and partitions not being moved are left
out). Each shows the full replica list (target then removing) and the replicas being added and
removed. A reassignment is under way only while a target node is stopped: moves to online nodes
complete at once (AlterPartitionReassignments).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.wire.context import RequestContext
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.LIST_PARTITION_REASSIGNMENTS
VERSIONS = VersionRange(0, 0)


async def handle(ctx: RequestContext, request: Any) -> Any:
    wanted = None if request.topics is None else {(t.name, int(p)) for t in request.topics for p in t.partition_indexes}
    ongoing: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for topic, partition, state in ctx.services.cluster.reassignments():
        if wanted is None or (topic, partition) in wanted:
            ongoing[topic].append({"partition_index": partition, "replicas": state.replicas,
                                   "adding_replicas": state.adding, "removing_replicas": state.removing})
    return build(response_of(request), throttle_time=0, error_code=ErrorCode.none, error_message=None,
                 topics=[{"name": name, "partitions": partitions} for name, partitions in ongoing.items()])
