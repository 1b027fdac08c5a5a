"""ListConfigResources: v0-1 (v0 was ListClientMetricsResources, KIP-1000; v1 KIP-1142, Kafka 4.1).

Behavior:
- v0: the client metrics subscriptions (CLIENT_METRICS resources) by name.
- v1: the resources of the types asked for, every supported type when none is: GROUP (the groups with
  group configs), CLIENT_METRICS (the subscriptions), BROKER_LOGGER and BROKER (each node, by id) and
  TOPIC (the user topics and the internal ones), in that order, names sorted within a type. A type
  Kafka does not list (anything but 2, 4, 8, 16, 32) fails the whole request with UNSUPPORTED_VERSION
  and no resources, as Kafka's KafkaApis.handleListConfigResources does.
- With an authorizer: DESCRIBE_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
Deviation: the order of types is Kafka's as read from its source; names within a type are sorted here.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.wire.context import RequestContext
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.LIST_CONFIG_RESOURCES
VERSIONS = VersionRange(0, 1)

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
# Kafka's ListConfigResourcesRequest.supportedResourceTypes, in the order its answer lists them.
SUPPORTED_TYPES = (GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC)


def _names(ctx: RequestContext, resource_type: int) -> list[str]:
    services = ctx.services
    if resource_type == GROUP:
        return sorted(services.dynamic_configs.groups)
    if resource_type == CLIENT_METRICS:
        return services.client_metrics.subscription_names()
    if resource_type in (BROKER, BROKER_LOGGER):
        return [str(node.node_id) for node in sorted(services.cluster.nodes, key=lambda node: node.node_id)]
    return sorted(meta.name for meta in services.logs.topics())


async def handle(ctx: RequestContext, request: Any) -> Any:
    if request.__version__ == 0:
        wanted: tuple[int, ...] = (CLIENT_METRICS,)
    else:
        wanted = tuple(request.resource_types) or SUPPORTED_TYPES
        if any(resource_type not in SUPPORTED_TYPES for resource_type in wanted):
            return build(response_of(request), throttle_time=0, error_code=ErrorCode.unsupported_version,
                         config_resources=[])
    resources = [{"resource_name": name, "resource_type": resource_type}
                 for resource_type in SUPPORTED_TYPES if resource_type in wanted
                 for name in _names(ctx, resource_type)]
    return build(response_of(request), throttle_time=0, error_code=ErrorCode.none, config_resources=resources)
