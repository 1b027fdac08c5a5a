"""DescribeConfigs: v1-4.

Behavior:
- TOPIC (2): every topic config with its effective value and source (topic override, dynamic
  per-broker or cluster-default broker config, static broker property, or Kafka's default),
  optionally only the named keys, with synonyms (most specific first) and documentation when asked.
  Unknown topic: UNKNOWN_TOPIC_OR_PARTITION (no message, as Kafka); an illegal name INVALID_TOPIC_EXCEPTION.
- BROKER (4), this node's id: every broker config with its effective value and source
  (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG);
  read_only is false for the keys that can be changed at runtime (broker/config/dynamic_config.py). An empty
  name (the cluster default): only the keys set dynamically there, as Kafka's ConfigHelper. Another
  node's id: INVALID_REQUEST ("Unexpected broker id, expected 1 or empty string, but received 2", Kafka's
  ConfigHelper).
- GROUP (32): Kafka's group configs (GroupConfig), set (GROUP_CONFIG) or the broker's default.
- CLIENT_METRICS (16): a client metrics subscription's `metrics`, `interval.ms` and `match`, set
  (CLIENT_METRICS_CONFIG) or the default, as Kafka's ConfigHelper; an empty name INVALID_REQUEST
  ("Client metrics subscription name must not be empty"). A name never set is described with the defaults.
- BROKER_LOGGER (8) and others: INVALID_REQUEST ("Unsupported resource type: BROKER_LOGGER"; Kafka lists
  its log4j loggers, which minikafka does not have).
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
from minikafka.storage.manager import validate_topic_name

API_KEY = ApiKey.DESCRIBE_CONFIGS
VERSIONS = VersionRange(1, 4)

TOPIC, BROKER, CLIENT_METRICS, GROUP = 2, 4, 16, 32
# Kafka's ConfigResource.Type names, as its messages print them.
_RESOURCE_TYPE_NAMES = {2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS", 32: "GROUP"}


def _describe(ctx: RequestContext, resource: Any, synonyms: bool) -> list[dict[str, Any]]:
    services = ctx.services
    keys = set(resource.configuration_keys) if resource.configuration_keys else None
    if resource.resource_type == TOPIC:
        validate_topic_name(resource.resource_name)
        meta = services.logs.topic(resource.resource_name)
        if meta is None:
            # Kafka's ConfigHelper answers an unknown topic with the code alone.
            raise UnknownTopicOrPartition()
        return services.dynamic_configs.topic_entries(dict(meta.configs), keys, synonyms)
    if resource.resource_type == BROKER:
        if resource.resource_name not in ("", str(ctx.node.node_id)):
            raise KafkaError(_unexpected_broker(resource.resource_name, ctx.node.node_id),
                             code=ErrorCode.invalid_request)
        return services.dynamic_configs.broker_entries(resource.resource_name, keys, synonyms)
    if resource.resource_type == GROUP:
        if not resource.resource_name:
            raise KafkaError("Group name must not be empty", code=ErrorCode.invalid_request)
        return services.dynamic_configs.group_entries(resource.resource_name, keys, synonyms)
    if resource.resource_type == CLIENT_METRICS:
        if not resource.resource_name:
            raise KafkaError("Client metrics subscription name must not be empty", code=ErrorCode.invalid_request)
        return services.dynamic_configs.client_metrics_entries(resource.resource_name, keys, synonyms)
    shown = _RESOURCE_TYPE_NAMES.get(resource.resource_type, "UNKNOWN")
    raise KafkaError(f"Unsupported resource type: {shown}", code=ErrorCode.invalid_request)


def _unexpected_broker(name: str, node_id: int) -> str:
    """Kafka's ConfigHelper messages for a broker resource that is not this node."""
    try:
        int(name)
    except ValueError:
        return f"Broker id must be an integer, but it is: {name}"
    return f"Unexpected broker id, expected {node_id} or empty string, but received {name}"


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
