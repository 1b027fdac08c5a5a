"""BrokerServer: binds every node's listeners, owns connections and background maintenance, shuts down cleanly.

One process serves `minikafka.nodes` nodes; each binds every listener (`listeners`, with its security
protocol from `listener.security.protocol.map`). A connection belongs to the node and listener it came
in on: its RequestContext carries that node (with the listener's address) and a Session (listener,
security protocol, principal). Stopping a node closes its sockets and connections and marks it offline
in the cluster view, so leadership moves as in a failover; starting it binds the same ports again.
"""

from __future__ import annotations

import _socket
import asyncio
import contextlib
import itertools
import math
import socket
import ssl
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import structlog
from minikafka.broker.config.config import BrokerConfig, ConfigError, Listener, served_listeners
from minikafka.broker.config.dynamic_config import DynamicConfigStore
from minikafka.broker.config.quota_file import CLIENT_QUOTAS_FILE
from minikafka.broker.control.crash_points import CrashPoints, crash_points_of
from minikafka.broker.control.faults import FaultTable, fault_table
from minikafka.broker.handlers import HANDLER_INDEX
from minikafka.broker.observe.debugging import install_debugging
from minikafka.broker.observe.metrics import BrokerMetrics
from minikafka.broker.security.session import SASL_PLAINTEXT, SASL_SSL, SSL, KafkaPrincipal, Session
from minikafka.broker.wire.cluster import ClusterView, Node
from minikafka.broker.wire.connection import Connection, RequestSlots
from minikafka.broker.wire.registry import Registry
from minikafka.broker.wire.services import BrokerServices, Lazy
from minikafka.broker.wire.waiters import AppendWaiters
from minikafka.broker.wiring import (
    forward_coordinator_logs,
    make_group_coordinator,
    make_share_coordinator,
    make_transaction_coordinator,
)
from minikafka.coordinator.internal_topics import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TRANSACTION_STATE_TOPIC
from minikafka.coordinator.producer_ids import ProducerIdManager
from minikafka.coordinator.timers import Timers
from minikafka.protocol.framing import FrameReceiver
from minikafka.storage.clock import Clock, ManualClock, SystemClock, next_periodic_run
from minikafka.storage.manager import LogManager

if TYPE_CHECKING:
    from minikafka.broker.control.admin_http import AdminListener
    from minikafka.broker.registry.service import SchemaRegistryService
    from minikafka.broker.security.acls import Authorizer
    from minikafka.broker.security.sasl_server import SaslServer
    from minikafka.broker.wire.quotas import ClientQuotas
    from minikafka.coordinator.client_metrics.manager import ClientMetricsManager
    from minikafka.coordinator.group import GroupCoordinator
    from minikafka.coordinator.share.coordinator import ShareCoordinator
    from minikafka.coordinator.transaction.coordinator import TransactionCoordinator

_log = structlog.get_logger("minikafka.server")

T = TypeVar("T")

# asyncio.start_server's default; Kafka's socket.listen.backlog.size is 50.
_LISTEN_BACKLOG = 100
# What a connection reads ahead of the request in hand before pausing (asyncio's StreamReader default).
_STREAM_LIMIT = 64 * 1024
_ACCEPT_RETRY_S = 0.1
# Coordinator loading runs this long before letting waiting requests in (time.monotonic, not the broker
# clock: a manual clock must not stall it).
_LOAD_SLICE_S = 0.005


