"""Consumer groups: the classic membership protocol, committed offsets, `__consumer_offsets` records.

`GroupCoordinator` (coordinator.py) is the entry point; see its docstring for the parts it routes to.
"""

from minikafka.coordinator.group.admin import GroupDescription, GroupListing, MemberDescription
from minikafka.coordinator.group.classic import JoinGroupRequest, SyncGroupRequest
from minikafka.coordinator.group.coordinator import GroupCoordinator
from minikafka.coordinator.group.log import OFFSETS_TOPIC
from minikafka.coordinator.group.metadata import GroupConfig, OffsetCommit
from minikafka.coordinator.group.offset_manager import FetchedOffset
from minikafka.coordinator.group.state import Group, GroupState, JoinResult, Member, SyncResult

__all__ = [
    "OFFSETS_TOPIC",
    "FetchedOffset",
    "Group",
    "GroupConfig",
    "GroupCoordinator",
    "GroupDescription",
    "GroupListing",
    "GroupState",
    "JoinGroupRequest",
    "JoinResult",
    "Member",
    "MemberDescription",
    "OffsetCommit",
    "SyncGroupRequest",
    "SyncResult",
]
