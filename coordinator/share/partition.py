"""One share-partition's in-flight records, as Kafka's `SharePartition` keeps them (KIP-932).

Every offset from the share-partition start offset (SPSO) up to `end_offset` (the next offset never
yet acquired) has a state: AVAILABLE, ACQUIRED (by one member, until its acquisition lock ends),
ACKNOWLEDGED or ARCHIVED, and a delivery count (how often it was acquired). The SPSO moves past every
offset whose delivery is complete (ACKNOWLEDGED or ARCHIVED), so the window holds only what may still
be delivered. Kafka keeps batches of offsets and splits them as acknowledgements cut them; one entry
per offset here gives the same answers for the window sizes a stand-in broker sees (at most
`group.share.partition.max.record.locks` offsets).

This module is pure: time comes in as `now_ms`; the manager (manager.py) owns the clock, the timers
that end locks, and the writes to `__share_group_state`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import IntEnum

from minikafka.coordinator.errors import InvalidRecordState


class RecordState(IntEnum):
    """Kafka's RecordState ids; 0, 2 and 4 are what `__share_group_state` stores."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(IntEnum):
    """ShareFetch/ShareAcknowledge AcknowledgeTypes (RENEW from v2, KIP-1222)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


COMPLETE = frozenset({RecordState.ACKNOWLEDGED, RecordState.ARCHIVED})


@dataclass(slots=True)
class InFlight:
    state: RecordState
    delivery_count: int = 0
    member_id: str = ""
    lock_deadline_ms: int = 0
    # The delivery count last written to `__share_group_state`: an acquisition is not written (as in
    # Kafka), so a snapshot taken while a record is acquired stores this one.
    stored_count: int = 0


@dataclass(frozen=True, slots=True)
class Acquired:
    """One AcquiredRecords range of a ShareFetch answer."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A persisted range: the StateBatch of ShareSnapshotValue/ShareUpdateValue."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int


