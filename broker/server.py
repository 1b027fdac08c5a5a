"""BrokerServer: binds the listener, owns connections and background maintenance, shuts down cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable

import structlog
from minikafka.coordinator.producer_ids import ProducerIdManager
from minikafka.storage.clock import Clock, SystemClock
from minikafka.storage.manager import LogManager

from .cluster import ClusterView, Node
from .config import BrokerConfig
from .connection import Connection
from .groups import make_group_coordinator
from .handlers import all_handler_modules
from .registry import Registry
from .services import BrokerServices
from .transactions import make_transaction_coordinator
from .waiters import AppendWaiters

_log = structlog.get_logger("minikafka.server")


class BrokerServer:
    def __init__(self, config: BrokerConfig, clock: Clock | None = None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self._server: asyncio.base_events.Server | None = None
        self._connections: dict[int, tuple[Connection, asyncio.Task[None]]] = {}
        self._ids = itertools.count(1)
        self._maintenance: asyncio.Task[None] | None = None
        self._stopped = asyncio.Event()
        self.services: BrokerServices | None = None
        self.node: Node | None = None

    async def start(self) -> None:
        config = self.config
        logs = LogManager(config.data_dir, config.log_defaults, self.clock, node_id=config.node_id,
                          cluster_id=config.cluster_id)
        logs.load()
        self._server = await asyncio.start_server(self._on_connect, config.host, config.port, reuse_address=True)
        bound_port = self._server.sockets[0].getsockname()[1]
        self.node = Node(config.node_id, config.advertised_host or config.host, config.advertised_port or bound_port)
        cluster = ClusterView(logs.cluster_id, [self.node])
        waiters = AppendWaiters()
        groups = make_group_coordinator(config, logs, self.clock)
        producer_ids = ProducerIdManager(config.data_dir)
        self.services = BrokerServices(
            config=config, clock=self.clock, cluster=cluster, logs=logs,
            registry=Registry(all_handler_modules()), waiters=waiters, groups=groups, producer_ids=producer_ids,
            transactions=make_transaction_coordinator(config, logs, producer_ids.allocate, self.clock, groups,
                                                      waiters),
        )
        self.services.groups.start()
        self._maintenance = asyncio.create_task(self._maintain(), name="maintenance")
        _log.info("broker ready", host=config.host, port=bound_port, node_id=config.node_id,
                  cluster_id=logs.cluster_id, data_dir=str(config.data_dir))

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self.services is not None and self.node is not None
        connection_id = next(self._ids)
        connection = Connection(connection_id, reader, writer, self.node, self.services)
        task = asyncio.current_task()
        assert task is not None
        self._connections[connection_id] = (connection, task)
        try:
            await connection.run()
        except asyncio.CancelledError:
            pass  # shutdown or idle close; asyncio would otherwise log the cancelled task as an error
        finally:
            self._connections.pop(connection_id, None)

    def _periodic_jobs(self) -> list[tuple[str, float, Callable[[], object]]]:
        """(name, interval in seconds, job) for the background maintenance loop."""
        assert self.services is not None
        config = self.config
        logs = self.services.logs
        return [
            ("retention", config.retention_check_interval_ms / 1000, logs.run_retention),
            ("checkpoint", config.checkpoint_interval_ms / 1000, logs.checkpoint),
            ("producer expiry", config.producer_id_expiration_check_interval_ms / 1000,
             lambda: logs.remove_expired_producers(config.producer_id_expiration_ms)),
            ("idle connections", 1.0, self._close_idle_connections),
            ("transaction timeouts", config.transaction_abort_interval_ms / 1000,
             self.services.transactions.abort_timed_out),
            ("transactional id expiry", config.transaction_expire_interval_ms / 1000,
             self.services.transactions.expire_idle),
        ]

    async def _maintain(self) -> None:
        """Run each periodic job on its own interval, after Kafka's initial task delay."""
        jobs = self._periodic_jobs()
        first_run = self.clock.monotonic() + self.config.initial_task_delay_ms / 1000
        due = {name: first_run for name, _interval, _job in jobs}
        tick = min(1.0, *(interval for _name, interval, _job in jobs))
        while True:
            await asyncio.sleep(tick)
            now = self.clock.monotonic()
            for name, interval, job in jobs:
                if now < due[name]:
                    continue
                due[name] = now + interval
                try:
                    job()
                except Exception:
                    _log.exception("maintenance job failed", job=name)

    def _close_idle_connections(self) -> None:
        now = self.clock.monotonic()
        idle_limit = self.config.connections_max_idle_ms / 1000
        for connection, task in list(self._connections.values()):
            if not connection.busy and now - connection.last_active > idle_limit:
                task.cancel()

    async def shutdown(self) -> None:
        """Stop accepting, let in-flight requests finish (bounded), then flush and close the logs."""
        if self._server is not None:
            self._server.close()
        for connection, task in list(self._connections.values()):
            connection.closing = True
            if not connection.busy:
                task.cancel()
        pending = [task for _conn, task in self._connections.values()]
        if pending:
            _done, still_running = await asyncio.wait(pending, timeout=self.config.shutdown_timeout_ms / 1000)
            for task in still_running:
                task.cancel()
        if self._maintenance is not None:
            self._maintenance.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._maintenance
        if self.services is not None:
            await self.services.groups.close()
            self.services.logs.close(clean=True)
        _log.info("broker stopped")
        self._stopped.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()
