"""DescribeConfigs: v1-4.

Behavior:
- TOPIC (2): every topic config with its effective value and source (topic override, dynamic
  per-broker or cluster-default broker config, static broker property, or Kafka's default),
  optionally only the named keys, with synonyms (most specific first) and documentation when asked.
  Unknown topic: UNKNOWN_TOPIC_OR_PARTITION.
- BROKER (4), this node's id: every broker config with its effective value and source
  (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG);
  read_only is false for the keys that can be changed at runtime (broker/config/dynamic_config.py). An empty
  name (the cluster default): only the keys set dynamically there, as Kafka's ConfigHelper. Another
  node's id: INVALID_REQUEST.
- GROUP (32): Kafka's group configs (GroupConfig), set (GROUP_CONFIG) or the broker's default.
- BROKER_LOGGER (8) and others: INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_fields
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.errors import UnknownTopicOrPartition

API_KEY = ApiKey.DESCRIBE_CONFIGS
VERSIONS = VersionRange(1, 4)

TOPIC, BROKER, GROUP = 2, 4, 32


def _describe(ctx: RequestContext, resource: Any, synonyms: bool) -> list[dict[str, Any]]:
    services = ctx.services
    keys = set(resource.configuration_keys) if resource.configuration_keys else None
    if resource.resource_type == TOPIC:
        meta = services.logs.topic(resource.resource_name)
        if meta is None:
            raise UnknownTopicOrPartition(f"topic {resource.resource_name} does not exist")
        return services.dynamic_configs.topic_entries(dict(meta.configs), keys, synonyms)
    if resource.resource_type == BROKER:
        if resource.resource_name not in ("", str(ctx.node.node_id)):
            raise KafkaError(f"broker {resource.resource_name} is not this node", code=ErrorCode.invalid_request)
        return services.dynamic_configs.broker_entries(resource.resource_name, keys, synonyms)
    if resource.resource_type == GROUP:
        return services.dynamic_configs.group_entries(resource.resource_name, keys, synonyms)
    raise KafkaError(f"resource type {resource.resource_type} is not supported", code=ErrorCode.invalid_request)


async def handle(ctx: RequestContext, request: Any) -> Any:
    results = []
    for resource in request.resources:
        entry: dict[str, Any] = {"resource_type": resource.resource_type, "resource_name": resource.resource_name,
                                 "error_code": ErrorCode.none, "error_message": None, "configs": []}
        try:
            entry["configs"] = _describe(ctx, resource, request.include_synonyms)
        except Exception as exc:
            entry.update(error_fields(ctx, exc))
        results.append(entry)
    return build(response_of(request), throttle_time=0, results=results)
