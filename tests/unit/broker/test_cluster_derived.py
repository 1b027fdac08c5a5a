"""ClusterView.derived: values worked out from the leadership are kept until it changes, and let go."""

from __future__ import annotations

import pytest
from minikafka.broker.wire import cluster as cluster_module
from minikafka.broker.wire.cluster import ClusterView, Node


def _cluster() -> ClusterView:
    view = ClusterView("c", [Node(1, "127.0.0.1", 9092), Node(2, "127.0.0.1", 9093)])
    view.all_partitions = lambda: [("t", 2)]
    view.set_replication_factor("t", 2)
    return view


class _Deriving:
    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self.derived = 0
        self.released: list[object] = []

    def get(self, key: str) -> object:
        def derive() -> object:
            self.derived += 1
            return (key, self.derived)
        return self.view.derived(key, derive, self.released.append)


@pytest.mark.parametrize("change", ["move leader", "stop node", "start node", "forget topic", "replication"])
def test_a_derived_value_is_kept_until_the_leadership_changes_then_released(change: str) -> None:
    view = _cluster()
    view.set_online(2, online=change != "start node")
    deriving = _Deriving(view)
    first = deriving.get("a")
    assert deriving.get("a") is first and deriving.derived == 1
    other = deriving.get("b")
    assert deriving.released == []
    if change == "move leader":
        view.move_leader("t", 0, 2)
    elif change == "stop node":
        view.set_online(2, online=False)
    elif change == "start node":
        view.set_online(2, online=True)
    elif change == "forget topic":
        view.forget_topic("t")
    else:
        view.set_replication_factor("t", 1)
    assert sorted(deriving.released, key=str) == sorted([first, other], key=str)
    again = deriving.get("a")
    assert again == ("a", 3) and again is not first


def test_reading_the_leadership_changes_nothing_kept() -> None:
    view = _cluster()
    deriving = _Deriving(view)
    kept = deriving.get("a")
    view.partition("t", 0)
    view.partition("t", 1)
    view.leader_of("t", 1)
    assert deriving.get("a") is kept and deriving.released == []


def test_past_the_limit_everything_kept_is_released(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster_module, "DERIVED_LIMIT", 3)
    deriving = _Deriving(_cluster())
    values = [deriving.get(key) for key in "abc"]
    assert deriving.released == []
    newest = deriving.get("d")
    assert deriving.released == values
    assert deriving.get("d") is newest