@dataclass(slots=True)
class SharePartition:
    start_offset: int
    delivery_count_limit: int
    max_in_flight: int
    records: dict[int, InFlight] = field(default_factory=dict)
    end_offset: int = -1

    def __post_init__(self) -> None:
        if self.end_offset < self.start_offset:
            self.end_offset = self.start_offset

    # -- what is there ------------------------------------------------------------------------

    def state_of(self, offset: int) -> InFlight | None:
        if offset < self.start_offset:
            return None
        return self.records.get(offset)

    def in_flight_count(self) -> int:
        return self.end_offset - self.start_offset

    def acquired_count(self) -> int:
        return sum(1 for r in self.records.values() if r.state == RecordState.ACQUIRED)

    def available_offsets(self) -> Iterator[int]:
        """Offsets below `end_offset` that may be acquired again, lowest first."""
        for offset in range(self.start_offset, self.end_offset):
            entry = self.records.get(offset)
            if entry is None or entry.state == RecordState.AVAILABLE:
                yield offset

    def next_fetch_offset(self) -> int:
        return next(self.available_offsets(), self.end_offset)

    def earliest_lock_deadline(self) -> int | None:
        deadlines = [r.lock_deadline_ms for r in self.records.values() if r.state == RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    # -- acquiring ----------------------------------------------------------------------------

    def can_acquire_new(self) -> bool:
        """Kafka's in-flight bound: no offset past the window of `max_in_flight` offsets from the SPSO."""
        return self.in_flight_count() < self.max_in_flight

    def acquire(self, offset: int, member_id: str, deadline_ms: int) -> int | None:
        """Acquire one offset for `member_id`; its new delivery count, or None if it cannot be acquired
        (taken, complete, or new and past the in-flight bound)."""
        if offset < self.start_offset:
            return None
        if offset >= self.end_offset:
            if offset - self.start_offset >= self.max_in_flight:
                return None
            for skipped in range(self.end_offset, offset):
                # offsets the log no longer has (compacted away, or never a data record)
                self.records[skipped] = InFlight(RecordState.ARCHIVED)
            self.end_offset = offset + 1
            entry = self.records[offset] = InFlight(RecordState.AVAILABLE)
        else:
            entry = self.records.setdefault(offset, InFlight(RecordState.AVAILABLE))
            if entry.state != RecordState.AVAILABLE:
                return None
        entry.state = RecordState.ACQUIRED
        entry.delivery_count += 1
        entry.member_id = member_id
        entry.lock_deadline_ms = deadline_ms
        return entry.delivery_count

    def archive(self, offset: int) -> None:
        """A record no member should get (a control record, an aborted transaction's record): complete at
        once, as Kafka archives what read_committed filters out."""
        if offset < self.start_offset:
            return
        if offset >= self.end_offset:
            if offset - self.start_offset >= self.max_in_flight:
                return
            for skipped in range(self.end_offset, offset):
                self.records[skipped] = InFlight(RecordState.ARCHIVED)
            self.end_offset = offset + 1
            self.records[offset] = InFlight(RecordState.ARCHIVED)
            return
        entry = self.records.setdefault(offset, InFlight(RecordState.AVAILABLE))
        if entry.state == RecordState.AVAILABLE:
            entry.state = RecordState.ARCHIVED

    # -- acknowledging ------------------------------------------------------------------------

    def acknowledge(self, member_id: str, first: int, last: int, types: list[int], now_ms: int,
                    lock_ms: int) -> list[int]:
        """Apply one AcknowledgementBatch: one type for the whole range or one per offset. Every offset
        must be ACQUIRED by `member_id` (GAP offsets may be anything), else nothing changes and
        InvalidRecordState is raised, as Kafka validates a batch before it changes any state. Returns
        the offsets whose state changed."""
        if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
            raise InvalidRecordState(f"invalid acknowledgement batch {first}-{last} with {len(types)} types")
        plan: list[tuple[int, AckType]] = []
        for index, offset in enumerate(range(first, last + 1)):
            kind = AckType(types[0] if len(types) == 1 else types[index])
            if kind == AckType.GAP:
                plan.append((offset, kind))
                continue
            entry = self.state_of(offset)
            if entry is None or entry.state != RecordState.ACQUIRED or entry.member_id != member_id:
                raise InvalidRecordState(f"offset {offset} is not acquired by member {member_id}")
            plan.append((offset, kind))
        changed = []
        for offset, kind in plan:
            if self._apply(offset, kind, now_ms, lock_ms):
                changed.append(offset)
        return changed

    def _apply(self, offset: int, kind: AckType, now_ms: int, lock_ms: int) -> bool:
        if offset < self.start_offset:
            return False
        if kind == AckType.GAP:
            if offset >= self.end_offset:
                return False
            self.records[offset] = InFlight(RecordState.ARCHIVED)
            return True
        entry = self.records[offset]
        if kind == AckType.ACCEPT:
            self._complete(entry, RecordState.ACKNOWLEDGED)
        elif kind == AckType.REJECT:
            self._complete(entry, RecordState.ARCHIVED)
        elif kind == AckType.RELEASE:
            self._release(entry)
        else:  # RENEW: a new lock for the same member (KIP-1222)
            entry.lock_deadline_ms = now_ms + lock_ms
            return False
        return True

    @staticmethod
    def _complete(entry: InFlight, state: RecordState) -> None:
        entry.state = state
        entry.member_id = ""
        entry.lock_deadline_ms = 0

    def _release(self, entry: InFlight) -> None:
        """Back to AVAILABLE, or ARCHIVED once delivered `delivery_count_limit` times (Kafka's
        InFlightState.tryUpdateState)."""
        if entry.delivery_count >= self.delivery_count_limit:
            self._complete(entry, RecordState.ARCHIVED)
        else:
            self._complete(entry, RecordState.AVAILABLE)

    def release_expired(self, now_ms: int) -> list[int]:
        """Acquisition locks that ended by `now_ms`: their records are released."""
        return self._release_where(lambda e: e.lock_deadline_ms <= now_ms)

    def release_member(self, member_id: str) -> list[int]:
        """A member that closed its share session or left the group gives back what it holds."""
        return self._release_where(lambda e: e.member_id == member_id)

    def _release_where(self, chosen: Callable[[InFlight], bool]) -> list[int]:
        released = []
        for offset, entry in self.records.items():
            if entry.state == RecordState.ACQUIRED and chosen(entry):
                self._release(entry)
                released.append(offset)
        return released

    # -- the start offset ---------------------------------------------------------------------

    def advance_start(self) -> bool:
        """Move the SPSO past completed offsets; True if it moved."""
        moved = False
        while self.start_offset < self.end_offset:
            entry = self.records.get(self.start_offset)
            if entry is None or entry.state not in COMPLETE:
                break
            del self.records[self.start_offset]
            self.start_offset += 1
            moved = True
        return moved

    def move_start_to(self, offset: int) -> bool:
        """The log start moved past the SPSO (retention, DeleteRecords) or an admin reset it: what lies
        below is gone, acquired or not (Kafka's updateCacheAndOffsets). True if it moved."""
        if offset <= self.start_offset:
            return False
        for gone in [o for o in self.records if o < offset]:
            del self.records[gone]
        self.start_offset = offset
        self.end_offset = max(self.end_offset, offset)
        self.advance_start()
        return True

    def reset_to(self, offset: int) -> None:
        """AlterShareGroupOffsets: start over at `offset` with nothing in flight."""
        self.records.clear()
        self.start_offset = offset
        self.end_offset = offset

    # -- persistence --------------------------------------------------------------------------

    def state_batches(self, offsets: Iterable[int] | None = None) -> list[StateBatch]:
        """The persisted view of `offsets` (all in-flight offsets when None): an ACQUIRED record is stored as
        it was last written (AVAILABLE with that delivery count), as Kafka never persists an acquisition.
        Consecutive equal offsets become one range."""
        chosen = sorted(self.records) if offsets is None else sorted(o for o in set(offsets)
                                                                    if o >= self.start_offset)
        batches: list[StateBatch] = []
        for offset in chosen:
            entry = self.records.get(offset)
            if entry is None:
                continue
            acquired = entry.state == RecordState.ACQUIRED
            state = RecordState.AVAILABLE if acquired else entry.state
            count = entry.stored_count if acquired else entry.delivery_count
            last = batches[-1] if batches else None
            if (last is not None and last.last_offset == offset - 1 and last.state == state
                    and last.delivery_count == count):
                batches[-1] = StateBatch(last.first_offset, offset, state, count)
            else:
                batches.append(StateBatch(offset, offset, state, count))
        return batches

    def mark_stored(self, batches: Iterable[StateBatch]) -> None:
        """`batches` were written: their counts are what a later snapshot stores for acquired records."""
        for batch in batches:
            for offset in range(batch.first_offset, batch.last_offset + 1):
                entry = self.records.get(offset)
                if entry is not None:
                    entry.stored_count = batch.delivery_count

    def restore(self, batches: Iterable[StateBatch]) -> None:
        """Apply persisted batches (a snapshot's, then each update's) over what is known."""
        for batch in batches:
            for offset in range(max(batch.first_offset, self.start_offset), batch.last_offset + 1):
                self.records[offset] = InFlight(batch.state, batch.delivery_count,
                                                stored_count=batch.delivery_count)
            self.end_offset = max(self.end_offset, batch.last_offset + 1)

    def delivery_complete_count(self) -> int:
        return sum(1 for r in self.records.values() if r.state in COMPLETE)


def ranges(offsets_and_counts: Iterable[tuple[int, int]]) -> list[Acquired]:
    """AcquiredRecords ranges from (offset, delivery count) pairs in offset order."""
    out: list[Acquired] = []
    for offset, count in offsets_and_counts:
        last = out[-1] if out else None
        if last is not None and last.last_offset == offset - 1 and last.delivery_count == count:
            out[-1] = Acquired(last.first_offset, offset, count)
        else:
            out.append(Acquired(offset, offset, count))
    return out
