"""Classic consumer groups: membership state machine, committed offsets, `__consumer_offsets` records."""

from .coordinator import FetchedOffset, GroupConfig, GroupCoordinator, OffsetCommit
from .log import OFFSETS_TOPIC
from .state import Group, GroupState, JoinResult, Member, SyncResult

__all__ = [
    "OFFSETS_TOPIC",
    "FetchedOffset",
    "Group",
    "GroupConfig",
    "GroupCoordinator",
    "GroupState",
    "JoinResult",
    "Member",
    "OffsetCommit",
    "SyncResult",
]
