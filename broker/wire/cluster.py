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
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.checkpoint import write_atomically

REPLICATION_FILE = "replication-factors.json"
# Replica lists that differ from the round-robin default (reassigned, or being reassigned); Kafka keeps them
# in the metadata log.
ASSIGNMENT_FILE = "partition-assignments.json"
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
    # A reassignment under way (KIP-455): `replicas` is the target followed by `removing`.
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)


# The controller's refusals, with the codes and messages of Kafka's ReplicationControlManager.
class ElectionNotNeeded(KafkaError):
    error_code = ErrorCode.election_not_needed


class PreferredLeaderNotAvailable(KafkaError):
    error_code = ErrorCode.preferred_leader_not_available


class EligibleLeadersNotAvailable(KafkaError):
    error_code = ErrorCode.eligible_leaders_not_available


class NoReassignmentInProgress(KafkaError):
    error_code = ErrorCode.no_reassignment_in_progress


class InvalidReplicaAssignment(KafkaError):
    error_code = ErrorCode.invalid_replica_assignment


class InvalidReplicationFactor(KafkaError):
    error_code = ErrorCode.invalid_replication_factor


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
        # (topic, partition) -> (replicas, adding, removing) where they differ from the default.
        self._assignments: dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = {}
        self._assignment_file: Path | None = None
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
        self._assignment_file = data_dir / ASSIGNMENT_FILE
        if self._assignment_file.exists():
            self._assignments = {
                (str(entry["topic"]), int(entry["partition"])):
                    (tuple(entry["replicas"]), tuple(entry["adding"]), tuple(entry["removing"]))
                for entry in json.loads(self._assignment_file.read_text())}
        self._drop_derived()

    def reset(self) -> None:
        """A broker reset: no partition leadership, replication factor or replica move kept (the topics are
        gone). Nodes a test stopped are started again by the server, which owns their sockets."""
        self._partitions.clear()
        self._replication.clear()
        self._assignments.clear()
        if self._replication_file is not None:
            self._replication_file.unlink(missing_ok=True)
        if self._assignment_file is not None:
            self._assignment_file.unlink(missing_ok=True)
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
        assigned = [key for key in self._assignments if key[0] == topic]
        for key in assigned:
            del self._assignments[key]
        if assigned:
            self._save_assignments()

    def _save_replication(self) -> None:
        if self._replication_file is not None:
            write_atomically(self._replication_file, json.dumps(self._replication, sort_keys=True).encode())

    def _save_assignments(self) -> None:
        if self._assignment_file is not None:
            entries = [{"topic": topic, "partition": partition, "replicas": list(replicas), "adding": list(adding),
                        "removing": list(removing)}
                       for (topic, partition), (replicas, adding, removing) in sorted(self._assignments.items())]
            write_atomically(self._assignment_file, json.dumps(entries).encode())

    def partition(self, topic: str, partition: int) -> PartitionLeadership:
        state = self._partitions.get((topic, partition))
        if state is None:
            assigned = self._assignments.get((topic, partition))
            if assigned is not None:
                replicas, adding, removing = assigned
            else:
                ids = sorted(self._nodes)
                replicas = tuple(ids[(partition + i) % len(ids)] for i in range(self.replication_factor(topic)))
                adding = removing = ()
            isr = tuple(r for r in replicas if r not in self._offline)
            state = PartitionLeadership(replicas, isr[0] if isr else NO_LEADER, self.stored_epoch(topic, partition),
                                        isr, adding, removing)
            self._partitions[(topic, partition)] = state
            if state.reassigning:  # a move kept from before a restart completes once its nodes are up
                self._advance_reassignment(topic, partition, state)
        return state

    def leader_of(self, topic: str, partition: int) -> int:
        """Leader node of a partition; NO_LEADER while all its replicas are down."""
        state = self._partitions.get((topic, partition))
        if state is None:
            sole = self.sole_node_id
            if sole is not None and (topic, partition) not in self._assignments:
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
        """After a node stops or starts: ISRs are the online replicas; a reassignment whose new replicas are
        all online completes; a leader that is down hands over to the first online replica, and a leaderless
        partition takes its first replica back."""
        self._drop_derived()
        for topic, count in list(self.all_partitions()):
            for partition in range(count):
                state = self.partition(topic, partition)
                state.isr = tuple(r for r in state.replicas if r not in self._offline)
                if state.reassigning:
                    self._advance_reassignment(topic, partition, state)
                elif state.leader == NO_LEADER or state.leader in self._offline:
                    self._elect(topic, partition, state, state.isr[0] if state.isr else NO_LEADER)

    # --- elections and reassignments (KIP-460, KIP-455), as Kafka's controller makes them ---------------
    # Data is stored once, so a replica is in sync as soon as it is online: a reassignment whose new
    # replicas are all online completes at once; one waiting on a stopped node stays under way (listed by
    # ListPartitionReassignments) until that node starts or the reassignment is cancelled.

    def elect_preferred(self, topic: str, partition: int) -> PartitionLeadership:
        """Make the first replica the leader (ElectionType PREFERRED)."""
        state = self.partition(topic, partition)
        preferred = state.replicas[0]
        if state.leader == preferred:
            raise ElectionNotNeeded("Leader election not needed for topic partition.")
        if preferred not in state.isr or not self.is_online(preferred):
            raise PreferredLeaderNotAvailable("The preferred leader was not available.")
        self._elect(topic, partition, state, preferred)
        return state

    def elect_unclean(self, topic: str, partition: int) -> PartitionLeadership:
        """Give a leaderless partition a leader from any live replica (ElectionType UNCLEAN). Every online
        replica is in the ISR here, so a partition without a leader has no live replica either."""
        state = self.partition(topic, partition)
        if state.leader != NO_LEADER:
            raise ElectionNotNeeded("Leader election not needed for topic partition.")
        live = [r for r in state.replicas if self.is_online(r)]
        if not live:
            raise EligibleLeadersNotAvailable("Eligible topic partition leaders are not available.")
        self._elect(topic, partition, state, live[0])
        return state

    def reassign(self, topic: str, partition: int, target: list[int], allow_replication_factor_change: bool = True,
                 ) -> PartitionLeadership:
        """Start moving a partition to `target` (AlterPartitionReassignments with replicas): the replica list
        becomes the target followed by the replicas being removed, and the move completes once every new
        replica is in the ISR, with the leader moved off a removed replica and the leader epoch bumped."""
        state = self.partition(topic, partition)
        self._validate_assignment(target)
        original = [r for r in state.replicas if r not in state.adding]
        if not allow_replication_factor_change and len(target) != len(original):
            raise InvalidReplicationFactor(f"The replication factor is changed from {len(original)} to {len(target)}")
        # Against the whole current list, a move under way included, as PartitionReassignmentReplicas does.
        removing = tuple(sorted(set(state.replicas) - set(target)))
        adding = tuple(sorted(set(target) - set(state.replicas)))
        before = state.replicas
        state.replicas, state.adding, state.removing = (*target, *removing), adding, removing
        state.isr = tuple(r for r in state.replicas if r not in self._offline)
        self._drop_derived()
        self._advance_reassignment(topic, partition, state, before)
        return state

    def cancel_reassignment(self, topic: str, partition: int) -> PartitionLeadership:
        """Revert a reassignment under way (AlterPartitionReassignments with null replicas): the replicas
        being added are dropped and the removed ones stay."""
        state = self.partition(topic, partition)
        if not state.reassigning:
            raise NoReassignmentInProgress("No partition reassignment is in progress.")
        if not [r for r in state.isr if r not in state.adding]:
            # unclean.leader.election.enable is not modelled: as Kafka with it false (its default).
            raise InvalidReplicaAssignment(f"Unable to revert partition assignment for {topic}:{partition} because "
                                           f"it would require an unclean leader election.")
        before = state.replicas
        state.replicas = tuple(r for r in state.replicas if r not in state.adding)
        state.adding = state.removing = ()
        state.isr = tuple(r for r in state.replicas if r not in self._offline)
        self._settle(topic, partition, state, before)
        return state

    def reassignments(self) -> list[tuple[str, int, PartitionLeadership]]:
        """Every partition with a reassignment under way."""
        for topic, partition in list(self._assignments):
            self.partition(topic, partition)  # one restored from the assignment file and not asked for yet
        return [(topic, partition, state) for (topic, partition), state in sorted(self._partitions.items())
                if state.reassigning]

    def _validate_assignment(self, target: list[int]) -> None:
        if not target:
            raise InvalidReplicaAssignment("The manual partition assignment includes an empty replica list.")
        seen: set[int] = set()
        for node_id in sorted(target):
            if node_id not in self._nodes:
                raise InvalidReplicaAssignment(f"The manual partition assignment includes broker {node_id}, but no "
                                               f"such broker is registered.")
            if node_id in seen:
                raise InvalidReplicaAssignment(f"The manual partition assignment includes the broker {node_id} more "
                                               f"than once.")
            seen.add(node_id)

    def _advance_reassignment(self, topic: str, partition: int, state: PartitionLeadership,
                              before: tuple[int, ...] | None = None) -> None:
        """Complete the reassignment if every replica it keeps is in the ISR (PartitionReassignmentReplicas.
        maybeCompleteReassignment), then settle the leadership."""
        before = state.replicas if before is None else before
        if state.reassigning:
            kept = [r for r in state.replicas if r not in state.removing]
            isr = [r for r in state.isr if r not in state.removing]
            if isr and set(kept) <= set(isr):
                state.replicas, state.isr, state.adding, state.removing = tuple(kept), tuple(isr), (), ()
        self._settle(topic, partition, state, before)

    def _settle(self, topic: str, partition: int, state: PartitionLeadership, before: tuple[int, ...]) -> None:
        """Keep a leader that is still an in-sync replica, else elect the first in-sync replica; a replica
        list that lost members bumps the leader epoch even when the leader stays (Kafka's
        triggerLeaderEpochBumpForReplicaReassignmentIfNeeded). Then remember the assignment."""
        self._drop_derived()
        if state.leader not in state.isr:
            self._elect(topic, partition, state, state.isr[0] if state.isr else NO_LEADER)
        elif not set(before) <= set(state.replicas):
            self._elect(topic, partition, state, state.leader)
        self._remember_assignment(topic, partition, state)

    def _remember_assignment(self, topic: str, partition: int, state: PartitionLeadership) -> None:
        ids = sorted(self._nodes)
        default = tuple(ids[(partition + i) % len(ids)] for i in range(self.replication_factor(topic)))
        key = (topic, partition)
        if state.replicas == default and not state.reassigning:
            if self._assignments.pop(key, None) is None:
                return
        else:
            self._assignments[key] = (state.replicas, state.adding, state.removing)
        self._save_assignments()

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
                            "isr": list(state.isr), "adding": list(state.adding), "removing": list(state.removing)}
                           for topic, count in sorted(self.all_partitions())
                           for partition in range(count)
                           for state in (self.partition(topic, partition),)],
        }
