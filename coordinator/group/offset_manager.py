"""OffsetMetadataManager: OffsetCommit, TxnOffsetCommit, OffsetFetch, and transaction markers.

Follows Kafka 4's `OffsetMetadataManager`:
- OffsetCommit: generation -1 with an empty member id in an Empty (or unknown) group is a "simple"
  commit; otherwise the group's `validate_offset_commit` (Kafka's ClassicGroup.validateOffsetCommit)
  decides. Commits are OffsetCommitKey v1/Value v3 records; metadata longer than
  `offset.metadata.max.bytes` fails that partition only (OFFSET_METADATA_TOO_LARGE).
- A plain commit keeps a classic member's session alive while the group is Stable or
  PreparingRebalance (Kafka's rescheduleClassicGroupMemberHeartbeat).
- TxnOffsetCommit: offsets staged per producer id, applied when the COMMIT marker is written
  (`complete_transaction`) or replayed.
- OffsetFetch: committed offsets; with require_stable, a partition with a pending transactional
  commit is UNSTABLE_OFFSET_COMMIT.
"""

from __future__ import annotations

from dataclasses import dataclass

from minikafka.coordinator.errors import (
    GroupError,
    GroupIdNotFound,
    IllegalGeneration,
    OffsetMetadataTooLarge,
    PartitionOutcomes,
)
from minikafka.coordinator.group.classic import ClassicGroupEngine
from minikafka.coordinator.group.metadata import GroupMetadataManager, OffsetCommit
from minikafka.coordinator.group.offsets import TopicPartition
from minikafka.coordinator.group.state import Group, GroupState
from minikafka.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.none


class OffsetMetadataManager:
    def __init__(self, manager: GroupMetadataManager, classic: ClassicGroupEngine) -> None:
        self._manager = manager
        self._classic = classic
        self._offsets = manager.offsets

    def _group_for_commit(self, group_id: str, generation_id: int, unknown_group: type[GroupError]) -> Group:
        """The group an offset commit goes to: a commit without a generation creates it (simple
        consumers and transactional producers use groups nobody joined)."""
        group = self._manager.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                raise unknown_group(f"group {group_id} does not exist")
            return self._manager.get_or_create_group(group_id)
        return group

    def commit_offsets(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        commits: list[OffsetCommit],
        api_version: int = 9,
    ) -> PartitionOutcomes:
        """A plain OffsetCommit. A commit with a generation to a group that does not exist is
        GROUP_ID_NOT_FOUND from OffsetCommit v9 on, ILLEGAL_GENERATION before (Kafka's
        OffsetMetadataManager.validateOffsetCommit). A refused commit raises a GroupError."""
        group = self._group_for_commit(group_id, generation_id,
                                       GroupIdNotFound if api_version >= 9 else IllegalGeneration)
        group.validate_offset_commit(generation_id, member_id, group_instance_id, transactional=False)
        # Kafka's commitOffset: a commit keeps the member's session alive only while the group is
        # Stable or PreparingRebalance.
        member = group.members.get(member_id)
        if member is not None and group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            self._classic.reschedule_heartbeat(group, member)
        return self.write_checked(group_id, commits)

    def commit_transactional_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        commits: list[OffsetCommit],
        *,
        generation_id: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
    ) -> PartitionOutcomes:
        """Stage offsets of a transaction; they apply when its COMMIT marker is written.

        v3 requests carry the consumer's generation and member (KIP-447), checked as Kafka's
        ClassicGroup.validateOffsetCommit does for transactional commits: unlike plain commits, a
        rebalance in progress is no error, and a request without member fields (v0-2) is accepted.
        """
        group = self._group_for_commit(group_id, generation_id, IllegalGeneration)
        group.validate_offset_commit(generation_id, member_id, group_instance_id, transactional=True)
        return self.write_checked(group_id, commits, producer_id=producer_id, producer_epoch=producer_epoch)

    def write_checked(self, group_id: str, commits: list[OffsetCommit], *,
                      producer_id: int = -1, producer_epoch: int = -1) -> PartitionOutcomes:
        """Per partition: None when written, or why not (each commit's own metadata check)."""
        results: PartitionOutcomes = {}
        accepted = []
        max_bytes = self._manager.config.offset_metadata_max_bytes
        for c in commits:
            if c.metadata is not None and len(c.metadata.encode()) > max_bytes:
                results[(c.topic, c.partition)] = OffsetMetadataTooLarge(
                    f"metadata of {c.topic}-{c.partition} is over {max_bytes} bytes")
            else:
                results[(c.topic, c.partition)] = None
                accepted.append(c)
        self._manager.write_offsets(group_id, accepted, producer_id=producer_id, producer_epoch=producer_epoch)
        return results

    def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None, require_stable: bool = False
    ) -> dict[TopicPartition, FetchedOffset]:
        """Committed offsets; `partitions=None` means every partition the group committed."""
        if partitions is None:
            partitions = sorted(self._offsets.partitions(group_id))
        out = {}
        for tp in partitions:
            if require_stable and self._offsets.has_pending(group_id, tp):
                out[tp] = FetchedOffset(error=ErrorCode.unstable_offset_commit)
                continue
            committed = self._offsets.fetch(group_id, tp)
            if committed is None:
                out[tp] = FetchedOffset()
            else:
                v = committed.value
                out[tp] = FetchedOffset(v.offset, v.leader_epoch, v.metadata)
        return out
