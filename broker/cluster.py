"""Which nodes exist and which node leads what.

One process presents one node today; later it will present several, each on its own port. Nothing
in the broker assumes "this broker": handlers ask the cluster view who leads a partition or a
coordinator key, and pass node identity explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Node:
    node_id: int
    host: str
    port: int
    rack: str | None = None


class ClusterView:
    def __init__(self, cluster_id: str, nodes: list[Node]) -> None:
        if not nodes:
            raise ValueError("a cluster has at least one node")
        self.cluster_id = cluster_id
        self._nodes = {node.node_id: node for node in nodes}

    @property
    def nodes(self) -> list[Node]:
        return list(self._nodes.values())

    def node(self, node_id: int) -> Node:
        return self._nodes[node_id]

    @property
    def controller_id(self) -> int:
        return min(self._nodes)

    def leader_of(self, topic: str, partition: int) -> int:
        """Leader node of a partition: spread round-robin over the nodes (one node: always it)."""
        ids = sorted(self._nodes)
        return ids[partition % len(ids)]

    def replace_node(self, node: Node) -> None:
        """Update a node's address once its listener is bound (port 0 picks one)."""
        self._nodes[node.node_id] = node
