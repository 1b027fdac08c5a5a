"""DescribeCluster: v0-1.

Behavior: the cluster id, the controller (lowest node id) and every node of the cluster view.
endpoint_type (v1) 1 = brokers; 2 = controllers is answered with the same node, which plays both roles.
include_cluster_authorized_operations: every cluster operation, as Kafka without an authorizer.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.authorization import CLUSTER_OPERATIONS, operations_if
from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.wire.context import RequestContext
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.DESCRIBE_CLUSTER
VERSIONS = VersionRange(0, 1)


async def handle(ctx: RequestContext, request: Any) -> Any:
    cluster = ctx.services.cluster
    return build(
        response_of(request),
        throttle_time=0,
        error_code=ErrorCode.none,
        endpoint_type=getattr(request, "endpoint_type", 1),
        cluster_id=cluster.cluster_id,
        controller_id=cluster.controller_id,
        brokers=[{"broker_id": n.node_id, "host": n.host, "port": n.port, "rack": n.rack}
                 for n in cluster.nodes_on(ctx.session.listener_name)],
        cluster_authorized_operations=operations_if(request.include_cluster_authorized_operations, CLUSTER_OPERATIONS),
    )
