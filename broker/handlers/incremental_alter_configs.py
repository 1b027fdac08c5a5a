"""IncrementalAlterConfigs: v0-1.

Behavior:
- TOPIC resources: SET (0), DELETE (1, back to the default), APPEND (2) and SUBTRACT (3) for list
  configs such as cleanup.policy (on another key INVALID_CONFIG, "Can't APPEND to key retention.ms because
  its type is not LIST."). Validated as a whole before applying; validate_only changes nothing. An
  unknown key or bad value is INVALID_CONFIG, with Kafka's messages ("Unknown topic config name: x",
  "Invalid value -5 for configuration retention.ms: Value must be at least -1"); an unknown topic
  UNKNOWN_TOPIC_OR_PARTITION ("The topic 'x' does not exist."), after the configs are checked, as in
  Kafka; an empty name INVALID_REQUEST ("Default topic resources are not allowed."), an illegal one
  INVALID_TOPIC_EXCEPTION.
- A null value is legal for DELETE only; SET, APPEND or SUBTRACT with one fails the resource with
  INVALID_REQUEST ("Null value not supported for : a, b"), as in Kafka's ConfigAdminManager; so do a
  key named twice ("Error due to duplicate config keys") and, for every copy, a resource named twice
  ("Each resource must appear at most once.").
- BROKER (4) resources, this node's id or "" (the cluster default): SET and DELETE of dynamic broker
  configs, APPEND/SUBTRACT for list ones (log.cleanup.policy), applied to the stored set of that
  resource and validated as a whole as Kafka's ConfigAdminManager/DynamicBrokerConfig: a key that
  cannot change at runtime fails the resource with INVALID_REQUEST ("Cannot update these configs
  dynamically: Set(a, b)"), a bad value with INVALID_REQUEST too (Kafka, KAFKA-13609), another
  node's id with INVALID_REQUEST ("Unexpected broker id, expected 1, but received 2"). Persisted and
  applied at once to the topic defaults (broker/config/dynamic_config.py).
- GROUP (32) resources: Kafka's group configs (GroupConfig); an unknown key or a value outside the
  broker's group.consumer.*/group.share.* bounds is INVALID_CONFIG. consumer.session.timeout.ms and
  consumer.heartbeat.interval.ms apply to that KIP-848 group from its members' next heartbeat.
- CLIENT_METRICS (16): client metrics subscriptions (KIP-714: `metrics`, `interval.ms`, `match`),
  validated as Kafka's ClientMetricsConfigs (an unknown key or an interval outside 100-3600000
  INVALID_REQUEST, a bad match pattern INVALID_CONFIG), APPEND/SUBTRACT on the two lists; deleting every
  key deletes the subscription. Persisted and applied at once: clients get the new subscription at
  their next telemetry request (coordinator/client_metrics/).
- BROKER_LOGGER (8): INVALID_REQUEST (no log4j loggers here); other types: INVALID_REQUEST ("Unknown
  resource type N").
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.config.dynamic_config import BROKER_KEYS, GROUP_CONFIGS, invalid_request
from minikafka.broker.handlers._shared.config_changes import (
    APPEND,
    BROKER,
    BROKER_LOGGER,
    CLIENT_METRICS,
    GROUP,
    SUBTRACT,
    TOPIC,
    alter_each_resource,
    apply_list_operation,
    check_topic_resource,
    refuse_null_values,
)
from minikafka.broker.wire.context import RequestContext
from minikafka.coordinator.client_metrics.configs import CLIENT_METRICS_CONFIGS
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.storage.config import TOPIC_CONFIGS
from minikafka.storage.errors import InvalidConfig

API_KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS
VERSIONS = VersionRange(0, 1)

SET, DELETE = 0, 1


def _alter_topic(ctx: RequestContext, resource: Any, validate_only: bool) -> None:
    logs = ctx.services.logs
    name = resource.resource_name
    check_topic_resource(name)
    meta = logs.topic(name)
    current = dict(meta.configs) if meta is not None else {}
    to_set: dict[str, str] = {}
    to_delete: list[str] = []
    for change in resource.configs:
        if change.config_operation == SET:
            to_set[change.name] = change.value
        elif change.config_operation == DELETE:
            to_delete.append(change.name)
        elif change.config_operation in (APPEND, SUBTRACT):
            definition = TOPIC_CONFIGS.get(change.name)
            if definition is None or definition.type != "list":
                # Kafka's ConfigurationControlManager.incrementalAlterConfigResource
                verb = "APPEND" if change.config_operation == APPEND else "SUBTRACT"
                raise InvalidConfig(f"Can't {verb} to key {change.name} because its type is not LIST.")
            to_set[change.name] = apply_list_operation(current.get(change.name), change.config_operation,
                                                       change.value)
        else:
            raise invalid_request(f"Unknown operations type {change.config_operation}")
    # The configs are validated before the topic is looked up, as Kafka's controller does.
    logs.alter_topic_configs(name, to_set, to_delete, validate_only=validate_only)
    if not validate_only:
        ctx.log.info("altered topic configs", topic=name, set=to_set, deleted=to_delete)


def _incremental_result(current: dict[str, str], resource: Any, types: dict[str, str],
                        defaults: dict[str, str | None]) -> dict[str, str]:
    """`current` with the resource's operations applied, as Kafka's prepareIncrementalConfigs: APPEND
    and SUBTRACT only for list configs, starting from the default when the key is not set."""
    result = dict(current)
    for change in resource.configs:
        if change.config_operation == SET:
            result[change.name] = change.value
        elif change.config_operation == DELETE:
            result.pop(change.name, None)
        elif change.config_operation in (APPEND, SUBTRACT):
            verb = "append" if change.config_operation == APPEND else "subtract"
            if change.name not in types:
                raise InvalidConfig(f"Unknown config name: {change.name}")
            if types[change.name] != "list":
                raise invalid_request(f"Config value {verb} is not allowed for config key: {change.name}")
            result[change.name] = apply_list_operation(result.get(change.name, defaults.get(change.name)),
                                                       change.config_operation, change.value)
        else:
            raise invalid_request(f"Unknown operations type {change.config_operation}")
    return result


def _alter_broker(ctx: RequestContext, resource: Any, validate_only: bool) -> None:
    store = ctx.services.dynamic_configs
    store.check_broker_resource(resource.resource_name)
    wanted = _incremental_result(store.broker_layer(resource.resource_name), resource,
                                 {name: key.type for name, key in BROKER_KEYS.items()},
                                 {name: key.default for name, key in BROKER_KEYS.items()})
    store.alter_broker(ctx.services.logs, resource.resource_name, wanted, validate_only=validate_only)


def _alter_group(ctx: RequestContext, resource: Any, validate_only: bool) -> None:
    store = ctx.services.dynamic_configs
    wanted = _incremental_result(store.group_layer(resource.resource_name), resource,
                                 {name: spec.type for name, spec in GROUP_CONFIGS.items()},
                                 {name: spec.default for name, spec in GROUP_CONFIGS.items()})
    store.alter_group(resource.resource_name, wanted, validate_only=validate_only)


def _alter_client_metrics(ctx: RequestContext, resource: Any, validate_only: bool) -> None:
    store = ctx.services.dynamic_configs
    name = resource.resource_name
    wanted = _incremental_result(store.client_metrics_layer(name), resource,
                                 {key: spec.type for key, spec in CLIENT_METRICS_CONFIGS.items()},
                                 {key: spec.default for key, spec in CLIENT_METRICS_CONFIGS.items()})
    store.alter_client_metrics(name, wanted, validate_only=validate_only)
    if not validate_only:
        ctx.services.client_metrics.update_subscription(name, wanted)


async def handle(ctx: RequestContext, request: Any) -> Any:
    def alter(resource: Any) -> None:
        # Only DELETE may carry a null value; Kafka refuses the others before anything else is looked at.
        refuse_null_values([c.name for c in resource.configs if c.config_operation != DELETE and c.value is None])
        if resource.resource_type == TOPIC:
            _alter_topic(ctx, resource, request.validate_only)
        elif resource.resource_type == BROKER:
            _alter_broker(ctx, resource, request.validate_only)
        elif resource.resource_type == GROUP:
            _alter_group(ctx, resource, request.validate_only)
        elif resource.resource_type == CLIENT_METRICS:
            _alter_client_metrics(ctx, resource, request.validate_only)
        elif resource.resource_type == BROKER_LOGGER:
            raise invalid_request("broker loggers cannot be altered: minikafka has no log4j loggers")
        else:
            raise invalid_request(f"Unknown resource type {resource.resource_type}")

    return alter_each_resource(ctx, request, alter)
