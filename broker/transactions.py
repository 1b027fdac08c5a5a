"""Wiring of the transaction coordinator into a node: config, markers to groups, fetch wake-ups."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog
from minikafka.coordinator.transaction.coordinator import TransactionCoordinator, TxnConfig

from .config import BrokerConfig
from .waiters import AppendWaiters

_log = structlog.get_logger("minikafka.transactions")


def _run_soon(job: Callable[[], None]) -> None:
    """Markers are written right after the EndTxn answer, on the next loop iteration (Kafka's order)."""

    def guarded() -> None:
        try:
            job()
        except Exception:
            _log.exception("writing transaction markers failed")

    asyncio.get_running_loop().call_soon(guarded)


def make_transaction_coordinator(config: BrokerConfig, logs: Any, allocate_producer_id: Callable[[], int],
                                 clock: Any, groups: Any, waiters: AppendWaiters) -> TransactionCoordinator:
    """Build the coordinator; the server replays `__transaction_state` (`load_steps`, finishing any Prepare*
    it finds) once it is listening."""
    return TransactionCoordinator(
        logs, allocate_producer_id, clock,
        TxnConfig(num_partitions=config.transaction_state_log_num_partitions,
                  max_timeout_ms=config.transaction_max_timeout_ms,
                  id_expiration_ms=config.transactional_id_expiration_ms,
                  # Kafka's TransactionLog: TransactionLogValue v1 from transaction.version 1 on
                  log_value_version=min(config.transaction_version, 1),
                  transaction_version=config.transaction_version),
        complete_group_transaction=groups.complete_transaction,
        notify=waiters.notify,
        schedule=_run_soon,
        # Marker retries run on the group coordinator's timers: started with the broker, stopped
        # on shutdown before the logs are closed.
        timers=groups.timers,
    )
