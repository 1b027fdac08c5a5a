"""Which nodes exist, where clients reach them, which are up, and which node leads what.

One process presents `minikafka.nodes` nodes, each with every listener on its own port. Nothing in
the broker assumes "this broker": handlers ask the cluster view who leads a partition or a
coordinator key, and pass node identity explicitly. A node's address depends on the listener a client
came in on (Kafka answers Metadata with the brokers' endpoints on the request's listener).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Node:
    node_id: int
    host: str
    port: int
    rack: str | None = None


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
        for notify in list(self.node_changes):
            notify(node_id, online)

    def node(self, node_id: int) -> Node:
        return self._nodes[node_id]

    @property
    def controller_id(self) -> int:
        """The lowest online node (any node when all are down): the one process is the quorum, so the
        controller is whichever node a client can still reach."""
        return min(self.online_ids or self._nodes)

    def leader_of(self, topic: str, partition: int) -> int:
        """Leader node of a partition: spread round-robin over the nodes (one node: always it)."""
        ids = sorted(self._nodes)
        return ids[partition % len(ids)]

