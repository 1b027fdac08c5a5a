"""Which nodes exist, where clients reach them, which are up, and which node leads what.

One process presents `minikafka.nodes` nodes, each with every listener on its own port. Nothing in
the broker assumes "this broker": handlers ask the cluster view who leads a partition or a
coordinator key, and pass node identity explicitly. A node's address depends on the listener a client
came in on (Kafka answers Metadata with the brokers' endpoints on the request's listener).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from minikafka.coordinator.internal_topics import INTERNAL_TOPICS
from minikafka.storage.checkpoint import write_atomically

REPLICATION_FILE = "replication-factors.json"
# offsets.topic.replication.factor and transaction.state.log.replication.factor default to 3 in Kafka.
INTERNAL_REPLICATION_FACTOR = 3
NO_LEADER = -1
# Values derived from the leadership `ClusterView.derived` keeps; past this many it starts afresh.
DERIVED_LIMIT = 10_000

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Node:
    node_id: int
    host: str
    port: int
    rack: str | None = None


class NodeControl(Protocol):
    """Stopping and starting nodes: the server's (it owns the sockets), reached by the control plane."""

    async def stop_node(self, node_id: int) -> None: ...

    async def start_node(self, node_id: int) -> None: ...


@dataclass(slots=True)
class PartitionLeadership:
    replicas: tuple[int, ...]
    leader: int  # NO_LEADER while none of its replicas is online
    leader_epoch: int
    isr: tuple[int, ...]


