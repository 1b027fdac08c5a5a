"""IncrementalAlterConfigs: v0-1.

Behavior:
- TOPIC resources: SET (0), DELETE (1, back to the default), APPEND (2) and SUBTRACT (3) for list
  configs such as cleanup.policy. Validated as a whole before applying; validate_only changes
  nothing. An unknown key or bad value is INVALID_CONFIG; an unknown topic UNKNOWN_TOPIC_OR_PARTITION.
- A null value is legal for DELETE only; SET, APPEND or SUBTRACT with one fails the resource with
  INVALID_REQUEST ("Null value not supported for : a, b"), as in Kafka's ConfigAdminManager; so do a
  key named twice ("Error due to duplicate config keys") and, for every copy, a resource named twice
  ("Each resource must appear at most once.").
Simplifications: BROKER resources (dynamic broker configs) are refused with INVALID_REQUEST.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.errors import InvalidConfig, UnknownTopicOrPartition

from ..context import RequestContext
from ..errors import error_fields
from .common import response_of

API_KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS
VERSIONS = VersionRange(0, 1)

TOPIC = 2
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _list_value(current: str | None) -> list[str]:
    return [item.strip() for item in (current or "").split(",") if item.strip()]


def _refuse_duplicate_keys(resource: Any) -> None:
    names = Counter(config.name for config in resource.configs)
    if any(count > 1 for count in names.values()):
        raise KafkaError("Error due to duplicate config keys", code=ErrorCode.invalid_request)


def _refuse_null_values(resource: Any) -> None:
    """Only DELETE may carry a null value; Kafka refuses the others before anything else is looked at
    (ConfigAdminManager.preprocess), for the whole resource, with INVALID_REQUEST."""
    null_updates = [c.name for c in resource.configs if c.config_operation != DELETE and c.value is None]
    if null_updates:
        raise KafkaError(f"Null value not supported for : {', '.join(null_updates)}", code=ErrorCode.invalid_request)


def _alter_topic(ctx: RequestContext, resource: Any, validate_only: bool) -> None:
    logs = ctx.services.logs
    meta = logs.topic(resource.resource_name)
    if meta is None:
        raise UnknownTopicOrPartition(f"topic {resource.resource_name} does not exist")
    to_set: dict[str, str] = {}
    to_delete: list[str] = []
    for change in resource.configs:
        current = meta.configs.get(change.name)
        if change.config_operation == SET:
            to_set[change.name] = change.value
        elif change.config_operation == DELETE:
            to_delete.append(change.name)
        elif change.config_operation in (APPEND, SUBTRACT):
            items = _list_value(current)
            for item in _list_value(change.value):
                if change.config_operation == APPEND and item not in items:
                    items.append(item)
                elif change.config_operation == SUBTRACT and item in items:
                    items.remove(item)
            to_set[change.name] = ",".join(items)
        else:
            raise InvalidConfig(f"unknown config operation {change.config_operation}")
    logs.alter_topic_configs(meta.name, to_set, to_delete, validate_only=validate_only)
    if not validate_only:
        ctx.log.info("altered topic configs", topic=meta.name, set=to_set, deleted=to_delete)


async def handle(ctx: RequestContext, request: Any) -> Any:
    named = Counter((resource.resource_type, resource.resource_name) for resource in request.resources)
    results = []
    for resource in request.resources:
        entry: dict[str, Any] = {"resource_type": resource.resource_type, "resource_name": resource.resource_name,
                                 "error_code": ErrorCode.none, "error_message": None}
        try:
            if named[(resource.resource_type, resource.resource_name)] > 1:
                raise KafkaError("Each resource must appear at most once.", code=ErrorCode.invalid_request)
            _refuse_duplicate_keys(resource)
            _refuse_null_values(resource)
            if resource.resource_type != TOPIC:
                raise KafkaError("only topic configs can be altered", code=ErrorCode.invalid_request)
            _alter_topic(ctx, resource, request.validate_only)
        except Exception as exc:
            entry.update(error_fields(ctx, exc))
        results.append(entry)
    return build(response_of(request), throttle_time=0, responses=results)
