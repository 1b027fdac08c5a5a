"""Wiring of the coordinators into a node: broker properties -> their configs, their stdlib logs -> structlog,
markers from transactions to groups, fetch wake-ups."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog
from minikafka.broker.config.config import BROKER_CONFIGS, BrokerConfig
from minikafka.broker.wire.waiters import AppendWaiters
from minikafka.coordinator.timers import Timers

if TYPE_CHECKING:
    from minikafka.coordinator.group import GroupConfig, GroupCoordinator
    from minikafka.coordinator.share.coordinator import ShareConfig, ShareCoordinator
    from minikafka.coordinator.transaction.coordinator import TransactionCoordinator

_log = structlog.get_logger("minikafka.transactions")


def _int(config: BrokerConfig, key: str) -> int:
    value = config.properties.get(key, BROKER_CONFIGS[key].default)
    assert value is not None
    return int(value)


def group_config(config: BrokerConfig) -> GroupConfig:
    from minikafka.coordinator.group import GroupConfig

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


def forward_coordinator_logs() -> None:
    """At every start, before any coordinator is built: the producer id allocator logs from the start, the
    group and transaction coordinators from their first use."""
    logger = logging.getLogger("minikafka.coordinator")
    if not any(isinstance(h, _ToStructlog) for h in logger.handlers):
        logger.addHandler(_ToStructlog())
        logger.setLevel(logging.INFO)
        logger.propagate = False


def make_group_coordinator(config: BrokerConfig, logs: Any, clock: Any, timers: Timers | None = None
                           ) -> GroupCoordinator:
    """Build the coordinator; the server replays `__consumer_offsets` (`load_steps`) once it is listening,
    and its timers start with `start()`. Imported here, not at the top: a broker builds it at its first
    group request, or at start when `__consumer_offsets` exists (server.py), so a start that serves no
    group does without the group code (a sixth of a fresh start's imports)."""
    from minikafka.coordinator.group import GroupCoordinator

    return GroupCoordinator(logs, clock, group_config(config), timers)


def _run_soon(job: Callable[[], None]) -> None:
    """Markers are written right after the EndTxn answer, on the next loop iteration (Kafka's order)."""

    def guarded() -> None:
        try:
            job()
        except Exception:
            _log.exception("writing transaction markers failed")

    asyncio.get_running_loop().call_soon(guarded)


def make_transaction_coordinator(config: BrokerConfig, logs: Any, allocate_producer_id: Callable[[], int],
                                 clock: Any, complete_group_transaction: Callable[[int, int, int, bool, int], None],
                                 timers: Timers, waiters: AppendWaiters) -> TransactionCoordinator:
    """Build the coordinator; the server replays `__transaction_state` (`load_steps`, finishing any Prepare*
    it finds) once it is listening. `complete_group_transaction` hands a marker written to a
    `__consumer_offsets` partition to the group coordinator. Imported here, as the group coordinator is: a
    broker builds it at its first transactional request, or at start when `__transaction_state` exists."""
    from minikafka.coordinator.transaction.coordinator import TransactionCoordinator, TxnConfig

    return TransactionCoordinator(
        logs, allocate_producer_id, clock,
        TxnConfig(num_partitions=config.transaction_state_log_num_partitions,
                  max_timeout_ms=config.transaction_max_timeout_ms,
                  id_expiration_ms=config.transactional_id_expiration_ms,
                  # Kafka's TransactionLog: TransactionLogValue v1 from transaction.version 1 on
                  log_value_version=min(config.transaction_version, 1),
                  transaction_version=config.transaction_version),
        complete_group_transaction=complete_group_transaction,
        notify=waiters.notify,
        schedule=_run_soon,
        # Marker retries run on the coordinators' timers, shared with the group coordinator: started with
        # the broker, stopped on shutdown before the logs are closed.
        timers=timers,
    )


def share_config(config: BrokerConfig) -> ShareConfig:
    from minikafka.coordinator.share.coordinator import ShareConfig

    return ShareConfig(
        session_timeout_ms=_int(config, "group.share.session.timeout.ms"),
        heartbeat_interval_ms=_int(config, "group.share.heartbeat.interval.ms"),
        record_lock_duration_ms=_int(config, "group.share.record.lock.duration.ms"),
        delivery_count_limit=_int(config, "group.share.delivery.count.limit"),
        partition_max_record_locks=_int(config, "group.share.partition.max.record.locks"),
        max_size=_int(config, "group.share.max.size"),
        state_topic_num_partitions=_int(config, "share.coordinator.state.topic.num.partitions"),
        snapshot_update_records=_int(config, "share.coordinator.snapshot.update.records.per.snapshot"),
    )


def make_share_coordinator(config: BrokerConfig, logs: Any, clock: Any, waiters: AppendWaiters,
                           group_configs: Callable[[str], Any]) -> ShareCoordinator:
    """Build the share coordinator; the server replays `__share_group_state` (`load_steps`) with the
    other coordinators. Records released back to a share-partition wake the share fetches parked on it."""
    from minikafka.coordinator.share.coordinator import ShareCoordinator  # built at first use (server.py)

    shares = ShareCoordinator(logs, clock, share_config(config))
    shares.notify = waiters.notify
    shares.group_overrides = group_configs
    return shares
