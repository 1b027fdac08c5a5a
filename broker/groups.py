"""Wiring of the group coordinator: broker properties -> GroupConfig, its stdlib logs -> structlog."""

from __future__ import annotations

import logging
from typing import Any

import structlog
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
        consumer_session_timeout_ms=_int(config, "group.consumer.session.timeout.ms"),
        consumer_heartbeat_interval_ms=_int(config, "group.consumer.heartbeat.interval.ms"),
        consumer_assignors=tuple(
            name.strip() for name in str(config.properties.get(
                "group.consumer.assignors", BROKER_CONFIGS["group.consumer.assignors"].default)).split(",")
            if name.strip()
        ),
        consumer_migration_policy=str(config.properties.get(
            "group.consumer.migration.policy", BROKER_CONFIGS["group.consumer.migration.policy"].default)).lower(),
    )


class _ToStructlog(logging.Handler):
    """The coordinator layer logs with stdlib logging (it may not import structlog); forward it."""

    def emit(self, record: logging.LogRecord) -> None:
        structlog.get_logger(record.name).log(record.levelno, record.getMessage())


def _forward_coordinator_logs() -> None:
    logger = logging.getLogger("minikafka.coordinator")
    if not any(isinstance(h, _ToStructlog) for h in logger.handlers):
        logger.addHandler(_ToStructlog())
        logger.setLevel(logging.INFO)
        logger.propagate = False


def make_group_coordinator(config: BrokerConfig, logs: Any, clock: Any) -> GroupCoordinator:
    """Build the coordinator; the server replays `__consumer_offsets` (`load_steps`) once it is listening,
    and its timers start with `start()`."""
    _forward_coordinator_logs()
    return GroupCoordinator(logs, clock, group_config(config))