class ClusterView:
    def __init__(self, cluster_id: str, nodes: list[Node], listener_name: str = "PLAINTEXT") -> None:
        """`nodes`: every node's endpoint on `listener_name`, the first listener; add_endpoints adds the others."""
        if not nodes:
            raise ValueError("a cluster has at least one node")
        self.cluster_id = cluster_id
        self.default_listener = listener_name
        self._nodes = {node.node_id: node for node in nodes}
        self._endpoints: dict[str, dict[int, Node]] = {listener_name: self._nodes}
        self._offline: set[int] = set()
        # Called with (node id, online) after a node stops or starts, so leadership can move.
        self.node_changes: list[Callable[[int, bool], None]] = []
        self._partitions: dict[tuple[str, int], PartitionLeadership] = {}
        self._replication: dict[str, int] = {}
        self._replication_file: Path | None = None
        # The partition's current leader epoch in storage, and the hook that starts a new one there.
        self.stored_epoch: Callable[[str, int], int] = lambda _topic, _partition: 0
        self.new_epoch: Callable[[str, int, int], None] = lambda _topic, _partition, _epoch: None
        # Every partition that exists, as (topic, partition count): what a node change re-elects.
        self.all_partitions: Callable[[], Iterable[tuple[str, int]]] = lambda: ()
        self._derived: dict[Any, tuple[Any, Callable[[Any], None] | None]] = {}

    @property
    def nodes(self) -> list[Node]:
        """Every node, up or not, on the first listener."""
        return list(self._nodes.values())

    def add_endpoints(self, listener_name: str, nodes: list[Node]) -> None:
        self._endpoints[listener_name] = {node.node_id: node for node in nodes}

    def nodes_on(self, listener_name: str) -> list[Node]:
        """The online nodes' endpoints on a listener: what Metadata lists as brokers."""
        endpoints = self._endpoints.get(listener_name, self._nodes)
        return [node for node_id, node in endpoints.items() if node_id not in self._offline]

    def endpoint(self, listener_name: str, node_id: int) -> Node:
        return self._endpoints.get(listener_name, self._nodes)[node_id]

    @property
    def sole_node_id(self) -> int | None:
        """The node id when the cluster is one node and it is online (it then leads every partition);
        None otherwise."""
        if len(self._nodes) == 1 and not self._offline:
            return next(iter(self._nodes))
        return None

    def is_online(self, node_id: int) -> bool:
        return node_id in self._nodes and node_id not in self._offline

    @property
    def online_ids(self) -> list[int]:
        return sorted(node_id for node_id in self._nodes if node_id not in self._offline)

    def set_online(self, node_id: int, online: bool) -> None:
        if node_id not in self._nodes:
            raise KeyError(node_id)
        if online == (node_id not in self._offline):
            return
        if online:
            self._offline.discard(node_id)
        else:
            self._offline.add(node_id)
        self._reelect()
        for notify in list(self.node_changes):
            notify(node_id, online)

    def node(self, node_id: int) -> Node:
        return self._nodes[node_id]

    @property
    def controller_id(self) -> int:
        """The lowest online node (any node when all are down): the one process is the quorum, so the
        controller is whichever node a client can still reach."""
        return min(self.online_ids or self._nodes)

    # --- leadership ----------------------------------------------------------------------------
    # Replicas are assigned round-robin from the partition index, as Kafka spreads them; data is stored
    # once, so every replica is always in sync and the ISR is the replicas that are online. The first
    # replica is the preferred leader; a leader that stops hands over to the next online replica with
    # the leader epoch bumped, as a controller's election does.

    def derived(self, key: Any, derive: Callable[[], T], release: Callable[[T], None] | None = None) -> T:
        """`derive()`, kept under `key` until any partition's leadership, replicas or ISR next change, or a
        node stops or starts; `release(value)` when it is dropped. For what is worked out from the leadership
        of many partitions and asked for again and again (Metadata's topic entries): `key` names every other
        input it depends on."""
        kept = self._derived.get(key)
        if kept is not None:
            return kept[0]  # type: ignore[no-any-return]
        value = derive()
        if len(self._derived) >= DERIVED_LIMIT:
            self._drop_derived()
        self._derived[key] = (value, release)
        return value

    def _drop_derived(self) -> None:
        dropped, self._derived = self._derived, {}
        for value, release in dropped.values():
            if release is not None:
                release(value)

    def use_replication_file(self, data_dir: Path) -> None:
        """Keep topics' replication factors in the data directory (Kafka: the metadata log)."""
        self._replication_file = data_dir / REPLICATION_FILE
        if self._replication_file.exists():
            self._replication = {str(k): int(v) for k, v in json.loads(self._replication_file.read_text()).items()}
        self._drop_derived()

    def reset(self) -> None:
        """A broker reset: no partition leadership or replication factor kept (the topics are gone). Nodes a
        test stopped are started again by the server, which owns their sockets."""
        self._partitions.clear()
        self._replication.clear()
        if self._replication_file is not None:
            self._replication_file.unlink(missing_ok=True)
        self._drop_derived()

    def set_replication_factor(self, topic: str, factor: int) -> None:
        self._replication[topic] = factor
        self.forget_topic(topic, keep_replication=True)
        self._save_replication()

    def replication_factor(self, topic: str) -> int:
        default = INTERNAL_REPLICATION_FACTOR if topic in INTERNAL_TOPICS else 1
        return max(1, min(self._replication.get(topic, default), len(self._nodes)))

    def forget_topic(self, topic: str, *, keep_replication: bool = False) -> None:
        """A deleted (or re-created) topic's partitions start afresh."""
        for key in [key for key in self._partitions if key[0] == topic]:
            del self._partitions[key]
        self._drop_derived()
        if not keep_replication and self._replication.pop(topic, None) is not None:
            self._save_replication()

    def _save_replication(self) -> None:
        if self._replication_file is not None:
            write_atomically(self._replication_file, json.dumps(self._replication, sort_keys=True).encode())

    def partition(self, topic: str, partition: int) -> PartitionLeadership:
        state = self._partitions.get((topic, partition))
        if state is None:
            ids = sorted(self._nodes)
            replicas = tuple(ids[(partition + i) % len(ids)] for i in range(self.replication_factor(topic)))
            isr = tuple(r for r in replicas if r not in self._offline)
            state = PartitionLeadership(replicas, isr[0] if isr else NO_LEADER, self.stored_epoch(topic, partition),
                                        isr)
            self._partitions[(topic, partition)] = state
        return state

    def leader_of(self, topic: str, partition: int) -> int:
        """Leader node of a partition; NO_LEADER while all its replicas are down."""
        state = self._partitions.get((topic, partition))
        if state is None:
            sole = self.sole_node_id
            if sole is not None:
                return sole  # one node leads everything: no state to keep
            state = self.partition(topic, partition)
        return state.leader

    def move_leader(self, topic: str, partition: int, node_id: int) -> PartitionLeadership:
        """Make an online replica the leader (a preferred or reassigned leader election)."""
        state = self.partition(topic, partition)
        if node_id not in state.replicas:
            raise ValueError(f"node {node_id} is not a replica of {topic}-{partition} "
                             f"(replicas {list(state.replicas)})")
        if not self.is_online(node_id):
            raise ValueError(f"node {node_id} is not online")
        if state.leader != node_id:
            self._elect(topic, partition, state, node_id)
        return state

    def _elect(self, topic: str, partition: int, state: PartitionLeadership, leader: int) -> None:
        self._drop_derived()
        state.leader = leader
        if leader != NO_LEADER:
            state.leader_epoch = max(state.leader_epoch, self.stored_epoch(topic, partition)) + 1
            self.new_epoch(topic, partition, state.leader_epoch)

    def _reelect(self) -> None:
        """After a node stops or starts: ISRs are the online replicas; a leader that is down hands over to
        the first online replica, and a leaderless partition takes its first replica back."""
        self._drop_derived()
        for topic, count in list(self.all_partitions()):
            for partition in range(count):
                state = self.partition(topic, partition)
                state.isr = tuple(r for r in state.replicas if r not in self._offline)
                if state.leader == NO_LEADER or state.leader in self._offline:
                    self._elect(topic, partition, state, state.isr[0] if state.isr else NO_LEADER)

    def snapshot(self) -> dict[str, Any]:
        """The control plane's view: nodes with their endpoints per listener, and every partition's leadership."""
        listeners = sorted(self._endpoints)
        return {
            "controller_id": self.controller_id,
            "nodes": [{"node_id": node_id, "online": self.is_online(node_id),
                       "endpoints": {name: f"{self.endpoint(name, node_id).host}:{self.endpoint(name, node_id).port}"
                                     for name in listeners}}
                      for node_id in sorted(self._nodes)],
            "partitions": [{"topic": topic, "partition": partition, "leader": state.leader,
                            "leader_epoch": state.leader_epoch, "replicas": list(state.replicas),
                            "isr": list(state.isr)}
                           for topic, count in sorted(self.all_partitions())
                           for partition in range(count)
                           for state in (self.partition(topic, partition),)],
        }
