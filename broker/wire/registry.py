"""Handler registry: each handler module declares API_KEY and VERSIONS; ApiVersions is built from it.

The Kafka version profile (broker/config/versions.py) cuts every range to what that release served; an API
it did not have is left out. Handlers of the group and transaction coordinators answer
COORDINATOR_LOAD_IN_PROGRESS until their coordinator has replayed its topic, as Kafka's do while a
coordinator partition loads (the broker listens before that, see BrokerServer.start).
"""

from __future__ import annotations

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


class Registry:
    def __init__(self, modules: Iterable[ModuleType] = (), kafka_version: str = NEWEST, *,
                 client_telemetry: bool = True) -> None:
        """`client_telemetry` False leaves the telemetry APIs out, as a Kafka broker without a receiver does
        (the broker's `minikafka.client.telemetry.enabled`)."""
        self.kafka_version = kafka_version
        self.client_telemetry = client_telemetry
        self._routes: dict[int, Route] = {}
        for module in modules:
            self.register(module)

    def register(self, module: ModuleType) -> None:
        key = int(module.API_KEY)
        if key in CLIENT_TELEMETRY_APIS and not self.client_telemetry:
            return
        if key in self._routes:
            raise DuplicateHandler(f"two handlers for {api_name(key)}: {self._routes[key].name}, {module.__name__}")
        versions: VersionRange = module.VERSIONS
        parseable = kio_range(key)
        if versions.min < parseable.min or versions.max > parseable.max:
            raise ValueError(f"{module.__name__} declares {versions} but kio parses {parseable}")
        served = limit(key, versions, self.kafka_version)
        advertised = limit(key, getattr(module, "ADVERTISED_VERSIONS", versions), self.kafka_version)
        if served is None or advertised is None:
            return  # that Kafka release had no such API, or none of the versions we implement
        handle = module.handle
        if key in GROUP_COORDINATOR_APIS or key in TRANSACTION_COORDINATOR_APIS:
            handle = _after_coordinator_load(key, handle)
        self._routes[key] = Route(key, served, advertised, handle, module.__name__)

    def route(self, api_key: int) -> Route | None:
        return self._routes.get(api_key)

    def api_versions(self) -> list[tuple[int, int, int]]:
        return sorted((r.api_key, r.advertised.min, r.advertised.max) for r in self._routes.values())
