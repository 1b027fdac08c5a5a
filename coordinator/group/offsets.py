"""Committed offsets of every group, as replayed from (and written to) `__consumer_offsets`.

Mirrors Kafka's `OffsetMetadataManager`: each committed value remembers the offset of the record
that carried it in `__consumer_offsets`, so that transactional commits (staged per producer id and
applied when the COMMIT marker is replayed) only win over a newer plain commit if their record is
newer (`replayEndTransactionMarker`). Pure bookkeeping; the coordinator writes the records.
"""

from __future__ import annotations

from dataclasses import dataclass

from minikafka.coordinator.group.records import OffsetValue

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    value: OffsetValue
    record_offset: int  # where in __consumer_offsets this commit was written (-1: not yet)

    @property
    def offset(self) -> int:
        return self.value.offset


class OffsetStore:
    def __init__(self) -> None:
        self._offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        # producer id -> group -> partition -> staged commit
        self._pending: dict[int, dict[str, dict[TopicPartition, CommittedOffset]]] = {}

    # -- plain commits -------------------------------------------------------------------------

    def commit(self, group: str, tp: TopicPartition, value: OffsetValue, record_offset: int) -> None:
        self._offsets.setdefault(group, {})[tp] = CommittedOffset(value, record_offset)

    def delete(self, group: str, tp: TopicPartition) -> bool:
        offsets = self._offsets.get(group)
        if offsets is None or tp not in offsets:
            return False
        del offsets[tp]
        if not offsets:
            del self._offsets[group]
        return True

    def delete_group(self, group: str) -> list[TopicPartition]:
        """Drop every committed (and staged) offset of `group`; the committed partitions are returned."""
        for staged in self._pending.values():
            staged.pop(group, None)
        return list(self._offsets.pop(group, {}))

    def fetch(self, group: str, tp: TopicPartition) -> CommittedOffset | None:
        return self._offsets.get(group, {}).get(tp)

    def partitions(self, group: str) -> dict[TopicPartition, CommittedOffset]:
        return dict(self._offsets.get(group, {}))

    def groups(self) -> list[str]:
        return list(self._offsets)

    def has_offsets(self, group: str) -> bool:
        return bool(self._offsets.get(group))

    # -- transactional commits (KIP-98/447) ----------------------------------------------------

    def stage_txn(
        self, producer_id: int, group: str, tp: TopicPartition, value: OffsetValue, record_offset: int
    ) -> None:
        self._pending.setdefault(producer_id, {}).setdefault(group, {})[tp] = CommittedOffset(
            value, record_offset
        )

    def has_pending(self, group: str, tp: TopicPartition | None = None) -> bool:
        for staged in self._pending.values():
            partitions = staged.get(group)
            if partitions and (tp is None or tp in partitions):
                return True
        return False

    def replay_end_txn_marker(self, producer_id: int, commit: bool) -> None:
        """COMMIT applies the staged offsets unless a newer record already committed the partition."""
        staged = self._pending.pop(producer_id, None)
        if not staged or not commit:
            return
        for group, partitions in staged.items():
            for tp, pending in partitions.items():
                current = self.fetch(group, tp)
                if current is None or pending.record_offset > current.record_offset:
                    self._offsets.setdefault(group, {})[tp] = pending

    # -- retention -----------------------------------------------------------------------------

    def expired(
        self, group: str, now_ms: int, retention_ms: int, empty_since_ms: int | None
    ) -> list[TopicPartition]:
        """Partitions of `group` whose offsets have expired (Kafka's `offsets.retention.ms` rules).

        A consumer group's offsets expire together, `retention_ms` after it became Empty
        (`empty_since_ms`); offsets of a group without a protocol (simple commits) expire one by
        one, `retention_ms` after their commit (or at their explicit v1 expire timestamp).
        """
        out = []
        for tp, committed in self._offsets.get(group, {}).items():
            if self.has_pending(group, tp):
                continue
            value = committed.value
            if value.expire_timestamp >= 0:
                due = value.expire_timestamp
            elif empty_since_ms is not None:
                due = empty_since_ms + retention_ms
            else:
                due = value.commit_timestamp + retention_ms
            if now_ms >= due:
                out.append(tp)
        return out
