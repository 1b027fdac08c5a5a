"""ClusterView's elections and reassignments, step by step as Kafka's controller takes them (ReplicationControlManager,
PartitionReassignmentReplicas): the replica lists, the ISR, the leader and its epoch, and what is kept on disk."""

from __future__ import annotations

from pathlib import Path

import pytest
from minikafka.broker.wire.cluster import (
    ClusterView,
    ElectionNotNeeded,
    EligibleLeadersNotAvailable,
    InvalidReplicaAssignment,
    InvalidReplicationFactor,
    Node,
    NoReassignmentInProgress,
    PreferredLeaderNotAvailable,
)

TOPIC = "t"


def _view(tmp_path: Path, *, fresh: bool = True) -> ClusterView:
    """Four nodes and a topic of two partitions, replication factor 2; `fresh=False` reloads what `tmp_path`
    keeps (the broker starting again)."""
    view = ClusterView("c", [Node(i, "127.0.0.1", 9090 + i) for i in range(1, 5)])
    view.all_partitions = lambda: [(TOPIC, 2)]
    view.use_replication_file(tmp_path)
    if fresh:
        view.set_replication_factor(TOPIC, 2)
    return view


def _shape(view: ClusterView) -> tuple[list[int], list[int], list[int], list[int], int, int]:
    state = view.partition(TOPIC, 0)
    return (list(state.replicas), list(state.adding), list(state.removing), list(state.isr), state.leader,
            state.leader_epoch)


def test_a_new_target_during_a_move_is_taken_against_the_whole_current_list(tmp_path: Path) -> None:
    view = _view(tmp_path)
    view.set_online(3, False)
    view.reassign(TOPIC, 0, [3, 1])
    assert _shape(view) == ([3, 1, 2], [3], [2], [1, 2], 1, 0)
    view.reassign(TOPIC, 0, [4, 1])  # 3 was being added: now it is removed with 2, and 4 is up: done
    assert _shape(view) == ([4, 1], [], [], [4, 1], 1, 1)


def test_cancel_needs_an_in_sync_original_replica(tmp_path: Path) -> None:
    view = _view(tmp_path)
    with pytest.raises(NoReassignmentInProgress):
        view.cancel_reassignment(TOPIC, 0)
    view.set_online(3, False)
    view.reassign(TOPIC, 0, [3, 4])
    view.set_online(1, False)
    view.set_online(2, False)
    with pytest.raises(InvalidReplicaAssignment, match="would require an unclean leader election"):
        view.cancel_reassignment(TOPIC, 0)
    view.set_online(1, True)
    view.cancel_reassignment(TOPIC, 0)
    assert _shape(view)[:4] == ([1, 2], [], [], [1])


def test_target_validation_and_the_replication_factor_flag(tmp_path: Path) -> None:
    view = _view(tmp_path)
    for target, message in (([], "empty replica list"), ([1, 9], "broker 9, but no such broker"),
                            ([2, 2], "the broker 2 more than once")):
        with pytest.raises(InvalidReplicaAssignment, match=message):
            view.reassign(TOPIC, 0, target)
    with pytest.raises(InvalidReplicationFactor, match="changed from 2 to 3"):
        view.reassign(TOPIC, 0, [1, 2, 3], allow_replication_factor_change=False)
    assert _shape(view) == ([1, 2], [], [], [1, 2], 1, 0), "a refused move changes nothing"


def test_elections(tmp_path: Path) -> None:
    view = _view(tmp_path)
    with pytest.raises(ElectionNotNeeded):
        view.elect_preferred(TOPIC, 0)
    view.move_leader(TOPIC, 0, 2)
    view.set_online(1, False)
    with pytest.raises(PreferredLeaderNotAvailable):
        view.elect_preferred(TOPIC, 0)
    with pytest.raises(ElectionNotNeeded):
        view.elect_unclean(TOPIC, 0)
    view.set_online(2, False)
    with pytest.raises(EligibleLeadersNotAvailable):
        view.elect_unclean(TOPIC, 0)
    view.set_online(1, True)  # back in the ISR, and the leaderless partition takes it
    assert view.partition(TOPIC, 0).leader == 1


def test_moved_assignments_are_reloaded_and_default_ones_forgotten(tmp_path: Path) -> None:
    view = _view(tmp_path)
    view.set_online(3, False)
    view.reassign(TOPIC, 0, [3, 1])
    view.reassign(TOPIC, 1, [4, 2])  # from [2, 3]
    still_down = _view(tmp_path, fresh=False)
    still_down.set_online(3, False)
    assert list(still_down.partition(TOPIC, 1).replicas) == [4, 2]
    assert [(t, p, list(s.replicas), list(s.adding)) for t, p, s in still_down.reassignments()] == \
        [(TOPIC, 0, [3, 1, 2], [3])]
    all_up = _view(tmp_path, fresh=False)
    assert list(all_up.partition(TOPIC, 0).replicas) == [3, 1] and all_up.reassignments() == []

    view.set_online(3, True)
    view.reassign(TOPIC, 0, [1, 2])
    view.reassign(TOPIC, 1, [2, 3])  # both back where round-robin puts them
    assert (tmp_path / "partition-assignments.json").read_text() == "[]"
