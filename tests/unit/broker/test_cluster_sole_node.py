"""ClusterView.sole_node_id: the shortcut every coordinator request takes on a one-node cluster."""

from __future__ import annotations

from minikafka.broker.wire.cluster import ClusterView, Node


def test_a_one_node_cluster_names_its_node_while_it_is_online() -> None:
    view = ClusterView("c", [Node(1, "127.0.0.1", 9092)])
    assert view.sole_node_id == 1
    assert view.leader_of("__transaction_state", 7) == 1
    view.set_online(1, False)
    assert view.sole_node_id is None
    view.set_online(1, True)
    assert view.sole_node_id == 1


def test_a_cluster_of_several_nodes_has_no_sole_node_even_with_one_online() -> None:
    view = ClusterView("c", [Node(1, "127.0.0.1", 9092), Node(2, "127.0.0.1", 9093)])
    assert view.sole_node_id is None
    view.set_online(2, False)
    assert view.sole_node_id is None
