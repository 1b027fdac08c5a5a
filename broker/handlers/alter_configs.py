"""AlterConfigs (the older, non-incremental API): v0-2.

Behavior:
- TOPIC resources: the given configs become the topic's whole set of overrides; an override the
  request leaves out goes back to its default (Kafka's legacyAlterConfigResource deletes it).
  Validated as a whole first; validate_only changes nothing. An unknown key or bad value is
  INVALID_CONFIG; an unknown topic UNKNOWN_TOPIC_OR_PARTITION.
- As Kafka's ConfigAdminManager.preprocess: a resource named twice fails both with INVALID_REQUEST
  ("Each resource must appear at most once."), a key named twice fails its resource ("Error due to
  duplicate config keys"), and any null value too ("Null value not supported for : a, b").
- BROKER resources (this node's id, or "" for the cluster default): the given configs become the
  resource's whole set of dynamic broker configs (a key left out goes back to the level below), with
  the validation of IncrementalAlterConfigs (INVALID_REQUEST "Cannot update these configs dynamically:
  Set(...)" for a key that cannot change at runtime); persisted and applied at once
  (broker/config/dynamic_config.py).
- Other resource types, GROUP included (Kafka's legacy API never took group configs): INVALID_REQUEST
  ("Unknown resource type N"), as in Kafka.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.config.dynamic_config import invalid_request
from minikafka.broker.handlers._shared.config_changes import (
    BROKER,
    TOPIC,
    alter_each_resource,
    check_topic_resource,
    refuse_null_values,
)
from minikafka.broker.wire.context import RequestContext
from minikafka.protocol.api_keys import ApiKey, VersionRange

API_KEY = ApiKey.ALTER_CONFIGS
VERSIONS = VersionRange(0, 2)


def _replace_topic_configs(ctx: RequestContext, resource: Any, validate_only: bool) -> None:
    logs = ctx.services.logs
    name = resource.resource_name
    check_topic_resource(name)
    meta = logs.topic(name)
    wanted = {config.name: config.value for config in resource.configs}
    dropped = [key for key in meta.configs if key not in wanted] if meta is not None else []
    # The configs are validated before the topic is looked up, as Kafka's controller does.
    logs.alter_topic_configs(name, wanted, dropped, validate_only=validate_only)
    if not validate_only:
        ctx.log.info("replaced topic configs", topic=name, set=wanted, deleted=dropped)


async def handle(ctx: RequestContext, request: Any) -> Any:
    def alter(resource: Any) -> None:
        refuse_null_values([config.name for config in resource.configs if config.value is None])
        if resource.resource_type == BROKER:
            ctx.services.dynamic_configs.alter_broker(
                ctx.services.logs, resource.resource_name,
                {config.name: config.value for config in resource.configs}, validate_only=request.validate_only)
        elif resource.resource_type == TOPIC:
            _replace_topic_configs(ctx, resource, request.validate_only)
        else:
            raise invalid_request(f"Unknown resource type {resource.resource_type}")

    return alter_each_resource(ctx, request, alter)
