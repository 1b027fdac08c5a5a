"""Wiring of the group coordinator: broker properties -> GroupConfig."""

from __future__ import annotations

from typing import Any

from minikafka.coordinator.group import GroupConfig, GroupCoordinator

from .config import BROKER_CONFIGS, BrokerConfig


def _int(config: BrokerConfig, key: str) -> int:
    value = config.properties.get(key, BROKER_CONFIGS[key].default)
    assert value is not None
    return int(value)


def group_config(config: BrokerConfig) -> GroupConfig:
    return GroupConfig(
        offsets_topic_num_partitions=config.offsets_topic_num_partitions,
        initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
        min_session_timeout_ms=_int(config, "group.min.session.timeout.ms"),
        max_session_timeout_ms=_int(config, "group.max.session.timeout.ms"),
        offsets_retention_ms=_int(config, "offsets.retention.ms"),
        offsets_retention_check_interval_ms=_int(config, "offsets.retention.check.interval.ms"),
        offset_metadata_max_bytes=_int(config, "offset.metadata.max.bytes"),
    )


def make_group_coordinator(config: BrokerConfig, logs: Any, clock: Any) -> GroupCoordinator:
    """Build the coordinator and replay `__consumer_offsets`; its timers start with `start()`."""
    coordinator = GroupCoordinator(logs, clock, group_config(config))
    coordinator.load()
    return coordinator
