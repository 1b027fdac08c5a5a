"""Handler registry: each handler module declares API_KEY and VERSIONS; ApiVersions is built from it.

The Kafka version profile (broker/config/versions.py) cuts every range to what that release served; an API
it did not have is left out. Handlers of the group and transaction coordinators answer
COORDINATOR_LOAD_IN_PROGRESS until their coordinator has replayed its topic, as Kafka's do while a
coordinator partition loads (the broker listens before that, see BrokerServer.start).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from minikafka.broker.config.versions import NEWEST, limit
from minikafka.coordinator.hashing import partition_for
from minikafka.coordinator.internal_topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from minikafka.protocol.api_keys import ApiKey, VersionRange, api_name, kio_range
from minikafka.protocol.errors import ErrorCode, KafkaError

Handler = Callable[[Any, Any], Awaitable[Any]]

# Requests Kafka sends to the group coordinator (TxnOffsetCommit included) or the transaction coordinator.
GROUP_COORDINATOR_APIS: frozenset[int] = frozenset({
    ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.JOIN_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP,
    ApiKey.SYNC_GROUP, ApiKey.DESCRIBE_GROUPS, ApiKey.LIST_GROUPS, ApiKey.DELETE_GROUPS, ApiKey.OFFSET_DELETE,
    ApiKey.TXN_OFFSET_COMMIT,
})
TRANSACTION_COORDINATOR_APIS: frozenset[int] = frozenset({
    ApiKey.INIT_PRODUCER_ID, ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN,
    ApiKey.DESCRIBE_TRANSACTIONS, ApiKey.LIST_TRANSACTIONS,
})


class DuplicateHandler(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class Route:
    api_key: int
    versions: VersionRange  # what we accept and decode
    advertised: VersionRange  # what ApiVersions says (may be wider, see Produce)
    handle: Handler
    name: str


def _coordinator_loading(api_key: int, services: Any, request: Any) -> bool:
    if api_key in GROUP_COORDINATOR_APIS:
        return not services.groups.loaded
    if api_key == ApiKey.INIT_PRODUCER_ID and request.transactional_id is None:
        return False  # an idempotent producer's id comes from the producer id block, not the coordinator
    if api_key in TRANSACTION_COORDINATOR_APIS:
        return not services.transactions.loaded
    return False


def _coordinated_elsewhere(api_key: int, ctx: Any, request: Any) -> bool:
    """With several nodes: this node does not lead the coordinator partition the request's transactional id
    (or TxnOffsetCommit's group) maps to. The group APIs check their group in their handlers."""
    services = ctx.services
    if services.cluster.sole_node_id == ctx.node.node_id:
        return False  # this node is the whole cluster and leads every partition: none to work out
    if api_key == ApiKey.TXN_OFFSET_COMMIT:
        topic, partition = OFFSETS_TOPIC, services.groups.partition_for(request.group_id)
    elif api_key in TRANSACTION_COORDINATOR_APIS and api_key != ApiKey.DESCRIBE_TRANSACTIONS:
        transactional_id = getattr(request, "transactional_id", getattr(request, "v3_and_below_transactional_id", None))
        if not isinstance(transactional_id, str):
            return False  # an idempotent producer's InitProducerId, or AddPartitionsToTxn v4+ batches
        topic = TRANSACTION_STATE_TOPIC
        partition = partition_for(transactional_id, services.config.transaction_state_log_num_partitions)
    else:
        return False
    return bool(services.cluster.leader_of(topic, partition) != ctx.node.node_id)


def _after_coordinator_load(api_key: int, handle: Handler) -> Handler:
    async def handle_when_loaded(ctx: Any, request: Any) -> Any:
        if _coordinated_elsewhere(api_key, ctx, request):
            raise KafkaError("another node is the coordinator", code=ErrorCode.not_coordinator)
        if _coordinator_loading(api_key, ctx.services, request):
            raise KafkaError("the coordinator is loading", code=ErrorCode.coordinator_load_in_progress)
        return await handle(ctx, request)

    return handle_when_loaded


# Kafka's ApiVersionManager leaves these out unless a client telemetry receiver is configured.
CLIENT_TELEMETRY_APIS: frozenset[int] = frozenset({ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY})


# What a start knows of a handler module before importing it (broker/handlers/__init__.py's HANDLER_INDEX):
# its name, API key, VERSIONS min and max, ADVERTISED_VERSIONS min and max.
IndexRow = tuple[str, int, int, int, int, int]


_HANDLERS_PACKAGE = "minikafka.broker.handlers"


class StaleHandlerIndex(RuntimeError):
    """A handler module declares other versions than its HANDLER_INDEX row."""


@functools.cache
def _served(index: tuple[IndexRow, ...], kafka_version: str, client_telemetry: bool
            ) -> tuple[dict[int, tuple[IndexRow, VersionRange, VersionRange]], dict[int, VersionRange], dict[int, str]]:
    """What a registry built from `index` serves (computed once per process: a fork server's children find it
    computed); copies, since each registry resolves its own routes."""
    registry = Registry(list(index), kafka_version, client_telemetry=client_telemetry)
    return registry._pending, registry._advertised, registry._names


def _served_copy(index: tuple[IndexRow, ...], kafka_version: str, client_telemetry: bool
                 ) -> tuple[dict[int, tuple[IndexRow, VersionRange, VersionRange]], dict[int, VersionRange],
                            dict[int, str]]:
    pending, advertised, names = _served(index, kafka_version, client_telemetry)
    return dict(pending), dict(advertised), dict(names)


def index_row(module: ModuleType) -> IndexRow:
    versions: VersionRange = module.VERSIONS
    advertised: VersionRange = getattr(module, "ADVERTISED_VERSIONS", versions)
    return (module.__name__.rpartition(".")[2], int(module.API_KEY), versions.min, versions.max,
            advertised.min, advertised.max)


class Registry:
    """The routes of one broker, by API key.

    Built from the handler index, a start imports no handler module: each is imported at its API's first
    request, and its route is then kept (the request path looks a route up with one dict lookup)."""

    def __init__(self, index: Iterable[IndexRow] = (), kafka_version: str = NEWEST, *,
                 client_telemetry: bool = True) -> None:
        """`client_telemetry` False leaves the telemetry APIs out, as a Kafka broker without a receiver does
        (the broker's `minikafka.client.telemetry.enabled`)."""
        self.kafka_version = kafka_version
        self.client_telemetry = client_telemetry
        self._routes: dict[int, Route] = {}
        # Served APIs whose module is not imported yet: key -> (index row, served range, advertised range).
        self._pending: dict[int, tuple[IndexRow, VersionRange, VersionRange]] = {}
        self._advertised: dict[int, VersionRange] = {}
        self._names: dict[int, str] = {}
        if isinstance(index, tuple):  # the handler index: the same work for every broker of this version
            self._pending, self._advertised, self._names = _served_copy(index, kafka_version, client_telemetry)
            return
        for row in index:
            self._add(row)

    @classmethod
    def from_modules(cls, modules: Iterable[ModuleType], kafka_version: str = NEWEST, *,
                     client_telemetry: bool = True) -> Registry:
        """A registry of already imported modules (tests, and handlers outside the package)."""
        registry = cls(kafka_version=kafka_version, client_telemetry=client_telemetry)
        for module in modules:
            if registry._add(index_row(module)):
                registry._resolve(int(module.API_KEY), module)
        return registry

    def _add(self, row: IndexRow) -> bool:
        name, key, low, high, advertised_low, advertised_high = row
        if key in CLIENT_TELEMETRY_APIS and not self.client_telemetry:
            return False
        if key in self._names:
            raise DuplicateHandler(f"two handlers for {api_name(key)}: {self._names[key]}, {name}")
        self._names[key] = name
        parseable = kio_range(key)
        if low < parseable.min or high > parseable.max:
            raise ValueError(f"{name} declares {VersionRange(low, high)} but kio parses {parseable}")
        served = limit(key, VersionRange(low, high), self.kafka_version)
        advertised = limit(key, VersionRange(advertised_low, advertised_high), self.kafka_version)
        if served is None or advertised is None:
            return False  # that Kafka release had no such API, or none of the versions we implement
        self._pending[key] = (row, served, advertised)
        self._advertised[key] = advertised
        return True

    def _resolve(self, key: int, module: ModuleType | None = None) -> Route:
        row, served, advertised = self._pending[key]  # kept until resolved: a failed import fails each request
        if module is None:
            module = importlib.import_module(f"{_HANDLERS_PACKAGE}.{row[0]}")
        if index_row(module) != row:
            raise StaleHandlerIndex(f"{module.__name__} declares {index_row(module)}, its index row says {row}")
        handle = module.handle
        if key in GROUP_COORDINATOR_APIS or key in TRANSACTION_COORDINATOR_APIS:
            handle = _after_coordinator_load(key, handle)
        route = self._routes[key] = Route(key, served, advertised, handle, module.__name__)
        del self._pending[key]
        return route

    def route(self, api_key: int) -> Route | None:
        route = self._routes.get(api_key)
        if route is None and api_key in self._pending:
            route = self._resolve(api_key)
        return route

    def api_versions(self) -> list[tuple[int, int, int]]:
        return sorted((key, advertised.min, advertised.max) for key, advertised in self._advertised.items())
