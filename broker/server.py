"""BrokerServer: binds the listener, owns connections and background maintenance, shuts down cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import socket
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import structlog
from minikafka.coordinator.producer_ids import ProducerIdManager
from minikafka.coordinator.timers import Timers
from minikafka.storage.clock import Clock, ManualClock, SystemClock, next_periodic_run
from minikafka.storage.manager import LogManager

from .cluster import ClusterView, Node
from .config import BrokerConfig
from .connection import Connection
from .debugging import install_debugging
from .dynamic_config import DynamicConfigStore
from .groups import make_group_coordinator
from .handlers import all_handler_modules
from .registry import Registry
from .security.session import plaintext_session
from .services import BrokerServices
from .transactions import make_transaction_coordinator
from .waiters import AppendWaiters

if TYPE_CHECKING:
    from .admin_http import AdminListener

_log = structlog.get_logger("minikafka.server")

# asyncio.start_server's default; Kafka's socket.listen.backlog.size is 50.
_LISTEN_BACKLOG = 100
# asyncio's StreamReader default: what a connection buffers from the socket before pausing reading.
_STREAM_LIMIT = 64 * 1024
_ACCEPT_RETRY_S = 0.1
# Coordinator loading runs this long before letting waiting requests in (time.monotonic, not the broker
# clock: a manual clock must not stall it).
_LOAD_SLICE_S = 0.005


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


def _clock_for(config: BrokerConfig) -> Clock:
    """minikafka.clock=manual: a clock starting at the wall time (so clients' CreateTime stays within
    message.timestamp.after.max.ms of it) that moves only when advanced."""
    if config.clock == "manual":
        return ManualClock(SystemClock().now_ms())
    return SystemClock()


class BrokerServer:
    def __init__(self, config: BrokerConfig, clock: Clock | None = None, *, owns_process: bool = False) -> None:
        """`owns_process`: the broker is the whole process (`minikafka serve`), so a crash point may kill it."""
        self.config = config
        self.owns_process = owns_process
        self.clock = clock or _clock_for(config)
        self._listener: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        # connection id -> (its Connection, None while being set up; the task serving it)
        self._connections: dict[int, tuple[Connection | None, asyncio.Task[None]]] = {}
        self._connections_per_ip: Counter[str] = Counter()
        self._per_ip_limits: dict[str, int] = {}
        # Set whenever a connection closes, so an accept loop held at max.connections looks again.
        self._slot_freed = asyncio.Event()
        self._ids = itertools.count(1)
        # The periodic jobs and the idle-connection check, on the broker clock: a manual clock runs them
        # as `advance` passes their deadlines.
        self._maintenance = Timers(self.clock, name="maintenance")
        self._stopped = asyncio.Event()
        self._coordinator_load: asyncio.Task[None] | None = None
        self.services: BrokerServices | None = None
        self.node: Node | None = None
        self.admin: AdminListener | None = None
        self._debugging_closers: list[Callable[[], None]] = []

    async def start(self) -> None:
        config = self.config
        # Dynamic broker configs set through the admin APIs sit over the static topic defaults.
        dynamic_configs = DynamicConfigStore.load(config)
        logs = LogManager(config.data_dir, dynamic_configs.log_defaults(), self.clock, node_id=config.node_id,
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
        groups.use_group_configs(dynamic_configs.group_layer)
        producer_ids = ProducerIdManager(config.data_dir)
        self.services = BrokerServices(
            config=config, clock=self.clock, cluster=cluster, logs=logs,
            registry=Registry(all_handler_modules(), config.kafka_version), waiters=waiters, groups=groups,
            producer_ids=producer_ids, dynamic_configs=dynamic_configs,
            transactions=make_transaction_coordinator(config, logs, producer_ids.allocate, self.clock, groups,
                                                      waiters),
        )
        self.services.crash_points.kills_process = self.owns_process
        self.services.metrics.open_connections = lambda: self.connection_count
        self.services.transactions.crash_point = self.services.crash_points.reach
        self.services.faults.resolve_topic = lambda topic_id: getattr(logs.topic_by_id(topic_id), "name", None)
        self._debugging_closers = install_debugging(self.services, config)
        self.services.groups.start()
        self._schedule_maintenance()
        self._maintenance.start()
        if config.admin_port is not None:
            from .admin_http import AdminListener  # only a broker serving the admin API pays for importing it

            self.admin = AdminListener(self.services, config.admin_host, config.admin_port)
            await self.admin.start()
        self._accepting = asyncio.create_task(self._accept_forever(self._listener), name="accept")
        _log.info("broker ready", host=config.host, port=bound_port, node_id=config.node_id,
                  cluster_id=logs.cluster_id, data_dir=str(config.data_dir), admin_port=self.admin_port,
                  kafka_version=config.kafka_version)
        self._coordinator_load = asyncio.create_task(self._load_coordinators(config.coordinator_load_delay_ms / 1000),
                                                     name="coordinator load")

    async def _load_coordinators(self, delay_s: float) -> None:
        """Replay `__consumer_offsets`, then `__transaction_state` (completing a Prepare* writes markers to
        groups), in slices between requests, as Kafka loads coordinator partitions in the background; their
        APIs answer COORDINATOR_LOAD_IN_PROGRESS until then (broker/registry.py)."""
        assert self.services is not None
        started = time.monotonic()
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        for coordinator in (self.services.groups, self.services.transactions):
            slice_end = time.monotonic() + _LOAD_SLICE_S
            try:
                for _step in coordinator.load_steps():
                    if time.monotonic() >= slice_end:
                        await asyncio.sleep(0)
                        slice_end = time.monotonic() + _LOAD_SLICE_S
            except Exception:
                _log.exception("coordinator load failed; its requests stay COORDINATOR_LOAD_IN_PROGRESS",
                               coordinator=type(coordinator).__name__)
                return
        _log.info("coordinators loaded", groups=len(self.services.groups.groups),
                  transactional_ids=len(self.services.transactions.txns),
                  load_ms=round((time.monotonic() - started) * 1000, 1))

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
            connection = Connection(connection_id, reader, writer, self.node, self.services, plaintext_session(ip))
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

    def _periodic_jobs(self) -> list[tuple[str, int, Callable[[], object]]]:
        """(name, interval in ms, job) for the background maintenance; services are looked up when a job
        runs, not when it is scheduled."""
        config = self.config

        def services() -> BrokerServices:
            assert self.services is not None
            return self.services

        cleaner = [("log cleaner", config.log_cleaner_backoff_ms,
                    lambda: services().logs.start_cleaning(config.cleaner_crash_point))]
        return [
            *(cleaner if config.log_cleaner_enable else []),
            ("retention", config.retention_check_interval_ms, lambda: services().logs.run_retention()),
            ("checkpoint", config.checkpoint_interval_ms, lambda: services().logs.checkpoint()),
            ("producer expiry", config.producer_id_expiration_check_interval_ms,
             lambda: services().logs.remove_expired_producers(config.producer_id_expiration_ms)),
            ("transaction timeouts", config.transaction_abort_interval_ms,
             lambda: services().transactions.abort_timed_out()),
            ("transactional id expiry", config.transaction_expire_interval_ms,
             lambda: services().transactions.expire_idle()),
        ]

    def _schedule_maintenance(self) -> None:
        """Each periodic job on its own interval after Kafka's initial task delay (KafkaScheduler's fixed
        delay), and the idle-connection check apart from them, from the start."""
        now = self.clock.now_ms()
        for name, interval_ms, job in self._periodic_jobs():
            self._schedule_periodic(name, now + self.config.initial_task_delay_ms, interval_ms, job)
        self._maintenance.schedule("idle connections", now + self.config.connections_max_idle_ms,
                                   self._check_idle_connections)

    def _schedule_periodic(self, name: str, first_ms: int, interval_ms: int, job: Callable[[], object]) -> None:
        def run() -> None:
            try:
                job()
            except Exception:
                _log.exception("maintenance job failed", job=name)
            self._maintenance.schedule(name, next_periodic_run(self.clock, interval_ms), run)

        self._maintenance.schedule(name, first_ms, run)

    def _check_idle_connections(self) -> None:
        """Close what is idle past connections.max.idle.ms (Kafka closes when strictly past it), then
        check again when the next connection could be: a connection that is busy now or opens later
        cannot be idle before a whole limit from now, so no connection is closed late and, on a manual
        clock, an advance takes one step per closing rather than one per polling interval."""
        limit_ms = self.config.connections_max_idle_ms
        try:
            next_due_in_s = self._close_idle_connections()
        except Exception:
            _log.exception("maintenance job failed", job="idle connections")
            next_due_in_s = limit_ms / 1000
        if next_due_in_s is None:
            # No connection left to watch, and none can open while a manual clock is being advanced.
            next_ms = next_periodic_run(self.clock, limit_ms)
        else:
            # +1: the first millisecond at which that connection is strictly past the limit.
            next_ms = self.clock.now_ms() + max(0, math.ceil(next_due_in_s * 1000)) + 1
        self._maintenance.schedule("idle connections", next_ms, self._check_idle_connections)

    def _close_idle_connections(self) -> float | None:
        """Close idle connections; returns seconds until the next one still open may reach the limit (at
        most one whole limit), None when no connection is left open."""
        now = self.clock.monotonic()
        idle_limit = self.config.connections_max_idle_ms / 1000
        next_due_in: float | None = None
        for connection, task in list(self._connections.values()):
            if connection is None or connection.busy:
                # Not idle now; a whole limit from now at the earliest.
                next_due_in = idle_limit if next_due_in is None else next_due_in
                continue
            idle = now - connection.last_active
            if idle > idle_limit:
                _log.info("closing idle connection", connection_id=connection.connection_id, peer=connection.peer,
                          idle_ms=int(idle * 1000))
                task.cancel()
            else:
                next_due_in = min(idle_limit if next_due_in is None else next_due_in, idle_limit - idle)
        return next_due_in

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
        if self.services is not None:
            self.services.waiters.close()  # parked fetches answer now instead of at their max wait
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
        await self._maintenance.close()
        if self._coordinator_load is not None:
            self._coordinator_load.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._coordinator_load
        if self.services is not None:
            await self.services.groups.close()
            self.services.logs.close(clean=True)
        for close in self._debugging_closers:
            close()
        _log.info("broker stopped")
        self._stopped.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()
