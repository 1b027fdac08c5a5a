"""The services a node's handlers use, wired once by the server (the composition root)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from minikafka.coordinator.group import GroupCoordinator
from minikafka.coordinator.producer_ids import ProducerIdManager
from minikafka.coordinator.transaction.coordinator import TransactionCoordinator
from minikafka.storage.clock import Clock
from minikafka.storage.manager import LogManager, TopicMeta

from .cluster import ClusterView, NodeControl
from .config import BrokerConfig
from .crash_points import CrashPoints
from .dynamic_config import DynamicConfigStore
from .faults import FaultTable
from .metrics import BrokerMetrics
from .observe import Observers

if TYPE_CHECKING:
    from .recorder import FlightRecorder
    from .security.acls import Authorizer
    from .security.sasl_server import SaslServer
from .registry import Registry
from .waiters import AppendWaiters


@dataclass(slots=True)
class BrokerServices:
    config: BrokerConfig
    clock: Clock
    cluster: ClusterView
    logs: LogManager
    registry: Registry
    waiters: AppendWaiters
    groups: GroupCoordinator
    producer_ids: ProducerIdManager
    transactions: TransactionCoordinator
    # Dynamic broker and group configs (IncrementalAlterConfigs/AlterConfigs), kept in the data dir.
    dynamic_configs: DynamicConfigStore
    metrics: BrokerMetrics = field(default_factory=BrokerMetrics)
    faults: FaultTable = field(default_factory=FaultTable)
    crash_points: CrashPoints = field(default_factory=CrashPoints)
    observers: Observers = field(default_factory=Observers)
    # The flight recorder's ring of recent exchanges (broker/debugging.py); None when turned off.
    recorder: FlightRecorder | None = None
    # SASL mechanisms, users and SCRAM credentials (broker/security/sasl_server.py).
    sasl: SaslServer | None = None
    # ACLs (broker/security/acls.py); None without `authorizer.class.name`: nothing is checked.
    authorizer: Authorizer | None = None
    # Stopping and starting nodes (the server), for the control plane.
    node_control: NodeControl | None = None

    def auto_create_topic(self, name: str) -> TopicMeta | None:
        """Create `name` with the broker defaults if auto-creation is on; None otherwise."""
        if not self.config.auto_create_topics:
            return None
        existing = self.logs.topic(name)
        if existing is not None:
            return existing
        return self.logs.create_topic(name, self.config.num_partitions)