def _family_of(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


# A client that opens a TLS listener's port and says nothing is dropped after this long (Kafka bounds the
# handshake by connections.max.idle.ms; a shorter bound keeps stalled sockets from holding slots).
_TLS_HANDSHAKE_TIMEOUT_S = 10.0


class _AcceptedSocket(socket.socket):
    """An accepted connection whose `family` and `type` read as the kernel's ints. socket.socket turns
    them into enums on every read (about 1.2 µs each), and uvloop reads them three times as it takes
    the connection over, on top of the two reads of socket.accept()."""

    __slots__ = ()
    family = _socket.socket.family  # type: ignore[assignment]
    type = _socket.socket.type  # type: ignore[assignment]


def _accept_waiting(listener: socket.socket, family: int) -> tuple[socket.socket, Any]:
    """accept(2) on the non-blocking listener: BlockingIOError when no client waits in the backlog."""
    fd, address = listener._accept()  # type: ignore[attr-defined]  # what socket.accept() wraps
    sock = _AcceptedSocket(family, socket.SOCK_STREAM, 0, fileno=fd)
    sock.setblocking(False)
    return sock, address


async def _readable(loop: asyncio.AbstractEventLoop, listener: socket.socket) -> None:
    """Until a client waits in the listener's backlog (what loop.sock_accept waits for, without taking it)."""
    waiting = loop.create_future()
    fd = listener.fileno()
    loop.add_reader(fd, _settle, waiting)
    try:
        await waiting
    finally:
        loop.remove_reader(fd)


def _settle(waiting: asyncio.Future[None]) -> None:
    if not waiting.done():  # the reader may fire again before the waiting task runs
        waiting.set_result(None)


@dataclass(slots=True)
class _Tls:
    context: ssl.SSLContext
    # The principal of an SSL listener's client (from its certificate); SASL_SSL takes the SASL one.
    principal: Callable[[ssl.SSLObject | None], KafkaPrincipal] | None


@dataclass(slots=True, eq=False)
class _NodeListener:
    """One node's socket for one listener."""

    node_id: int
    listener: Listener
    # What clients are told (advertised.listeners, or the bound address).
    endpoint: Node
    tls: _Tls | None
    # The bound port, kept while the node is stopped so it comes back on the same one.
    port: int
    sock: socket.socket | None = None
    accepting: asyncio.Task[None] | None = None


def _tls_for(config: BrokerConfig, listener: Listener) -> _Tls:
    from minikafka.broker.security.tls import (  # only TLS listeners pay for importing it
        principal_builder,
        server_context,
    )

    principal = principal_builder(config.properties, listener.name) if listener.security_protocol == SSL else None
    return _Tls(server_context(config.properties, listener.name), principal)


_AUTHORIZERS = frozenset({"org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                          "kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer"})


def _schema_registry_listener(config: BrokerConfig) -> Listener | None:
    """The listener whose security the schema registry takes (schema.registry.listener.name), if any."""
    name = config.schema_registry_listener
    if name is None or config.schema_registry_port is None:
        return None
    for listener in served_listeners(config):
        if listener.name == name:
            return listener
    raise ConfigError(f"invalid value {name!r} for configuration schema.registry.listener.name: no listener of "
                      "that name in listeners")


def _authorizer_for(config: BrokerConfig) -> Authorizer | None:
    name = config.properties.get("authorizer.class.name", "").strip()
    if not name:
        return None
    if name not in _AUTHORIZERS:
        raise ConfigError(f"invalid value {name!r} for configuration authorizer.class.name: one of "
                          f"{', '.join(sorted(_AUTHORIZERS))}, or empty")
    from minikafka.broker.security.acls import Authorizer  # a broker without ACLs does not import them

    return Authorizer(config.data_dir, config.properties.get("super.users", ""),
                      config.properties.get("allow.everyone.if.no.acl.found", "false").strip().lower() == "true")


def _client_quotas(config: BrokerConfig) -> ClientQuotas:
    """Built at start when the data dir holds quotas, else at the first quota request (AlterClientQuotas,
    DescribeClientQuotas): until then no quota is set, so nothing is measured or throttled."""
    from minikafka.broker.config.client_quotas import ClientQuotaStore
    from minikafka.broker.wire.quotas import ClientQuotas, Windows

    return ClientQuotas.over(
        ClientQuotaStore.load(config.data_dir),
        Windows(config.quota_window_num, config.quota_window_size_seconds * 1000),
        Windows(config.controller_quota_window_num, config.controller_quota_window_size_seconds * 1000))


def _wire_leadership(cluster: ClusterView, logs: LogManager, config: BrokerConfig) -> None:
    """Leader epochs live in the partition logs (stamped on batches, kept in leader-epoch-checkpoint)."""
    def stored_epoch(topic: str, partition: int) -> int:
        log = logs.partition(topic, partition)
        return log.leader_epoch if log is not None else 0

    def new_epoch(topic: str, partition: int, epoch: int) -> None:
        log = logs.partition(topic, partition)
        if log is not None:
            log.become_leader(epoch)

    cluster.stored_epoch = stored_epoch
    cluster.new_epoch = new_epoch
    cluster.all_partitions = lambda: [(meta.name, meta.partitions) for meta in logs.topics()]
    cluster.use_replication_file(config.data_dir)


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.create_server((host, port), family=_family_of(host), backlog=_LISTEN_BACKLOG)
    sock.setblocking(False)
    return sock


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


def _sasl_server(config: BrokerConfig, clock: Clock) -> SaslServer:
    from minikafka.broker.security.sasl_server import SaslServer  # a broker without SASL does not import it

    return SaslServer.from_config(config.properties, config.data_dir, clock.now_ms)


class _Loadable(Protocol):
    """A coordinator replaying its internal topic (`load_steps`), answering COORDINATOR_LOAD_IN_PROGRESS
    until `loaded`."""

    loaded: bool

    def load_steps(self) -> Iterator[None]: ...


def _reset_if_built(subsystem: Lazy[Any]) -> None:
    _if_built(subsystem, lambda built: built.reset())


def _if_built(subsystem: Lazy[T], job: Callable[[T], object]) -> None:
    """`job` on the subsystem if something has built it; a subsystem never built has nothing to do."""
    built = subsystem.built
    if built is not None:
        job(built)


def _clock_for(config: BrokerConfig) -> Clock:
    """minikafka.clock=manual: a clock starting at the wall time (so clients' CreateTime stays within
    message.timestamp.after.max.ms of it) that moves only when advanced."""
    if config.clock == "manual":
        return ManualClock(SystemClock().now_ms())
    return SystemClock()


def _client_metrics_manager(config: BrokerConfig, dynamic_configs: DynamicConfigStore,
                            clock: Clock) -> ClientMetricsManager:
    """The client metrics manager, with the subscriptions kept in the data directory (built at first use:
    the telemetry APIs, a client-metrics config resource, or the debugging tools)."""
    from minikafka.coordinator.client_metrics.manager import ClientMetricsManager

    manager = ClientMetricsManager(clock, config.telemetry_max_bytes)
    for name, properties in sorted(dynamic_configs.client_metrics.items()):
        manager.update_subscription(name, properties)
    return manager


class BrokerServer:
    def __init__(self, config: BrokerConfig, clock: Clock | None = None, *, owns_process: bool = False) -> None:
        """`owns_process`: the broker is the whole process (`minikafka serve`), so a crash point may kill it."""
        self.config = config
        self.owns_process = owns_process
        self.clock = clock or _clock_for(config)
        self._listeners: list[_NodeListener] = []
        # connection id -> (its Connection, None while being set up; the task serving it)
        self._connections: dict[int, tuple[Connection | None, asyncio.Task[None]]] = {}
        self._connection_nodes: dict[int, int] = {}
        # Kafka's request queue bound (queued.max.requests): requests in hand across every connection.
        self._request_slots = RequestSlots(config.queued_max_requests)
        self._connections_per_ip: Counter[str] = Counter()
        self._per_ip_limits: dict[str, int] = {}
        # Set whenever a connection closes, so an accept loop held at max.connections looks again.
        self._slot_freed = asyncio.Event()
        self._ids = itertools.count(1)
        # The periodic jobs and the idle-connection check, on the broker clock: a manual clock runs them
        # as `advance` passes their deadlines.
        self._maintenance = Timers(self.clock, name="maintenance")
        # The coordinators' timers: the group coordinator's sessions and offset retention, the transaction
        # coordinator's marker retries; running from the start, whichever coordinators are built.
        self._timers = Timers(self.clock)
        self._stopped = asyncio.Event()
        self._coordinator_load: asyncio.Task[None] | None = None
        # True once the coordinator load has run (or a reset made it moot): a coordinator built later on
        # its first use loads itself at once.
        self._coordinators_loaded = False
        self.services: BrokerServices | None = None
        self.node: Node | None = None
        self.admin: AdminListener | None = None
        self.schema_registry: SchemaRegistryService | None = None
        self._debugging_closers: list[Callable[[], None]] = []

    async def start(self) -> None:
        config = self.config
        _schema_registry_listener(config)  # a wrong name stops the start before anything is opened
        # Dynamic broker configs set through the admin APIs sit over the static topic defaults.
        dynamic_configs = DynamicConfigStore.load(config)
        logs = LogManager(config.data_dir, dynamic_configs.log_defaults(), self.clock, node_id=config.node_id,
                          cluster_id=config.cluster_id)
        logs.load()
        listeners = served_listeners(config)
        try:
            self._bind_all(listeners)
        except BaseException:
            logs.close(clean=True)
            raise
        self._per_ip_limits = _resolve_overrides(config.max_connections_per_ip_overrides)
        first = listeners[0].name
        cluster = ClusterView(logs.cluster_id, [nl.endpoint for nl in self._listeners if nl.listener.name == first],
                              first)
        for listener in listeners[1:]:
            cluster.add_endpoints(listener.name,
                                  [nl.endpoint for nl in self._listeners if nl.listener.name == listener.name])
        self.node = self._listeners[0].endpoint
        _wire_leadership(cluster, logs, config)
        waiters = AppendWaiters()
        forward_coordinator_logs()
        producer_ids = ProducerIdManager(config.data_dir)
        self.services = BrokerServices(
            config=config, clock=self.clock, cluster=cluster, logs=logs,
            registry=Registry(HANDLER_INDEX, config.kafka_version,
                              client_telemetry=config.client_telemetry_enabled),
            waiters=waiters, producer_ids=producer_ids, dynamic_configs=dynamic_configs,
            group_coordinator=Lazy(lambda: self._group_coordinator(logs, dynamic_configs)),
            client_metrics_manager=Lazy(lambda: _client_metrics_manager(config, dynamic_configs, self.clock)),
            client_quotas=Lazy(lambda: _client_quotas(config)),
            transaction_coordinator=Lazy(lambda: self._transaction_coordinator(logs, producer_ids, waiters)),
            share_coordinator=Lazy(lambda: self._share_coordinator(logs, waiters, dynamic_configs)),
            metrics=BrokerMetrics(), faults=FaultTable(), crash_points=CrashPoints(kills_process=self.owns_process),
        )
        self.services.sasl_server = Lazy(lambda: _sasl_server(config, self.clock))
        if "minikafka.scram.users" in config.properties or any(
                listener.security_protocol in (SASL_PLAINTEXT, SASL_SSL) for listener in listeners):
            self.services.sasl_server.get()  # a wrong SCRAM user setting stops the start
        if (config.data_dir / CLIENT_QUOTAS_FILE).exists():
            self.services.client_quotas.get()  # quotas set before the restart hold from the first request
        self.services.authorizer = _authorizer_for(config)
        self.services.node_control = self
        self.services.reset = self.reset
        self.services.metrics.open_connections = lambda: self.connection_count
        self.services.faults.resolve_topic = lambda topic_id: getattr(logs.topic_by_id(topic_id), "name", None)
        self._debugging_closers = install_debugging(self.services, config)
        self._timers.start()
        if logs.topic(OFFSETS_TOPIC) is not None:
            self.services.group_coordinator.get()  # state to replay with the other coordinators
        if logs.topic(TRANSACTION_STATE_TOPIC) is not None:
            self.services.transaction_coordinator.get()
        if logs.topic(SHARE_STATE_TOPIC) is not None:
            self.services.share_coordinator.get()
        self._schedule_maintenance()
        self._maintenance.start()
        if config.admin_port is not None:
            from minikafka.broker.control.admin_http import (
                AdminListener,  # only a broker serving the admin API pays for importing it
            )

            self.admin = AdminListener(self.services, config.admin_host, config.admin_port, config.admin_token)
            await self.admin.start()
        if config.schema_registry_port is not None:
            await self._start_schema_registry(config.schema_registry_port)
        for node_listener in self._listeners:
            self._start_accepting(node_listener)
        extra: dict[str, object] = {} if len(self._listeners) == 1 else {
            "listeners": [f"{nl.node_id}:{nl.listener.name}://{nl.listener.host}:{nl.port}" for nl in self._listeners]}
        if self.schema_registry is not None:
            extra["schema_registry_url"] = self.schema_registry.url
        _log.info("broker ready", host=config.host, port=self.bound_port, node_id=config.node_id,
                  cluster_id=logs.cluster_id, data_dir=str(config.data_dir), admin_port=self.admin_port,
                  kafka_version=config.kafka_version, **extra)
        self._coordinator_load = asyncio.create_task(self._load_coordinators(config.coordinator_load_delay_ms / 1000),
                                                     name="coordinator load")

    def _group_coordinator(self, logs: LogManager, dynamic_configs: DynamicConfigStore) -> GroupCoordinator:
        """Built at start when `__consumer_offsets` exists (the coordinator load replays it), else at the
        first group request (FindCoordinator included): with no offsets topic there is nothing to replay.
        Built before the coordinator load has run (its delay), it waits for that load, answering
        COORDINATOR_LOAD_IN_PROGRESS as a loading coordinator does; built after, it is loaded at once."""
        groups = make_group_coordinator(self.config, logs, self.clock, self._timers)
        groups.use_group_configs(dynamic_configs.group_layer)
        groups.start()
        if self._coordinators_loaded:
            groups.load()
        return groups

    def _transaction_coordinator(self, logs: LogManager, producer_ids: ProducerIdManager,
                                 waiters: AppendWaiters) -> TransactionCoordinator:
        """Built at start when `__transaction_state` exists (the coordinator load replays it), else at the
        first transactional request; loaded as `_group_coordinator` is. An idempotent producer's
        InitProducerId takes an id from `producer_ids` and builds nothing."""
        assert self.services is not None
        transactions = make_transaction_coordinator(self.config, logs, producer_ids.allocate, self.clock,
                                                    self._complete_group_transaction, self._timers, waiters)
        transactions.crash_point = self.services.crash_points.reach
        if self._coordinators_loaded:
            transactions.load()
        return transactions

    def _complete_group_transaction(self, partition: int, producer_id: int, producer_epoch: int, commit: bool,
                                    coordinator_epoch: int) -> None:
        """A transaction marker for a `__consumer_offsets` partition (the transaction had AddOffsetsToTxn,
        which built the group coordinator, or is replayed from a log where that topic exists)."""
        assert self.services is not None
        self.services.groups.complete_transaction(partition, producer_id, producer_epoch, commit, coordinator_epoch)

    def _share_coordinator(self, logs: LogManager, waiters: AppendWaiters,
                           dynamic_configs: DynamicConfigStore) -> ShareCoordinator:
        """Built at start when `__share_group_state` has state (the coordinator load replays it with the
        others), else at the first share request or share group lookup, loaded as `_group_coordinator` is."""
        shares = make_share_coordinator(self.config, logs, self.clock, waiters, dynamic_configs.group_layer)
        shares.start()
        if self._coordinators_loaded:
            for _step in shares.load_steps():
                pass
        return shares

    async def _start_schema_registry(self, port: int) -> None:
        """Replays `_schemas` before serving, so the first answer already knows every subject."""
        from minikafka.broker.registry.service import (
            SchemaRegistryService,  # only a broker serving the registry pays for importing it (fastavro)
        )

        assert self.services is not None
        services = self.services
        tls: ssl.SSLContext | None = None
        authenticate: Callable[[str, str], bool] | None = None
        listener = _schema_registry_listener(self.config)
        if listener is not None:
            if listener.security_protocol in (SSL, SASL_SSL):
                tls = _tls_for(self.config, listener).context
            sasl = services.sasl
            if listener.security_protocol in (SASL_PLAINTEXT, SASL_SSL) and sasl is not None:
                listener_name = listener.name
                authenticate = lambda user, password: sasl.verify_password(listener_name, user, password)  # noqa: E731
        self.schema_registry = SchemaRegistryService(
            services, self.config.schema_registry_host or self.config.host, port, tls, authenticate)
        await self.schema_registry.start()
        self.services.schema_registry = self.schema_registry

    @property
    def schema_registry_url(self) -> str | None:
        return self.schema_registry.url if self.schema_registry is not None else None

    # --- reset -----------------------------------------------------------------------------------

    def _reset_steps(self, services: BrokerServices) -> list[tuple[str, Callable[[], object]]]:
        """Every subsystem's reset, in the order `reset` runs them: the one place a subsystem plugs in.

        A subsystem holding state that clients or tests can change adds one line here calling its own
        `reset()`: synchronous (it runs with the others between two event-loop turns, so no request sees
        half of it), back to what a first start on an empty data directory has, its files in the data
        directory removed. The order: the test controls first (the reset's own work must not trip a
        fault rule or crash point); the coordinators before the topics they write to (they answer parked
        members and forget everything); the dynamic configs before the logs, which take the static topic
        defaults back from them; then leadership, security, the recorder; parked fetches last, so they
        answer from the state after the reset."""
        steps: list[tuple[str, Callable[[], object]]] = [
            ("fault rules", fault_table(services).clear),
            ("crash points", crash_points_of(services).clear),
            # The group coordinator's sessions and retention and the transaction coordinator's marker retries.
            ("coordinator timers", self._timers.clear),
            ("groups", lambda: _reset_if_built(services.group_coordinator)),
            ("share groups", lambda: _reset_if_built(services.share_coordinator)),
            ("transactions", lambda: _reset_if_built(services.transaction_coordinator)),
            ("dynamic configs", services.dynamic_configs.reset),
            ("client metrics", lambda: _reset_if_built(services.client_metrics_manager)),
            ("client quotas", lambda: _reset_if_built(services.client_quotas)),
        ]
        if self.schema_registry is not None:
            # Before the logs: its reset writes tombstones to `_schemas`, which the logs' reset then removes.
            steps.append(("schema registry", self.schema_registry.reset))
        steps += [
            ("logs", lambda: services.logs.reset(services.dynamic_configs.log_defaults())),
            ("cluster", services.cluster.reset),
        ]
        if services.authorizer is not None:
            steps.append(("acls", services.authorizer.reset))
        if (sasl_server := services.sasl_server) is not None:
            steps.append(("scram credentials", lambda: _reset_if_built(sasl_server)))
        if services.recorder is not None:
            steps.append(("flight recorder", services.recorder.reset))
        steps.append(("parked fetches", services.waiters.wake_all))
        return steps

    async def reset(self) -> dict[str, Any]:
        """Back to the first-start state without a restart (Broker.reset(), POST /reset): no topic (internal
        ones included: the coordinators create them again when first used, as after a first start), group,
        share group, transactional id, producer state, ACL, dynamic config, client quota, client metrics
        subscription or instance, schema registry subject, replica move, SCRAM credential beyond the
        configured ones, fault rule, crash point or recorded exchange; every stopped node started again.
        Kept: the listeners and their ports, the cluster id, the static config, the clock, the metrics, the producer id
        counter (a producer connected across the reset never shares its id with a new one), and open
        connections: their next requests are answered as a fresh broker would answer them (docs/testing.md,
        "Reset between tests"). Returns what was removed and how long the reset took."""
        services = self.services
        if services is None:
            raise RuntimeError("the broker has not been started")
        started = time.perf_counter()
        if self._coordinator_load is not None and not self._coordinator_load.done():
            # Replaying state the reset removes anyway; the coordinators' resets mark them loaded.
            self._coordinator_load.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._coordinator_load
        self._coordinators_loaded = True
        for node_id in self.node_ids:
            if not services.cluster.is_online(node_id):
                await self.start_node(node_id)
        async with services.logs.admin_lock:  # no topic is half made while it runs
            groups = services.group_coordinator.built
            transactions = services.transaction_coordinator.built
            removed = {"topics": len(services.logs.topics()),
                       "groups": len(groups.groups) + len(groups.consumer_groups) if groups is not None else 0,
                       "transactional_ids": len(transactions.txns) if transactions is not None else 0}
            failed = []
            for name, step in self._reset_steps(services):
                try:
                    step()
                except Exception:
                    # One subsystem failing (a file that cannot be removed) must not leave the others as they were.
                    _log.exception("reset step failed", step=name)
                    failed.append(name)
        if failed:
            raise RuntimeError(f"the broker reset failed in: {', '.join(failed)} (see the broker log)")
        took_ms = round((time.perf_counter() - started) * 1000, 3)
        _log.info("broker reset", took_ms=took_ms, **removed)
        return {"removed": removed, "took_ms": took_ms}

    async def _load_coordinators(self, delay_s: float) -> None:
        """Replay `__consumer_offsets`, then `__transaction_state` (completing a Prepare* writes markers to
        groups), in slices between requests, as Kafka loads coordinator partitions in the background; their
        APIs answer COORDINATOR_LOAD_IN_PROGRESS until then (broker/wire/registry.py)."""
        services = self.services
        assert services is not None
        started = time.monotonic()
        if delay_s > 0:
            await asyncio.sleep(delay_s)

        def waiting() -> list[tuple[str, _Loadable]]:
            """The coordinators built so far and not loaded, in load order: groups before transactions,
            whose replay may complete a Prepare* by writing markers to groups. Asked again after each
            load, since a request between two slices may build one on its first use."""
            built: list[tuple[str, _Loadable | None]] = [
                ("GroupCoordinator", services.group_coordinator.built),
                ("TransactionCoordinator", services.transaction_coordinator.built),
                ("ShareCoordinator", services.share_coordinator.built)]
            return [(name, coordinator) for name, coordinator in built
                    if coordinator is not None and not coordinator.loaded]

        attempted: set[str] = set()
        while pending := [(name, c) for name, c in waiting() if name not in attempted]:  # bounded: three names
            name, coordinator = pending[0]
            attempted.add(name)
            slice_end = time.monotonic() + _LOAD_SLICE_S
            try:
                for _step in coordinator.load_steps():
                    if time.monotonic() >= slice_end:
                        await asyncio.sleep(0)
                        slice_end = time.monotonic() + _LOAD_SLICE_S
            except Exception:
                _log.exception("coordinator load failed; its requests stay COORDINATOR_LOAD_IN_PROGRESS",
                               coordinator=name)
                return
        self._coordinators_loaded = True
        groups, transactions = services.group_coordinator.built, services.transaction_coordinator.built
        _log.info("coordinators loaded", groups=len(groups.groups) if groups is not None else 0,
                  transactional_ids=len(transactions.txns) if transactions is not None else 0,
                  load_ms=round((time.monotonic() - started) * 1000, 1))

    def _bind_all(self, listeners: tuple[Listener, ...]) -> None:
        """Bind every node's listeners: node i on port + i (a free port each where the port is 0)."""
        config = self.config
        tls = {listener.name: _tls_for(config, listener) for listener in listeners
               if listener.security_protocol in (SSL, SASL_SSL)}
        try:
            for index in range(config.nodes):
                node_id = config.node_id + index
                for position, listener in enumerate(listeners):
                    sock = _bind(listener.host, listener.port + index if listener.port else 0)
                    port = int(sock.getsockname()[1])
                    advertised = config.advertised_listeners.get(listener.name)
                    if position == 0 and (config.advertised_host or config.advertised_port):
                        host = config.advertised_host or listener.host
                        advertised_port = config.advertised_port + index if config.advertised_port else port
                    elif advertised is not None:
                        host, advertised_port = advertised.host, advertised.port + index if advertised.port else port
                    else:
                        host, advertised_port = listener.host, port
                    self._listeners.append(_NodeListener(node_id, listener, Node(node_id, host, advertised_port),
                                                         tls.get(listener.name), port, sock))
        except BaseException:
            for node_listener in self._listeners:
                if node_listener.sock is not None:
                    node_listener.sock.close()
            self._listeners.clear()
            raise

    def _start_accepting(self, node_listener: _NodeListener) -> None:
        assert node_listener.sock is not None
        node_listener.accepting = asyncio.create_task(
            self._accept_forever(node_listener),
            name=f"accept-{node_listener.node_id}-{node_listener.listener.name}")

    @property
    def bound_port(self) -> int:
        """The port the first node's first listener is bound to (the one `port=0` picked), whatever is advertised."""
        if not self._listeners:
            raise RuntimeError("the broker has not been started")
        return self._listeners[0].port

    def port_of(self, node_id: int, listener_name: str | None = None) -> int:
        """A node's bound port on a listener (the first listener by default)."""
        for node_listener in self._listeners:
            if node_listener.node_id == node_id and listener_name in (None, node_listener.listener.name):
                return node_listener.port
        raise KeyError((node_id, listener_name))

    @property
    def node_ids(self) -> list[int]:
        return sorted({node_listener.node_id for node_listener in self._listeners})

    async def stop_node(self, node_id: int) -> None:
        """What a broker failure looks like to clients: the node's ports refuse, its connections drop, and
        it leaves the cluster view so its leaderships and coordinators move to the nodes still up."""
        assert self.services is not None
        if node_id not in self.node_ids:
            raise KeyError(node_id)
        for node_listener in self._listeners:
            if node_listener.node_id == node_id:
                await self._stop_accepting(node_listener)
        self.services.cluster.set_online(node_id, False)
        tasks = [task for connection_id, (_conn, task) in list(self._connections.items())
                 if self._connection_nodes.get(connection_id) == node_id]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=self.config.shutdown_timeout_ms / 1000)
        _log.info("node stopped", node_id=node_id)

    async def start_node(self, node_id: int) -> None:
        """Bring a stopped node back on the ports it had."""
        assert self.services is not None
        if node_id not in self.node_ids:
            raise KeyError(node_id)
        for node_listener in self._listeners:
            if node_listener.node_id == node_id and node_listener.sock is None:
                node_listener.sock = _bind(node_listener.listener.host, node_listener.port)
                self._start_accepting(node_listener)
        self.services.cluster.set_online(node_id, True)
        _log.info("node started", node_id=node_id)

    async def _stop_accepting(self, node_listener: _NodeListener) -> None:
        if node_listener.accepting is not None:
            node_listener.accepting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await node_listener.accepting
            node_listener.accepting = None
        if node_listener.sock is not None:
            node_listener.sock.close()
            node_listener.sock = None

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
        for node_listener in self._listeners:
            if node_listener.sock is not None:
                node_listener.sock.close()
        if self.admin is not None:
            self.admin.abort()
        if self.schema_registry is not None:
            self.schema_registry.abort()

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def _accept_forever(self, node_listener: _NodeListener) -> None:
        """Accept connections, as Kafka's Acceptor: held at max.connections, over-limit IPs closed at once.

        Clients already waiting in the backlog are all taken in one turn of the loop (a burst of
        connections, as a test suite's clients make); only an empty backlog waits for the next."""
        loop = asyncio.get_running_loop()
        listener = node_listener.sock
        assert listener is not None
        family = listener.family
        while True:
            while len(self._connections) >= self.config.max_connections:
                # Like Kafka's Acceptor waiting for a slot: new clients wait in the listen backlog.
                self._slot_freed.clear()
                await self._slot_freed.wait()
            try:
                sock, address = _accept_waiting(listener, family)
            except (BlockingIOError, InterruptedError):
                await _readable(loop, listener)
                continue
            except ConnectionAbortedError:
                continue  # gone from the backlog before it was taken; the next one may be there
            except OSError as exc:
                # EMFILE and friends: the process is out of descriptors; try again once some are closed.
                _log.warning("accept failed", error=str(exc))
                await asyncio.sleep(_ACCEPT_RETRY_S)
                continue
            self._admit_accepted(sock, address, node_listener)

    def _admit_accepted(self, sock: socket.socket, address: tuple[str, int], node_listener: _NodeListener) -> None:
        try:
            self._admit(sock, str(address[0]), node_listener)
        except OSError:
            sock.close()  # reset by the client between accept and setup; never stop accepting for it

    def _admit(self, sock: socket.socket, ip: str, node_listener: _NodeListener) -> None:
        assert self.services is not None
        quotas = self.services.client_quotas.built  # none built: no quota set
        throttle_ms = quotas.connection.throttle_ms(ip, self.clock.now_ms()) if quotas is not None else 0
        if throttle_ms:
            # Kafka's Acceptor keeps a throttled socket unread and closes it when the throttle time is over.
            _log.info("throttled connection: over the connection_creation_rate of its address", peer=ip,
                      throttle_ms=throttle_ms)
            asyncio.get_running_loop().call_later(throttle_ms / 1000, sock.close)
            return
        limit = self._per_ip_limits.get(ip, self.config.max_connections_per_ip)
        if self._connections_per_ip[ip] >= limit:
            _log.info("rejected connection: too many connections from this address", peer=ip, limit=limit)
            sock.close()
            return
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._connections_per_ip[ip] += 1
        connection_id = next(self._ids)
        task = asyncio.create_task(self._serve(connection_id, sock, ip, node_listener),
                                   name=f"connection-{connection_id}")
        # Registered before the task first runs, so the count the accept loop checks is never behind.
        self._connections[connection_id] = (None, task)
        self._connection_nodes[connection_id] = node_listener.node_id

    async def _serve(self, connection_id: int, sock: socket.socket, ip: str, node_listener: _NodeListener) -> None:
        assert self.services is not None
        loop = asyncio.get_running_loop()
        listener = node_listener.listener
        tls = node_listener.tls
        try:
            protocol = FrameReceiver(self.services.config.socket_request_max_bytes, limit=_STREAM_LIMIT)
            if tls is None:
                transport, _ = await loop.connect_accepted_socket(lambda: protocol, sock)
            else:
                try:
                    transport, _ = await loop.connect_accepted_socket(
                        lambda: protocol, sock, ssl=tls.context, ssl_handshake_timeout=_TLS_HANDSHAKE_TIMEOUT_S)
                except (OSError, TimeoutError) as exc:
                    # A plaintext client on a TLS port, an untrusted client certificate: Kafka logs the failed
                    # handshake and closes; nothing else is affected.
                    _log.info("TLS handshake failed; closing connection", peer=ip, listener=listener.name,
                              node_id=node_listener.node_id, error=str(exc) or type(exc).__name__)
                    sock.close()
                    return
            writer = asyncio.StreamWriter(transport, protocol.write_flow, None, loop)
            session = Session(listener.name, listener.security_protocol, ip)
            if tls is not None and tls.principal is not None:
                session.principal = tls.principal(writer.get_extra_info("ssl_object"))
            connection = Connection(connection_id, protocol, writer, node_listener.endpoint, self.services, session,
                                    self._request_slots)
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
            self._connection_nodes.pop(connection_id, None)
            self._connections_per_ip[ip] -= 1
            if self._connections_per_ip[ip] <= 0:
                del self._connections_per_ip[ip]
            self._slot_freed.set()

    def _periodic_jobs(self) -> list[tuple[str, int, int, Callable[[], object]]]:
        """(name, first delay in ms, interval in ms, job) for the background maintenance; services are looked
        up when a job runs, not when it is scheduled.

        Kafka's LogManager delays its scheduled tasks (retention, checkpoints) by log.initial.task.delay.ms,
        but its cleaner threads start with the broker and look for a cleanable log at once, then every
        log.cleaner.backoff.ms: so a compacted topic created just after start is cleaned within a backoff."""
        config = self.config

        def services() -> BrokerServices:
            assert self.services is not None
            return self.services

        delay = config.initial_task_delay_ms
        cleaner = [("log cleaner", 0, config.log_cleaner_backoff_ms,
                    lambda: services().logs.start_cleaning(config.cleaner_crash_point))]
        return [
            *(cleaner if config.log_cleaner_enable else []),
            ("retention", delay, config.retention_check_interval_ms, lambda: services().logs.run_retention()),
            ("checkpoint", delay, config.checkpoint_interval_ms, lambda: services().logs.checkpoint()),
            ("producer expiry", delay, config.producer_id_expiration_check_interval_ms,
             lambda: services().logs.remove_expired_producers(config.producer_id_expiration_ms)),
            # None built: no transactional id to time out or expire.
            ("transaction timeouts", delay, config.transaction_abort_interval_ms,
             lambda: _if_built(services().transaction_coordinator, lambda txns: txns.abort_timed_out())),
            ("transactional id expiry", delay, config.transaction_expire_interval_ms,
             lambda: _if_built(services().transaction_coordinator, lambda txns: txns.expire_idle())),
        ]

    def _schedule_maintenance(self) -> None:
        """Each periodic job on its own interval after its first delay (KafkaScheduler's fixed delay), and
        the idle-connection check apart from them, from the start."""
        now = self.clock.now_ms()
        for name, first_delay_ms, interval_ms, job in self._periodic_jobs():
            self._schedule_periodic(name, now + first_delay_ms, interval_ms, job)
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
        for node_listener in self._listeners:
            await self._stop_accepting(node_listener)
        if self.admin is not None:
            await self.admin.close()
        if self.schema_registry is not None:
            await self.schema_registry.close()
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
            if (groups := self.services.group_coordinator.built) is not None:
                await groups.close()
            await self._timers.close()
            if (shares := self.services.share_coordinator.built) is not None:
                await shares.close()
            self.services.logs.close(clean=True)
        for close in self._debugging_closers:
            close()
        _log.info("broker stopped")
        self._stopped.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()
