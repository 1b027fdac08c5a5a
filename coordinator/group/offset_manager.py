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

    def _group_for_commit(
        self, group_id: str, generation_id: int, unknown_group_error: ErrorCode = ErrorCode.illegal_generation
    ) -> tuple[Group | None, ErrorCode]:
        """The group an offset commit goes to: a commit without a generation creates it (simple
        consumers and transactional producers use groups nobody joined)."""
        group = self._manager.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return None, unknown_group_error
            return self._manager.get_or_create_group(group_id), ErrorCode.none
        return group, ErrorCode.none

    def commit_offsets(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        commits: list[OffsetCommit],
        unknown_group_error: ErrorCode = ErrorCode.illegal_generation,
    ) -> dict[TopicPartition, ErrorCode]:
        """A plain OffsetCommit. `unknown_group_error` is what a commit with a generation gets when
        the group does not exist: Kafka answers GROUP_ID_NOT_FOUND from OffsetCommit v9 on."""
        group, error = self._group_for_commit(group_id, generation_id, unknown_group_error)
        if group is not None and error is ErrorCode.none:
            error = group.validate_offset_commit(generation_id, member_id, group_instance_id, transactional=False)
            # Kafka's commitOffset: a commit keeps the member's session alive only while the group is
            # Stable or PreparingRebalance.
            member = group.members.get(member_id)
            if error is ErrorCode.none and member is not None and group.state in (
                GroupState.STABLE, GroupState.PREPARING_REBALANCE
            ):
                self._classic.reschedule_heartbeat(group, member)
        return self.write_checked(group_id, commits, error)

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
    ) -> dict[TopicPartition, ErrorCode]:
        """Stage offsets of a transaction; they apply when its COMMIT marker is written.

        v3 requests carry the consumer's generation and member (KIP-447), checked as Kafka's
        ClassicGroup.validateOffsetCommit does for transactional commits: unlike plain commits, a
        rebalance in progress is no error, and a request without member fields (v0-2) is accepted.
        """
        group, error = self._group_for_commit(group_id, generation_id)
        if group is not None and error is ErrorCode.none:
            error = group.validate_offset_commit(generation_id, member_id, group_instance_id, transactional=True)
        return self.write_checked(group_id, commits, error, producer_id=producer_id, producer_epoch=producer_epoch)

    def write_checked(self, group_id: str, commits: list[OffsetCommit], group_error: ErrorCode, *,
                      producer_id: int = -1, producer_epoch: int = -1) -> dict[TopicPartition, ErrorCode]:
        """Per-partition results: the group's error for all, or each commit's own metadata check."""
        if group_error is not ErrorCode.none:
            return {(c.topic, c.partition): group_error for c in commits}
        results: dict[TopicPartition, ErrorCode] = {}
        accepted = []
        max_bytes = self._manager.config.offset_metadata_max_bytes
        for c in commits:
            if c.metadata is not None and len(c.metadata.encode()) > max_bytes:
                results[(c.topic, c.partition)] = ErrorCode.offset_metadata_too_large
            else:
                results[(c.topic, c.partition)] = ErrorCode.none
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
