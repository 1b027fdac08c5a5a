"""GroupAdmin: DescribeGroups, ListGroups, DeleteGroups and OffsetDelete, answered as dataclasses.

Follows the admin half of Kafka 4's `GroupMetadataManager` (describeGroups, listGroups,
deleteGroups via GroupCoordinatorShard) and `OffsetMetadataManager.deleteOffsets`. The handlers in
broker/handlers/ turn these results into the wire shape of each version.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from minikafka.coordinator.errors import (
    GroupIdNotFound,
    GroupSubscribedToTopic,
    InvalidGroupId,
    NonEmptyGroup,
    PartitionOutcomes,
)
from minikafka.coordinator.group.metadata import GroupMetadataManager
from minikafka.coordinator.group.offsets import TopicPartition
from minikafka.coordinator.group.records import CONSUMER_PROTOCOL_TYPE, consumer_subscription_topics
from minikafka.coordinator.group.state import Group, GroupState

# Every state a classic group may be listed or described in, for counts that name each one.
GROUP_STATES = tuple(state.value for state in GroupState)


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes  # the chosen protocol's metadata, only while the group is Stable
    assignment: bytes  # only while the group is Stable
    # For monitoring (the admin listener's /state), whatever the group's state: every protocol the
    # member offers with its metadata, and the assignment it was last given.
    protocols: tuple[tuple[str, bytes], ...] = ()
    latest_assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """Kafka's GroupMetadata.summary: an unknown group is described as Dead, `exists=False`."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str  # the chosen protocol, only while the group is Stable
    members: tuple[MemberDescription, ...]
    exists: bool
    # For monitoring, whatever the group's state: the generation, its leader and chosen protocol.
    generation_id: int = 0
    leader_id: str | None = None
    chosen_protocol: str | None = None


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str


class GroupAdmin:
    def __init__(self, manager: GroupMetadataManager) -> None:
        self._manager = manager
        self._groups = manager.groups

    def describe_group(self, group_id: str) -> GroupDescription:
        group = self._groups.get(group_id)
        if group is None:
            return GroupDescription(group_id, GroupState.DEAD.value, "", "", (), exists=False)
        stable = group.is_(GroupState.STABLE)
        members = tuple(
            MemberDescription(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable and group.protocol_name else b"",
                m.assignment if stable else b"",
                tuple(m.protocols),
                m.assignment,
            )
            for m in group.members.values()
        )
        return GroupDescription(
            group_id,
            group.state.value,
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            members,
            exists=True,
            generation_id=group.generation_id,
            leader_id=group.leader_id,
            chosen_protocol=group.protocol_name,
        )

    def list_groups(self, states: Iterable[str] = (), *, with_offsets_only: bool = False) -> list[GroupListing]:
        """Live groups, optionally only those in `states` (case-insensitive, trimmed). `with_offsets_only`
        adds the groups known only by their committed offsets, as Empty groups (as Kafka loads them),
        which monitoring counts and ListGroups does not list."""
        wanted = {s.lower().strip() for s in states}
        listed = [
            GroupListing(g.group_id, g.protocol_type or "", g.state.value)
            for g in self._groups.values()
            if not g.is_(GroupState.DEAD) and (not wanted or g.state.value.lower() in wanted)
        ]
        if with_offsets_only and (not wanted or GroupState.EMPTY.value.lower() in wanted):
            listed.extend(GroupListing(group_id, "", GroupState.EMPTY.value)
                          for group_id in self._manager.offsets.groups() if group_id not in self._groups)
        return listed

    def delete_group(self, group_id: str) -> None:
        group = self._groups.get(group_id)
        if not group_id:
            raise InvalidGroupId("the group id is empty")
        if group is None or group.is_(GroupState.DEAD):
            raise GroupIdNotFound(f"group {group_id} does not exist")
        if not group.is_(GroupState.EMPTY):
            raise NonEmptyGroup(f"group {group_id} has members")
        self._manager.delete_group(group)

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> PartitionOutcomes:
        """Kafka 4's OffsetMetadataManager.deleteOffsets: a group error (unknown group, or a non-empty
        group that is not a consumer group) fails the request; otherwise only partitions of topics the
        group subscribes to are refused (GROUP_SUBSCRIBED_TO_TOPIC)."""
        group = self._groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            raise GroupIdNotFound(f"group {group_id} does not exist")
        if not group.is_(GroupState.EMPTY) and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            raise NonEmptyGroup(f"group {group_id} has members")
        subscribed = _subscribed_topics(group)
        results: PartitionOutcomes = {
            tp: GroupSubscribedToTopic(f"group {group_id} consumes {tp[0]}")
            if subscribed is None or tp[0] in subscribed else None
            for tp in partitions
        }
        self._manager.delete_offsets(group_id, [tp for tp, error in results.items() if error is None])
        return results


def _subscribed_topics(group: Group) -> set[str] | None:
    """Topics a consumer group subscribes to; None when not known yet (no generation chose a
    protocol), which Kafka's isSubscribedToTopic counts as subscribed to every topic."""
    if group.is_(GroupState.EMPTY):
        return set()
    if group.protocol_name is None:
        return None
    topics: set[str] = set()
    for member in group.members.values():
        # A member that joined since the protocol was chosen may not list it yet.
        for name, metadata in member.protocols:
            if name == group.protocol_name:
                topics.update(consumer_subscription_topics(metadata))
    return topics
