"""The services a node's handlers use, wired once by the server (the composition root)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from minikafka.broker.config.config import BrokerConfig
from minikafka.broker.config.dynamic_config import DynamicConfigStore
from minikafka.broker.wire.cluster import ClusterView, NodeControl
from minikafka.broker.wire.hooks import (
    Counters,
    CrashPointSwitch,
    FaultRules,
    Observers,
    Recorder,
    SchemaRegistryControl,
)
from minikafka.broker.wire.registry import Registry
from minikafka.broker.wire.waiters import AppendWaiters
from minikafka.coordinator.producer_ids import ProducerIdManager
from minikafka.storage.clock import Clock
from minikafka.storage.manager import LogManager, TopicMeta

if TYPE_CHECKING:
    from minikafka.broker.security.acls import Authorizer
    from minikafka.broker.security.sasl_server import SaslServer
    from minikafka.broker.wire.quotas import ClientQuotas
    from minikafka.coordinator.client_metrics.manager import ClientMetricsManager
    from minikafka.coordinator.group import GroupCoordinator
    from minikafka.coordinator.share.coordinator import ShareCoordinator
    from minikafka.coordinator.share.group import ShareGroup
    from minikafka.coordinator.transaction.coordinator import TransactionCoordinator

T = TypeVar("T")


class Lazy(Generic[T]):
    """A subsystem built at its first use: one that most brokers never use (share groups, client telemetry),
    or that a start need not have (the group and transaction coordinators), is neither imported nor built
    by every start."""

    __slots__ = ("_build", "_built")

    def __init__(self, build: Callable[[], T]) -> None:
        self._build = build
        self._built: T | None = None

    def get(self) -> T:
        if self._built is None:
            self._built = self._build()
        return self._built

    @property
    def built(self) -> T | None:
        """The subsystem if something has used it; None otherwise (for those who only look)."""
        return self._built


@dataclass(slots=True)
class BrokerServices:
    config: BrokerConfig
    clock: Clock
    cluster: ClusterView
    logs: LogManager
    registry: Registry
    waiters: AppendWaiters
    # The group coordinator (classic and KIP-848 groups, offsets): built at the first group request, or at
    # start when `__consumer_offsets` exists (the server's `_group_coordinator`); `groups` builds it.
    group_coordinator: Lazy[GroupCoordinator]
    producer_ids: ProducerIdManager
    # Transactional ids and their transactions: built at the first transactional request (an idempotent
    # producer's InitProducerId needs only `producer_ids`), or at start when `__transaction_state` exists
    # (the server's `_transaction_coordinator`); `transactions` builds it.
    transaction_coordinator: Lazy[TransactionCoordinator]
    # Share groups (KIP-932) and their share-partitions: built at first use, or at start when
    # `__share_group_state` has state to replay (the server's `_share_coordinator`).
    share_coordinator: Lazy[ShareCoordinator]
    # Dynamic broker and group configs (IncrementalAlterConfigs/AlterConfigs), kept in the data dir.
    dynamic_configs: DynamicConfigStore
    # Client metrics subscriptions and the client instances pushing telemetry (KIP-714): built at first use.
    client_metrics_manager: Lazy[ClientMetricsManager]
    # Client quotas (AlterClientQuotas) and their enforcement, kept in the data dir: built at the first quota
    # request, or at start when the data dir holds quotas (the server's `_client_quotas`); `quotas` builds
    # it. Not built, no quota is set: requests and connections are not measured.
    client_quotas: Lazy[ClientQuotas]
    # The hooks' implementations (broker/observe/metrics.py, broker/control/faults.py and crash_points.py),
    # plugged in by the server.
    metrics: Counters
    faults: FaultRules
    crash_points: CrashPointSwitch
    observers: Observers = field(default_factory=Observers)
    # The flight recorder's ring of recent exchanges (broker/observe/debugging.py); None when turned off.
    recorder: Recorder | None = None
    # SASL mechanisms, users and SCRAM credentials (broker/security/sasl_server.py): built at start when a
    # listener speaks SASL or SCRAM users are configured, else at first use (the SCRAM credential APIs).
    sasl_server: Lazy[SaslServer] | None = None
    # ACLs (broker/security/acls.py); None without `authorizer.class.name`: nothing is checked.
    authorizer: Authorizer | None = None
    # Stopping and starting nodes (the server), for the control plane.
    node_control: NodeControl | None = None
    # The schema registry (broker/registry/), when `schema.registry.port` is set.
    schema_registry: SchemaRegistryControl | None = None
    # The broker reset (BrokerServer.reset): every subsystem back to its first-start state, for the control
    # plane's POST /reset; returns what was removed.
    reset: Callable[[], Awaitable[dict[str, Any]]] | None = None

    @property
    def groups(self) -> GroupCoordinator:
        return self.group_coordinator.get()

    @property
    def transactions(self) -> TransactionCoordinator:
        return self.transaction_coordinator.get()

    @property
    def shares(self) -> ShareCoordinator:
        return self.share_coordinator.get()

    def is_share_group(self, group_id: str) -> bool:
        """Asked by every JoinGroup and heartbeat: answered without building the share coordinator, since no
        share group exists before it is built."""
        shares = self.share_coordinator.built
        return shares is not None and shares.is_share_group(group_id)

    def share_groups(self) -> list[ShareGroup]:
        """Every share group, without building the share coordinator (ListGroups asks at every call)."""
        shares = self.share_coordinator.built
        return list(shares.groups.values()) if shares is not None else []

    @property
    def quotas(self) -> ClientQuotas:
        return self.client_quotas.get()

    @property
    def sasl(self) -> SaslServer | None:
        return self.sasl_server.get() if self.sasl_server is not None else None

    @property
    def client_metrics(self) -> ClientMetricsManager:
        return self.client_metrics_manager.get()

    def delete_topic(self, name: str) -> None:
        """Delete a topic with what hangs on it: its leadership and its groups' offsets (DeleteTopics, and the
        control plane's clean-up of one test's topic)."""
        self.logs.delete_topic(name)
        self.cluster.forget_topic(name)
        if (groups := self.group_coordinator.built) is not None:  # none built: no group, no offsets
            groups.on_topic_deleted(name)

    def auto_create_topic(self, name: str) -> TopicMeta | None:
        """Create `name` with the broker defaults if auto-creation is on; None otherwise."""
        if not self.config.auto_create_topics:
            return None
        existing = self.logs.topic(name)
        if existing is not None:
            return existing
        return self.logs.create_topic(name, self.config.num_partitions)
