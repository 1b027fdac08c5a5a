"""What AlterConfigs and IncrementalAlterConfigs share: Kafka's per-resource preprocessing
(ConfigAdminManager.preprocess) and the list-config APPEND/SUBTRACT arithmetic."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from minikafka.broker.config.dynamic_config import invalid_request
from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_fields
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode
from minikafka.storage.manager import validate_topic_name

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
APPEND, SUBTRACT = 2, 3


def refuse_duplicate_keys(resource: Any) -> None:
    names = Counter(config.name for config in resource.configs)
    if any(count > 1 for count in names.values()):
        raise invalid_request("Error due to duplicate config keys")


def refuse_null_values(names: list[str]) -> None:
    if names:
        raise invalid_request(f"Null value not supported for : {', '.join(names)}")


def check_topic_resource(name: str) -> None:
    """Kafka's ControllerConfigurationValidator.validateTopicName, run before the topic is looked up."""
    if not name:
        raise invalid_request("Default topic resources are not allowed.")
    validate_topic_name(name)


def list_items(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def apply_list_operation(current: str | None, operation: int, value: str | None) -> str:
    """`current` (a comma-separated list config) with `value`'s items appended or subtracted."""
    items = list_items(current)
    for item in list_items(value):
        if operation == APPEND and item not in items:
            items.append(item)
        elif operation == SUBTRACT and item in items:
            items.remove(item)
    return ",".join(items)


def alter_each_resource(ctx: RequestContext, request: Any, alter: Callable[[Any], None]) -> Any:
    """Run `alter` on each resource, a resource named twice failing every copy with INVALID_REQUEST
    ("Each resource must appear at most once."), and one response entry per resource."""
    named = Counter((resource.resource_type, resource.resource_name) for resource in request.resources)
    results = []
    for resource in request.resources:
        entry: dict[str, Any] = {"resource_type": resource.resource_type, "resource_name": resource.resource_name,
                                 "error_code": ErrorCode.none, "error_message": None}
        try:
            if named[(resource.resource_type, resource.resource_name)] > 1:
                raise invalid_request("Each resource must appear at most once.")
            refuse_duplicate_keys(resource)
            alter(resource)
        except Exception as exc:
            entry.update(error_fields(ctx, exc))
        results.append(entry)
    return build(response_of(request), throttle_time=0, responses=results)
