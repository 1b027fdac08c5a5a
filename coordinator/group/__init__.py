"""Consumer groups: the classic membership protocol, committed offsets, `__consumer_offsets` records.

`GroupCoordinator` (coordinator.py) is the entry point; see its docstring for the parts it routes to.
"""

from .admin import GroupDescription, GroupListing, MemberDescription
from .classic import JoinGroupRequest, SyncGroupRequest
from .coordinator import GroupCoordinator
from .log import OFFSETS_TOPIC
from .metadata import GroupConfig, OffsetCommit
from .offset_manager import FetchedOffset
from .state import Group, GroupState, JoinResult, Member, SyncResult

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
