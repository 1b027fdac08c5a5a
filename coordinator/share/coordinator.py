"""ShareCoordinator: share groups (KIP-932) on one node, composed as Kafka 4.2 splits them.

- `group.ShareGroupEngine`: membership and assignment (ShareGroupHeartbeat), Kafka's group coordinator
  part;
- `partition.SharePartition`: each share-partition's in-flight records, Kafka's SharePartition, here
  with share sessions and the fetch path (ShareFetch, ShareAcknowledge: Kafka's SharePartitionManager);
- `state_log.ShareStateTopic`: the share-partition states in `__share_group_state` (Kafka's share
  coordinator and its persister), replayed at start.

Acquisition locks run on the broker clock through `Timers`, so a manual clock ends them as it is
advanced. Membership is kept in memory: after a restart members rejoin (their heartbeat gets
UNKNOWN_MEMBER_ID and they join again), while what was acknowledged is in `__share_group_state`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol, cast

from minikafka.coordinator.errors import (
    GroupIdNotFound,
    InvalidShareRequest,
    InvalidShareSessionEpoch,
    NonEmptyGroup,
    ShareSessionNotFound,
)
from minikafka.coordinator.ports import LogManager
from minikafka.coordinator.share.group import (
    Assignment,
    ShareGroup,
    ShareGroupEngine,
    ShareHeartbeat,
    ShareHeartbeatResult,
)
from minikafka.coordinator.share.partition import AckType, Acquired, SharePartition, ranges
from minikafka.coordinator.share.state_log import (
    SNAPSHOT,
    UPDATE,
    PersistedState,
    ShareKey,
    ShareStateTopic,
    ShareStateValue,
)
from minikafka.coordinator.timers import Timers
from minikafka.protocol.records import iter_whole_batches
from minikafka.storage.clock import Clock

_log = logging.getLogger("minikafka.coordinator.share")

FINAL_EPOCH = -1
INITIAL_EPOCH = 0
TopicPartition = tuple[str, int]


class _AbortedTxn(Protocol):
    producer_id: int
    first_offset: int
    last_offset: int


class _Read(Protocol):
    records: object


class FetchableLog(Protocol):
    """What the fetch path reads of a partition log (storage/log.py's PartitionLog)."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def last_stable_offset(self) -> int: ...

    @property
    def leader_epoch(self) -> int: ...

    def read(self, offset: int, max_bytes: int, *, upper_bound: int | None = None,
             min_one_batch: bool = True, as_region: bool = False) -> _Read: ...

    def collect_aborted(self, start: int, end: int) -> list[_AbortedTxn]: ...


@dataclass(frozen=True, slots=True)
class ShareConfig:
    """The broker's group.share.* and share.coordinator.* settings (Kafka 4.2 defaults)."""

    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    record_lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    partition_max_record_locks: int = 2000
    max_size: int = 200
    state_topic_num_partitions: int = 50
    snapshot_update_records: int = 500


@dataclass(slots=True)
class ShareSession:
    epoch: int
    partitions: list[TopicPartition] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    records: bytes
    acquired: tuple[Acquired, ...]


@dataclass(frozen=True, slots=True)
class SharePartitionView:
    """One share-partition as the describe APIs, the inspector and the metrics show it."""

    topic: str
    partition: int
    start_offset: int
    end_offset: int
    in_flight: int
    acquired: int
    lag: int


class ShareCoordinator:
    def __init__(self, logs: LogManager, clock: Clock, config: ShareConfig | None = None) -> None:
        self.config = config or ShareConfig()
        self._logs = logs
        self._clock = clock
        self.timers = Timers(clock, name="share-timers")
        self.topic = ShareStateTopic(logs, self.config.state_topic_num_partitions)
        self.group_overrides: Callable[[str], Mapping[str, str]] = lambda _group: {}
        # Wakes share fetches parked on a partition when records become available again.
        self.notify: Callable[[TopicPartition], None] = lambda _tp: None
        self.partitions: dict[tuple[str, str, int], SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self._persisted: dict[ShareKey, PersistedState] = {}
        self._updates: dict[tuple[str, str, int], int] = {}
        self.engine = ShareGroupEngine(
            partition_count=self._partition_count,
            session_timeout_ms=lambda g: self._group_int(g, "share.session.timeout.ms", self.config.session_timeout_ms),
            heartbeat_interval_ms=lambda g: self._group_int(g, "share.heartbeat.interval.ms",
                                                            self.config.heartbeat_interval_ms),
            schedule_expiry=self._schedule_expiry,
            cancel_expiry=lambda g, m: self.timers.cancel(("share-session", g, m)),
            on_member_left=self._release_member,
            on_assigned=self._initialize,
            max_size=self.config.max_size,
        )
        self.loaded = False

    # -- lifecycle -----------------------------------------------------------------------------

    def load_steps(self) -> Iterator[None]:
        """Replay `__share_group_state`; share-partitions are rebuilt from it when first used."""
        self._persisted = self.topic.replay()
        for key in self._persisted:
            # Kafka keeps share groups in __consumer_offsets; here a group with share-partition state
            # comes back empty, its members rejoining.
            self.engine.groups.setdefault(key.group_id, ShareGroup(key.group_id))
        yield None
        if self._persisted:
            _log.info("loaded %d share-partition states from __share_group_state", len(self._persisted))
        self.loaded = True

    def reset(self) -> None:
        """A broker reset: no share group, session or share-partition state (`__share_group_state` goes with
        the other topics); members of a group that is gone rejoin, as after an unknown member id."""
        self.timers.clear()
        self.engine.groups.clear()
        self.partitions.clear()
        self.sessions.clear()
        self._persisted = {}
        self._updates.clear()
        self.loaded = True

    def start(self) -> None:
        self.timers.start()

    async def close(self) -> None:
        await self.timers.close()

    # -- config --------------------------------------------------------------------------------

    def _group_int(self, group_id: str, key: str, default: int) -> int:
        value = self.group_overrides(group_id).get(key)
        return int(value) if value is not None else default

    def lock_duration_ms(self, group_id: str) -> int:
        return self._group_int(group_id, "share.record.lock.duration.ms", self.config.record_lock_duration_ms)

    def read_committed(self, group_id: str) -> bool:
        return self.group_overrides(group_id).get("share.isolation.level", "read_uncommitted") == "read_committed"

    def _partition_count(self, topic: str) -> int | None:
        meta = self._logs.topic(topic)
        return meta.partitions if meta is not None and not meta.internal else None

    # -- membership ----------------------------------------------------------------------------

    def heartbeat(self, request: ShareHeartbeat) -> ShareHeartbeatResult:
        return self.engine.heartbeat(request)

    @property
    def groups(self) -> dict[str, ShareGroup]:
        return self.engine.groups

    def group(self, group_id: str) -> ShareGroup | None:
        return self.engine.groups.get(group_id)

    def is_share_group(self, group_id: str) -> bool:
        return group_id in self.engine.groups

    def session_deadline(self, group_id: str, member_id: str) -> int | None:
        return self.timers.deadline(("share-session", group_id, member_id))

    def _schedule_expiry(self, group_id: str, member_id: str, timeout_ms: int) -> None:
        self.timers.schedule(("share-session", group_id, member_id), self._clock.now_ms() + timeout_ms,
                             lambda: self._expire(group_id, member_id))

    def _expire(self, group_id: str, member_id: str) -> None:
        _log.info("share group %s member %s session expired", group_id, member_id)
        self.engine.remove_member(group_id, member_id)

    def _release_member(self, group_id: str, member_id: str) -> None:
        for (group, topic, partition), share_partition in list(self.partitions.items()):
            if group == group_id:
                released = share_partition.release_member(member_id)
                self._after_change(group, topic, partition, released)

    # -- share-partition state -----------------------------------------------------------------

    def _key(self, group_id: str, topic: str, partition: int) -> ShareKey | None:
        meta = self._logs.topic(topic)
        return ShareKey(group_id, meta.topic_id, partition) if meta is not None else None

    def _initialize(self, group_id: str, everything: Assignment) -> None:
        """Kafka initializes a share-partition's state when it is first assigned: its start offset from
        `share.auto.offset.reset` (latest by default), written as a ShareSnapshot."""
        for topic, partitions in everything.items():
            for partition in partitions:
                self.share_partition(group_id, topic, partition)

    def share_partition(self, group_id: str, topic: str, partition: int) -> SharePartition | None:
        found = self.partitions.get((group_id, topic, partition))
        if found is not None:
            return found
        key = self._key(group_id, topic, partition)
        log = self._logs.partition(topic, partition)
        if key is None or log is None:
            return None
        persisted = self._persisted.get(key)
        if persisted is not None:
            created = SharePartition(persisted.start_offset, self.config.delivery_count_limit,
                                     self.config.partition_max_record_locks)
            created.restore(persisted.batches)
            created.advance_start()
            self._updates[(group_id, topic, partition)] = persisted.updates_since_snapshot
        else:
            reset = self.group_overrides(group_id).get("share.auto.offset.reset", "latest")
            fetchable = cast(FetchableLog, log)
            start = fetchable.log_start_offset if reset == "earliest" else fetchable.high_watermark
            created = SharePartition(start, self.config.delivery_count_limit, self.config.partition_max_record_locks)
        self.partitions[(group_id, topic, partition)] = created
        if persisted is None:
            self._write_snapshot(group_id, topic, partition, created, key)
        return created

    def _write_snapshot(self, group_id: str, topic: str, partition: int, state: SharePartition,
                        key: ShareKey) -> None:
        now = self._clock.now_ms()
        value = ShareStateValue(snapshot_epoch=0, leader_epoch=0, start_offset=state.start_offset,
                                batches=tuple(state.state_batches()), state_epoch=0, create_ms=now, write_ms=now,
                                delivery_complete_count=state.delivery_complete_count())
        self.topic.write(key, SNAPSHOT, value, now)
        state.mark_stored(value.batches)
        self._updates[(group_id, topic, partition)] = 0

    def _persist(self, group_id: str, topic: str, partition: int, changed: Iterable[int],
                 start_moved: bool) -> None:
        """A ShareUpdate with the changed offsets (a ShareSnapshot every `snapshot_update_records`
        updates, as Kafka's share coordinator bounds what replay reads)."""
        state = self.partitions[(group_id, topic, partition)]
        key = self._key(group_id, topic, partition)
        if key is None:
            return
        count = self._updates.get((group_id, topic, partition), 0)
        if count >= self.config.snapshot_update_records:
            self._write_snapshot(group_id, topic, partition, state, key)
            return
        now = self._clock.now_ms()
        value = ShareStateValue(snapshot_epoch=0, leader_epoch=0,
                                start_offset=state.start_offset if start_moved else -1,
                                batches=tuple(state.state_batches(changed)),
                                delivery_complete_count=state.delivery_complete_count())
        self.topic.write(key, UPDATE, value, now)
        state.mark_stored(value.batches)
        self._updates[(group_id, topic, partition)] = count + 1

    def _after_change(self, group_id: str, topic: str, partition: int, changed: list[int],
                      start_moved: bool = False) -> None:
        if not changed and not start_moved:
            return
        state = self.partitions[(group_id, topic, partition)]
        start_moved = state.advance_start() or start_moved
        self._persist(group_id, topic, partition, changed, start_moved)
        if state.next_fetch_offset() < state.end_offset:
            self.notify((topic, partition))
        self._schedule_lock_timer(group_id, topic, partition)

    def _schedule_lock_timer(self, group_id: str, topic: str, partition: int) -> None:
        state = self.partitions[(group_id, topic, partition)]
        deadline = state.earliest_lock_deadline()
        key = ("share-lock", group_id, topic, partition)
        if deadline is None:
            self.timers.cancel(key)
        elif self.timers.deadline(key) != deadline:
            self.timers.schedule(key, deadline, lambda: self._expire_locks(group_id, topic, partition, deadline))

    def _expire_locks(self, group_id: str, topic: str, partition: int, deadline: int) -> None:
        state = self.partitions.get((group_id, topic, partition))
        if state is None:
            return
        # The timer ran because `deadline` passed: the locks ending then end now, whatever the clock reads.
        released = state.release_expired(max(self._clock.now_ms(), deadline))
        if released:
            _log.info("share group %s: %d acquisition locks on %s-%d expired", group_id, len(released), topic,
                      partition)
        self._after_change(group_id, topic, partition, released)
        self._schedule_lock_timer(group_id, topic, partition)

    # -- share sessions ------------------------------------------------------------------------

    def update_session(self, group_id: str, member_id: str, epoch: int, added: Iterable[TopicPartition],
                       forgotten: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Kafka's ShareSessionCache: epoch 0 opens a session (replacing one the member had), -1 closes
        it, any other must be the session's next epoch. Returns the partitions the session reads."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            session = self.sessions[key] = ShareSession(1)
        elif epoch == FINAL_EPOCH:
            if key not in self.sessions:
                raise ShareSessionNotFound(f"no share session for member {member_id}")
            return []
        else:
            found = self.sessions.get(key)
            if found is None:
                raise ShareSessionNotFound(f"no share session for member {member_id}")
            if found.epoch != epoch:
                raise InvalidShareSessionEpoch(f"share session epoch {epoch} is not {found.epoch}")
            session = found
            session.epoch = session.epoch + 1 if session.epoch < 2**31 - 1 else 1
        gone = set(forgotten)
        session.partitions = [tp for tp in session.partitions if tp not in gone]
        for tp in added:
            if tp not in session.partitions:
                session.partitions.append(tp)
        return list(session.partitions)

    def check_session(self, group_id: str, member_id: str, epoch: int) -> None:
        """ShareAcknowledge's session check: it may not open a session, and may close one."""
        if epoch == INITIAL_EPOCH:
            raise InvalidShareSessionEpoch("ShareAcknowledge cannot open a share session (epoch 0)")
        self.update_session(group_id, member_id, epoch, (), ())

    def close_session(self, group_id: str, member_id: str) -> None:
        """After a final-epoch request: what the member still holds is released."""
        if self.sessions.pop((group_id, member_id), None) is not None:
            self._release_member(group_id, member_id)

    # -- fetch and acknowledge -----------------------------------------------------------------

    def acknowledge(self, group_id: str, member_id: str, topic: str, partition: int,
                    batches: Iterable[tuple[int, int, list[int]]], *, renew_allowed: bool) -> None:
        """Raises InvalidRecordState (nothing of that batch applied) or InvalidShareRequest."""
        state = self.share_partition(group_id, topic, partition)
        if state is None:
            raise InvalidShareRequest(f"{topic}-{partition} has no share-partition for group {group_id}")
        lock_ms = self.lock_duration_ms(group_id)
        changed: list[int] = []
        try:
            for first, last, types in batches:
                if not renew_allowed and AckType.RENEW in types:
                    raise InvalidShareRequest("RENEW needs ShareFetch/ShareAcknowledge v2 with IsRenewAck")
                if any(kind not in AckType._value2member_map_ for kind in types):
                    raise InvalidShareRequest(f"unknown acknowledge type in {types}")
                changed += state.acknowledge(member_id, first, last, types, self._clock.now_ms(), lock_ms)
        finally:
            self._after_change(group_id, topic, partition, changed)

    def acquire(self, group_id: str, member_id: str, topic: str, partition: int, max_records: int,
                max_bytes: int) -> FetchedPartition:
        """Acquire up to `max_records` records for the member, and the batches that hold them."""
        state = self.share_partition(group_id, topic, partition)
        log = cast(FetchableLog | None, self._logs.partition(topic, partition))
        if state is None or log is None or max_records <= 0:
            return FetchedPartition(b"", ())
        moved = state.move_start_to(log.log_start_offset)
        if moved:
            self._after_change(group_id, topic, partition, [], start_moved=True)
        committed = self.read_committed(group_id)
        upper = log.last_stable_offset if committed else log.high_watermark
        offset = state.next_fetch_offset()
        if offset >= upper:
            return FetchedPartition(b"", ())
        records = log.read(offset, max(max_bytes, 0), upper_bound=upper, min_one_batch=True).records
        chunk = bytes(records) if isinstance(records, bytes | bytearray) else b""
        aborted = log.collect_aborted(offset, upper) if committed else []
        deadline = self._clock.now_ms() + self.lock_duration_ms(group_id)
        taken: list[tuple[int, int]] = []
        kept: list[bytes] = []
        archived: list[int] = []
        for pos, header in iter_whole_batches(chunk):
            if len(taken) >= max_records:
                break
            offsets = range(max(header.base_offset, offset), header.last_offset + 1)
            if header.is_control or (header.is_transactional and _aborted(aborted, header.producer_id,
                                                                           header.base_offset)):
                for skipped in offsets:
                    state.archive(skipped)
                    archived.append(skipped)
                continue
            before = len(taken)
            for record_offset in offsets:
                if len(taken) >= max_records:
                    break
                count = state.acquire(record_offset, member_id, deadline)
                if count is not None:
                    taken.append((record_offset, count))
            if len(taken) > before:
                kept.append(chunk[pos:pos + header.size])
        if archived:
            self._after_change(group_id, topic, partition, archived)
        self._schedule_lock_timer(group_id, topic, partition)
        return FetchedPartition(b"".join(kept), tuple(ranges(taken)))

    # -- admin ---------------------------------------------------------------------------------

    def views(self, group_id: str) -> list[SharePartitionView]:
        out = []
        known = {(topic, partition) for (group, topic, partition) in self.partitions if group == group_id}
        for key in self._persisted:
            if key.group_id == group_id:
                meta = self._logs.topic_by_id(key.topic_id)
                if meta is not None:
                    known.add((meta.name, key.partition))
        for topic, partition in sorted(known):
            state = self.share_partition(group_id, topic, partition)
            if state is None:
                continue
            log = cast(FetchableLog | None, self._logs.partition(topic, partition))
            end = log.high_watermark if log is not None else state.end_offset
            out.append(SharePartitionView(topic, partition, state.start_offset, state.end_offset,
                                          state.in_flight_count(), state.acquired_count(),
                                          max(0, end - state.start_offset - state.delivery_complete_count())))
        return out

    def delete_group(self, group_id: str) -> None:
        """DeleteGroups of a share group: only an empty one; its share-partition states are deleted."""
        group = self.engine.groups.get(group_id)
        if group is not None and group.members:
            raise NonEmptyGroup(f"share group {group_id} has members")
        if not self.is_share_group(group_id):
            raise GroupIdNotFound(f"no share group {group_id}")
        self.delete_offsets(group_id, None)
        self.engine.delete(group_id)

    def delete_offsets(self, group_id: str, topics: set[str] | None) -> None:
        """DeleteShareGroupOffsets (and DeleteGroups): tombstones in `__share_group_state`."""
        now = self._clock.now_ms()
        for key in [k for k in self.partitions if k[0] == group_id and (topics is None or k[1] in topics)]:
            del self.partitions[key]
            share_key = self._key(*key)
            if share_key is not None:
                self._persisted.pop(share_key, None)
                self.topic.delete(share_key, now)
        for share_key in [k for k in self._persisted if k.group_id == group_id]:
            meta = self._logs.topic_by_id(share_key.topic_id)
            if topics is None or (meta is not None and meta.name in topics):
                del self._persisted[share_key]
                self.topic.delete(share_key, now)

    def alter_offset(self, group_id: str, topic: str, partition: int, offset: int) -> None:
        """AlterShareGroupOffsets of an empty group: the share-partition starts over at `offset`."""
        state = self.share_partition(group_id, topic, partition)
        key = self._key(group_id, topic, partition)
        if state is None or key is None:
            raise InvalidShareRequest(f"unknown partition {topic}-{partition}")
        state.reset_to(offset)
        self._write_snapshot(group_id, topic, partition, state, key)

    def topic_id(self, name: str) -> uuid.UUID | None:
        meta = self._logs.topic(name)
        return meta.topic_id if meta is not None else None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        meta = self._logs.topic_by_id(topic_id)
        return meta.name if meta is not None else None


def _aborted(aborted: list[_AbortedTxn], producer_id: int, base_offset: int) -> bool:
    return any(t.producer_id == producer_id and t.first_offset <= base_offset <= t.last_offset for t in aborted)
