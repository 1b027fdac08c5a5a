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
  (broker/dynamic_config.py).
- Other resource types, GROUP included (Kafka's legacy API never took group configs): INVALID_REQUEST
  ("Unknown resource type N"), as in Kafka.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.errors import UnknownTopicOrPartition

from ..context import RequestContext
from ..errors import error_fields
from .common import response_of

API_KEY = ApiKey.ALTER_CONFIGS
VERSIONS = VersionRange(0, 2)

TOPIC, BROKER = 2, 4


def _invalid_request(message: str) -> KafkaError:
    return KafkaError(message, code=ErrorCode.invalid_request)


def _preprocess(resource: Any) -> None:
    names = Counter(config.name for config in resource.configs)
    if any(count > 1 for count in names.values()):
        raise _invalid_request("Error due to duplicate config keys")
    null_updates = [config.name for config in resource.configs if config.value is None]
    if null_updates:
        raise _invalid_request(f"Null value not supported for : {', '.join(null_updates)}")
    if resource.resource_type not in (TOPIC, BROKER):
        raise _invalid_request(f"Unknown resource type {resource.resource_type}")


def _replace_topic_configs(ctx: RequestContext, resource: Any, validate_only: bool) -> None:
    logs = ctx.services.logs
    meta = logs.topic(resource.resource_name)
    if meta is None:
        raise UnknownTopicOrPartition(f"topic {resource.resource_name} does not exist")
    wanted = {config.name: config.value for config in resource.configs}
    dropped = [key for key in meta.configs if key not in wanted]
    logs.alter_topic_configs(meta.name, wanted, dropped, validate_only=validate_only)
    if not validate_only:
        ctx.log.info("replaced topic configs", topic=meta.name, set=wanted, deleted=dropped)


async def handle(ctx: RequestContext, request: Any) -> Any:
    named = Counter((resource.resource_type, resource.resource_name) for resource in request.resources)
    results = []
    for resource in request.resources:
        entry: dict[str, Any] = {"resource_type": resource.resource_type, "resource_name": resource.resource_name,
                                 "error_code": ErrorCode.none, "error_message": None}
        try:
            if named[(resource.resource_type, resource.resource_name)] > 1:
                raise _invalid_request("Each resource must appear at most once.")
            _preprocess(resource)
            if resource.resource_type == BROKER:
                ctx.services.dynamic_configs.alter_broker(
                    ctx.services.logs, resource.resource_name,
                    {config.name: config.value for config in resource.configs}, validate_only=request.validate_only)
            else:
                _replace_topic_configs(ctx, resource, request.validate_only)
        except Exception as exc:
            entry.update(error_fields(ctx, exc))
        results.append(entry)
    return build(response_of(request), throttle_time=0, responses=results)
