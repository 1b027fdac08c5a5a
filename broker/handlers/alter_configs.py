"""AlterConfigs (the older, non-incremental API): v0-2.

Behavior:
- TOPIC resources: the given configs become the topic's whole set of overrides; an override the
  request leaves out goes back to its default (Kafka's legacyAlterConfigResource deletes it).
  Validated as a whole first; validate_only changes nothing. An unknown key or bad value is
  INVALID_CONFIG; an unknown topic UNKNOWN_TOPIC_OR_PARTITION.
- As Kafka's ConfigAdminManager.preprocess: a resource named twice fails both with INVALID_REQUEST
  ("Each resource must appear at most once."), a key named twice fails its resource ("Error due to
  duplicate config keys"), and any null value too ("Null value not supported for : a, b").
Simplifications: BROKER and GROUP resources (dynamic broker and group configs) are refused with
INVALID_REQUEST, as IncrementalAlterConfigs refuses them; other resource types are INVALID_REQUEST
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

TOPIC, BROKER, GROUP = 2, 4, 32


def _invalid_request(message: str) -> KafkaError:
    return KafkaError(message, code=ErrorCode.invalid_request)


def _preprocess(resource: Any) -> None:
    names = Counter(config.name for config in resource.configs)
    if any(count > 1 for count in names.values()):
        raise _invalid_request("Error due to duplicate config keys")
    null_updates = [config.name for config in resource.configs if config.value is None]
    if null_updates:
        raise _invalid_request(f"Null value not supported for : {', '.join(null_updates)}")
    if resource.resource_type in (BROKER, GROUP):
        raise _invalid_request("only topic configs can be altered")
    if resource.resource_type != TOPIC:
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
            _replace_topic_configs(ctx, resource, request.validate_only)
        except Exception as exc:
            entry.update(error_fields(ctx, exc))
        results.append(entry)
    return build(response_of(request), throttle_time=0, responses=results)
