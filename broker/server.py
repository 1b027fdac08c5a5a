"""BrokerServer: binds the listener, owns connections and background maintenance, shuts down cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
from collections import Counter
from collections.abc import Callable, Mapping

import structlog
from minikafka.coordinator.producer_ids import ProducerIdManager
from minikafka.storage.clock import Clock, SystemClock
from minikafka.storage.manager import LogManager

from .admin_http import AdminListener
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

# asyncio.start_server's default; Kafka's socket.listen.backlog.size is 50.
_LISTEN_BACKLOG = 100
# asyncio's StreamReader default: what a connection buffers from the socket before pausing reading.
_STREAM_LIMIT = 64 * 1024
_ACCEPT_RETRY_S = 0.1
_IDLE_CHECK_MIN_INTERVAL_S = 0.05
_IDLE_CHECK_MAX_INTERVAL_S = 1.0


def _family_of(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _resolve_overrides(overrides: Mapping[str, int]) -> dict[str, int]:
    """max.connections.per.ip.overrides by IP address; hostnames resolved once at start, as Kafka does."""
    limits: dict[str, int] = {}
    for host, count in overrides.items():
        try:
            addresses = {info[4][0] for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
        except socket.gaierror:
            _log.warning("cannot resolve max.connections.per.ip.overrides host", host=host)
            continue
        for address in addresses:
            limits[str(address)] = count
    return limits


class BrokerServer:
    def __init__(self, config: BrokerConfig, clock: Clock | None = None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self._listener: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        # connection id -> (its Connection, None while being set up; the task serving it)
        self._connections: dict[int, tuple[Connection | None, asyncio.Task[None]]] = {}
        self._connections_per_ip: Counter[str] = Counter()
        self._per_ip_limits: dict[str, int] = {}
        # Set whenever a connection closes, so an accept loop held at max.connections looks again.
        self._slot_freed = asyncio.Event()
        self._ids = itertools.count(1)
        self._maintenance: asyncio.Task[None] | None = None
        self._idle_check: asyncio.Task[None] | None = None
        self._stopped = asyncio.Event()
        self.services: BrokerServices | None = None
        self.node: Node | None = None
        self.admin: AdminListener | None = None

    async def start(self) -> None:
        config = self.config
        logs = LogManager(config.data_dir, config.log_defaults, self.clock, node_id=config.node_id,
                          cluster_id=config.cluster_id)
        logs.load()
        self._listener = socket.create_server((config.host, config.port), family=_family_of(config.host),
                                              backlog=_LISTEN_BACKLOG)
        self._listener.setblocking(False)
        bound_port = self._listener.getsockname()[1]
        self._per_ip_limits = _resolve_overrides(config.max_connections_per_ip_overrides)
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
        self._idle_check = asyncio.create_task(self._close_idle_connections_forever(), name="idle connections")
        if config.admin_port is not None:
            self.admin = AdminListener(self.services, config.admin_host, config.admin_port)
            await self.admin.start()
        self._accepting = asyncio.create_task(self._accept_forever(self._listener), name="accept")
        _log.info("broker ready", host=config.host, port=bound_port, node_id=config.node_id,
                  cluster_id=logs.cluster_id, data_dir=str(config.data_dir), admin_port=self.admin_port)

    @property
    def bound_port(self) -> int:
        """The port the Kafka listener is bound to (the one `port=0` picked), whatever is advertised."""
        if self._listener is None:
            raise RuntimeError("the broker has not been started")
        return int(self._listener.getsockname()[1])

    @property
    def admin_port(self) -> int | None:
        """The admin listener's port; None when it is off."""
        return self.admin.port if self.admin is not None else None

    def abort(self) -> None:
        """What `kill -9` leaves, for an in-process crash: the log files closed without flushing,
        checkpoints, producer snapshots or the clean-shutdown marker, and both listeners closed at once so
        their ports are free. The caller stops the event loop; connections drop as their tasks end."""
        if self.services is not None:
            self.services.logs.close(clean=False)
        if self._listener is not None:
            self._listener.close()
        if self.admin is not None:
            self.admin.abort()

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def _accept_forever(self, listener: socket.socket) -> None:
        """Accept connections, as Kafka's Acceptor: held at max.connections, over-limit IPs closed at once."""
        loop = asyncio.get_running_loop()
        while True:
            while len(self._connections) >= self.config.max_connections:
                # Like Kafka's Acceptor waiting for a slot: new clients wait in the listen backlog.
                self._slot_freed.clear()
                await self._slot_freed.wait()
            try:
                sock, address = await loop.sock_accept(listener)
            except OSError as exc:
                # EMFILE and friends: the process is out of descriptors; try again once some are closed.
                _log.warning("accept failed", error=str(exc))
                await asyncio.sleep(_ACCEPT_RETRY_S)
                continue
            try:
                self._admit(sock, str(address[0]))
            except OSError:
                sock.close()  # reset by the client between accept and setup; never stop accepting for it

    def _admit(self, sock: socket.socket, ip: str) -> None:
        limit = self._per_ip_limits.get(ip, self.config.max_connections_per_ip)
        if self._connections_per_ip[ip] >= limit:
            _log.info("rejected connection: too many connections from this address", peer=ip, limit=limit)
            sock.close()
            return
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._connections_per_ip[ip] += 1
        connection_id = next(self._ids)
        task = asyncio.create_task(self._serve(connection_id, sock, ip), name=f"connection-{connection_id}")
        # Registered before the task first runs, so the count the accept loop checks is never behind.
        self._connections[connection_id] = (None, task)

    async def _serve(self, connection_id: int, sock: socket.socket, ip: str) -> None:
        assert self.services is not None and self.node is not None
        loop = asyncio.get_running_loop()
        try:
            reader = asyncio.StreamReader(limit=_STREAM_LIMIT)
            protocol = asyncio.StreamReaderProtocol(reader)
            transport, _ = await loop.connect_accepted_socket(lambda: protocol, sock)
            writer = asyncio.StreamWriter(transport, protocol, reader, loop)
            connection = Connection(connection_id, reader, writer, self.node, self.services)
            task = asyncio.current_task()
            assert task is not None
            self._connections[connection_id] = (connection, task)
            await connection.run()
        except asyncio.CancelledError:
            pass  # shutdown or idle close; asyncio would otherwise log the cancelled task as an error
        except OSError:
            sock.close()  # gone before it could be set up
        finally:
            self._connections.pop(connection_id, None)
            self._connections_per_ip[ip] -= 1
            if self._connections_per_ip[ip] <= 0:
                del self._connections_per_ip[ip]
            self._slot_freed.set()

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

    async def _close_idle_connections_forever(self) -> None:
        """Close connections idle past connections.max.idle.ms; checked apart from the maintenance jobs,
        which wait log.initial.task.delay.ms before their first run."""
        idle_limit = self.config.connections_max_idle_ms / 1000
        interval = min(_IDLE_CHECK_MAX_INTERVAL_S, max(idle_limit / 4, _IDLE_CHECK_MIN_INTERVAL_S))
        while True:
            await asyncio.sleep(interval)
            self._close_idle_connections()

    def _close_idle_connections(self) -> None:
        now = self.clock.monotonic()
        idle_limit = self.config.connections_max_idle_ms / 1000
        for connection, task in list(self._connections.values()):
            if connection is not None and not connection.busy and now - connection.last_active > idle_limit:
                _log.info("closing idle connection", connection_id=connection.connection_id, peer=connection.peer,
                          idle_ms=int((now - connection.last_active) * 1000))
                task.cancel()

    async def shutdown(self) -> None:
        """Stop accepting, let in-flight requests finish (bounded), then flush and close the logs."""
        if self._accepting is not None:
            self._accepting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._accepting
        if self._listener is not None:
            self._listener.close()
        if self.admin is not None:
            await self.admin.close()
        for connection, task in list(self._connections.values()):
            if connection is None or not connection.busy:
                task.cancel()
            else:
                connection.closing = True
        pending = [task for _conn, task in self._connections.values()]
        if pending:
            _done, still_running = await asyncio.wait(pending, timeout=self.config.shutdown_timeout_ms / 1000)
            for task in still_running:
                task.cancel()
        for background in (self._maintenance, self._idle_check):
            if background is not None:
                background.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await background
        if self.services is not None:
            await self.services.groups.close()
            self.services.logs.close(clean=True)
        _log.info("broker stopped")
        self._stopped.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()
