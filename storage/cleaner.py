"""The log cleaner: compaction of `cleanup.policy=compact` (and `compact,delete`) partitions.

Follows Kafka's LogCleaner / LogCleanerManager / Cleaner (storage/internals/log):
- Which log: every compacted partition gets a LogToClean from its cleaner checkpoint (the first dirty
  offset, in the log dir's `cleaner-offset-checkpoint`) to its first uncleanable offset: the last
  stable offset, the active segment's base, and the first segment still within
  `min.compaction.lag.ms`. The filthiest log whose dirty ratio is over `min.cleanable.dirty.ratio`, or
  any whose dirty segments passed `max.compaction.lag.ms`, is cleaned next.
- What stays: an offset map (key digest -> last offset) is built over the dirty range; then every
  segment from the log start to the map's end is rewritten, group by group (up to segment.bytes), and
  a record stays only if it is the last of its key. Tombstones get a delete horizon (now +
  `delete.retention.ms`, stored in the batch header, KIP-534) the first time they are cleaned and go at
  the first cleaning after it. Aborted transactional batches go; a transaction marker stays until no
  batch of its transaction is left and its own delete horizon passed. A batch whose records all went
  is kept empty when it holds a producer's last sequence (or epoch) or ends the cleaned range, so
  offsets and idempotence survive. Batches keep their base and last offsets: offsets never move,
  gaps are normal.
- Swap: the group is written to `<base>.log.cleaned` (and its three indexes), fsynced, renamed to
  `.swap` (the commit point), the old segments removed, then renamed to its final name (Kafka's
  replaceSegments); PartitionLog.open completes or discards a swap a crash interrupted.
Differences from Kafka: one cleaner, run on the event loop in slices of a few milliseconds (steps are
generators; `LogCleaner` drives them) instead of threads; the offset map is a dict of MD5 digests
bounded by entries (`DEFAULT_MAP_ENTRIES`) rather than a byte buffer; old segment files are removed
at once rather than after file.delete.delay.ms (reads here never outlive the event-loop step).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import heapq
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Protocol, TypeVar

import structlog
from minikafka.protocol.records import (
    HEADER_SIZE,
    BatchHeader,
    ControlType,
    RawRecord,
    decode_batch,
    decompress,
    empty_batch,
    parse_control_record,
    rebuild_batch,
    rebuild_batch_raw,
    scan_records,
)
from minikafka.storage.checkpoint import CLEANER_CHECKPOINT_FILE, TopicPartition, read_checkpoint, write_checkpoint
from minikafka.storage.clock import Clock
from minikafka.storage.config import LONG_MAX
from minikafka.storage.index import AbortedTxn, TransactionIndex
from minikafka.storage.log import PartitionLog, fsync_dir
from minikafka.storage.segment import CLEANED_SUFFIX, SWAP_SUFFIX, LogSegment

_log = structlog.get_logger("minikafka.storage.cleaner")

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Blocking:
    """A step that blocks on the disk (fsync): the driver runs it on a thread, off the event loop.
    Only fsyncs: a stop may abandon one midway, as what it makes durable is then deleted or rebuilt."""

    run: Callable[[], None]


async def _off_the_loop(run: Callable[[], None]) -> None:
    """Run a Blocking step on a daemon thread of its own, not asyncio's default executor: the event
    loop's close waits for that executor's threads, so a shutdown during the fsync of a large cleaned
    segment would wait out the whole fsync for a file the stop deletes anyway."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def settle(error: BaseException | None) -> None:
        if not done.done():
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)

    def work() -> None:
        error: BaseException | None = None
        try:
            run()
        except BaseException as exc:  # handed to the awaiting task, which reports it
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody is waiting
            loop.call_soon_threadsafe(settle, error)

    threading.Thread(target=work, name="minikafka-log-cleaner-fsync", daemon=True).start()
    await done


# The cleaner's work, cut into steps: a generator yields None between batches (the driver may let
# the event loop run there) or a Blocking step to run on a thread, and returns its result.
Steps = Generator[Blocking | None, None, T]

# Steps of a swap where a test can make the broker die as kill -9 would (minikafka.cleaner.crash.point).
CRASH_POINTS = ("after_cleaned", "after_swap", "after_delete")
# Kafka sizes its map from log.cleaner.dedupe.buffer.size (128 MiB / 24 bytes an entry, 90% full);
# a Python dict entry costs about five times that, so the bound is in entries.
DEFAULT_MAP_ENTRIES = 1_000_000
DUP_BUFFER_LOAD_FACTOR = 0.9
# How long the cleaner works before letting the event loop serve requests again.
SLICE_S = 0.004
# Logs cleaned one after the other per wake-up before the cleaner backs off (Kafka's thread loops on).
MAX_ROUNDS_PER_RUN = 1000


class OffsetMap:
    """Key -> last offset of the dirty range (Kafka's SkimpyOffsetMap: keys kept as MD5 digests)."""

    def __init__(self, slots: int = DEFAULT_MAP_ENTRIES) -> None:
        self.slots = slots
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1

    def clear(self) -> None:
        self._offsets.clear()
        self.latest_offset = -1

    def put(self, key: bytes, offset: int) -> None:
        self._offsets[hashlib.md5(key, usedforsecurity=False).digest()] = offset
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        return self._offsets.get(hashlib.md5(key, usedforsecurity=False).digest(), -1)

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def utilization(self) -> float:
        return len(self._offsets) / self.slots


@dataclass(slots=True)
class CleanerStats:
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_retained: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    invalid_messages: int = 0
    started: float = field(default_factory=time.monotonic)
    busy_s: float = 0.0  # time spent cleaning, without the event-loop turns between slices

    @property
    def mb_per_s(self) -> float:
        return self.bytes_read / 1e6 / self.busy_s if self.busy_s > 0 else 0.0


@dataclass(frozen=True, slots=True)
class LogToClean:
    topic: str
    partition: int
    log: PartitionLog
    first_dirty_offset: int
    first_uncleanable_offset: int
    need_compaction_now: bool
    clean_bytes: int
    cleanable_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


# --- which offsets may be cleaned (LogCleanerManager) ------------------------------------------


def segments_in_range(log: PartitionLog, start: int, end: int) -> list[LogSegment]:
    """Segments holding offsets in [start, end): Kafka's logSegments(from, to), from the segment that
    holds `start` to the last one whose base is below `end`."""
    if start >= end:
        return []
    segments = log.segments
    first = 0
    for index, segment in enumerate(segments):
        if segment.base_offset <= start:
            first = index
        else:
            break
    return [segment for segment in segments[first:] if segment.base_offset < end]


def non_active_segments_from(log: PartitionLog, offset: int) -> list[LogSegment]:
    return segments_in_range(log, offset, log.active.base_offset)


def cleanable_offsets(log: PartitionLog, last_clean: int | None, now_ms: int) -> tuple[int, int, bool]:
    """(first dirty offset, first uncleanable offset, checkpoint must be reset) as Kafka's
    LogCleanerManager.cleanableOffsets."""
    start = log.log_start_offset
    checkpoint = last_clean if last_clean is not None else start
    if checkpoint < start or checkpoint > log.log_end_offset:
        first_dirty, force = start, True
    else:
        first_dirty, force = checkpoint, False
    bounds = [log.last_stable_offset, log.active.base_offset]
    lag = max(log.config.min_compaction_lag_ms, 0)
    if lag > 0:
        for segment in non_active_segments_from(log, first_dirty):
            if segment.largest_timestamp() > now_ms - lag:
                bounds.append(segment.base_offset)
                break
    return first_dirty, max(first_dirty, min(bounds)), force


def _first_batch_timestamp(segment: LogSegment) -> int:
    header = segment.header_at(0) if segment.size else None
    return header.max_timestamp if header is not None else -1


def max_compaction_delay(log: PartitionLog, first_dirty: int, now_ms: int) -> int:
    """How long past max.compaction.lag.ms the oldest dirty segment is (0: not yet)."""
    timestamps = [ts for ts in map(_first_batch_timestamp, non_active_segments_from(log, first_dirty)) if ts > 0]
    earliest = min(timestamps) if timestamps else LONG_MAX
    clean_until = now_ms - max(log.config.max_compaction_lag_ms, 0)
    return clean_until - earliest if earliest < clean_until else 0


def log_to_clean(topic: str, partition: int, log: PartitionLog, first_dirty: int, uncleanable: int,
                 need_compaction_now: bool) -> LogToClean:
    """Kafka's LogToClean sizes: clean bytes before the first dirty offset, cleanable bytes up to the
    segment holding the first uncleanable offset (calculateCleanableBytes)."""
    non_active = non_active_segments_from(log, uncleanable)
    first_uncleanable_base = (non_active[0] if non_active else log.active).base_offset
    clean_bytes = sum(s.size for s in log.segments if s.base_offset < first_dirty)
    cleanable = sum(s.size for s in segments_in_range(log, min(first_dirty, first_uncleanable_base),
                                                      first_uncleanable_base))
    return LogToClean(topic, partition, log, first_dirty, uncleanable, need_compaction_now, clean_bytes, cleanable)


def group_segments_by_size(segments: list[LogSegment], max_size: int, max_index_size: int,
                           first_uncleanable: int) -> list[list[LogSegment]]:
    """Consecutive segments whose sizes (log, offset index, time index) fit one segment, and whose
    offsets fit its 32-bit relative offsets (Kafka's groupSegmentsBySize)."""
    groups: list[list[LogSegment]] = []
    index = 0
    while index < len(segments):
        group = [segments[index]]
        log_size = group[0].size
        offset_index_size = len(group[0].offset_index.offsets) * 8
        time_index_size = len(group[0].time_index.timestamps) * 12
        index += 1
        while index < len(segments):
            candidate = segments[index]
            last_offset = (segments[index + 1].base_offset - 1 if index + 1 < len(segments)
                           else first_uncleanable - 1)
            if (log_size + candidate.size > max_size
                    or offset_index_size + len(candidate.offset_index.offsets) * 8 > max_index_size
                    or time_index_size + len(candidate.time_index.timestamps) * 12 > max_index_size
                    or (candidate.size and last_offset - group[0].base_offset > 2**31 - 1)):
                break
            group.append(candidate)
            log_size += candidate.size
            offset_index_size += len(candidate.offset_index.offsets) * 8
            time_index_size += len(candidate.time_index.timestamps) * 12
            index += 1
        groups.append(group)
    return groups


# --- transactions met while cleaning (Kafka's CleanedTransactionMetadata) -----------------------


class _CleanedTransactions:
    def __init__(self) -> None:
        self._pending: list[tuple[int, int, AbortedTxn]] = []  # heap by first offset
        self._seen: set[AbortedTxn] = set()
        self._ongoing_committed: set[int] = set()
        self._ongoing_aborted: dict[int, list[AbortedTxn | int | None]] = {}  # pid -> [txn, last batch offset]
        self.cleaned_index: TransactionIndex | None = None

    def add_aborted(self, txns: Iterable[AbortedTxn]) -> None:
        for txn in txns:
            if txn not in self._seen:
                self._seen.add(txn)
                heapq.heappush(self._pending, (txn.first_offset, len(self._seen), txn))

    def _consume_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0][0] <= offset:
            txn = heapq.heappop(self._pending)[2]
            self._ongoing_aborted.setdefault(txn.producer_id, [txn, None])

    def on_control_batch_read(self, header: BatchHeader, control_type: ControlType | None) -> bool:
        """Whether the marker may go: no batch of its transaction was met in this cleaning."""
        self._consume_up_to(header.last_offset)
        producer_id = header.producer_id
        if control_type == ControlType.ABORT:
            state = self._ongoing_aborted.pop(producer_id, None)
            if state is not None and state[1] is not None:
                # Data of the aborted transaction was met: the marker and its index entry stay.
                txn = state[0]
                assert isinstance(txn, AbortedTxn)
                if self.cleaned_index is not None:
                    self.cleaned_index.append(txn)
                return False
            return True
        if control_type == ControlType.COMMIT:
            if producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(producer_id)
                return False
            return True
        return False

    def on_batch_read(self, header: BatchHeader) -> bool:
        """Whether the data batch belongs to an aborted transaction (and so goes)."""
        self._consume_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        state = self._ongoing_aborted.get(header.producer_id)
        if state is not None:
            state[1] = header.last_offset
            return True
        self._ongoing_committed.add(header.producer_id)
        return False


class _Retention(Enum):
    DELETE = 0  # the batch goes without looking at its records
    RETAIN_EMPTY = 1  # the batch stays, even with no record left
    DELETE_EMPTY = 2  # the batch goes if no record is left


def _control_type(data: bytes) -> ControlType | None:
    records = decode_batch(data).records
    if not records:
        return None  # an emptied marker kept for its producer's epoch
    try:
        return parse_control_record(records[0])[0]
    except ValueError:
        return None


# --- cleaning one log (Kafka's Cleaner) --------------------------------------------------------


class CleaningAborted(Exception):
    """The log changed under the cleaner (deleted, retention removed a segment being cleaned)."""


class Cleaner:
    """Cleans one LogToClean; every method is a generator that yields between batches."""

    def __init__(self, offset_map: OffsetMap | None = None,
                 crash_point: Callable[[str], None] = lambda _point: None,
                 still_current: Callable[[LogToClean], bool] = lambda _ltc: True) -> None:
        self.offset_map = offset_map if offset_map is not None else OffsetMap()
        self.crash_point = crash_point
        self.still_current = still_current

    def clean(self, ltc: LogToClean, now_ms: int, stats: CleanerStats) -> Steps[int]:
        """Clean from the log start to the end of what the offset map covers; returns that end (the
        next first dirty offset)."""
        log = ltc.log
        offset_map = self.offset_map
        yield from self.build_offset_map(log, ltc.first_dirty_offset, ltc.first_uncleanable_offset, offset_map,
                                         stats)
        end_offset = offset_map.latest_offset + 1
        txns = _CleanedTransactions()
        groups = group_segments_by_size(segments_in_range(log, log.log_start_offset, end_offset),
                                        log.config.segment_bytes, log.config.segment_index_bytes,
                                        ltc.first_uncleanable_offset)
        for group in groups:
            yield from self._clean_segments(ltc, group, now_ms, stats, txns)
        return end_offset

    def build_offset_map(self, log: PartitionLog, start: int, end: int, offset_map: OffsetMap,
                         stats: CleanerStats) -> Steps[None]:
        offset_map.clear()
        dirty = segments_in_range(log, start, end)
        next_starts = [segment.base_offset for segment in dirty[1:]] + [end]
        txns = _CleanedTransactions()
        txns.add_aborted(log.collect_aborted(start, end))
        for segment, next_start in zip(dirty, next_starts, strict=True):
            full = yield from self._map_segment(segment, offset_map, start, end, next_start, txns, stats)
            if full:
                return

    def _map_segment(self, segment: LogSegment, offset_map: OffsetMap, start: int, end: int, next_start: int,
                     txns: _CleanedTransactions, stats: CleanerStats) -> Steps[bool]:
        """Add the segment's keys at or after `start` to the map; True once the map is full."""
        desired = int(offset_map.slots * DUP_BUFFER_LOAD_FACTOR)
        _indexed, position = segment.offset_index.lookup(start)
        for pos, header in segment.iter_headers(position):
            # Unlike Kafka, nothing at or past the first uncleanable offset (an open transaction's
            # first batch) is mapped: a record that may still be aborted must not hide older ones.
            if header.base_offset >= end:
                break
            data = segment.read(pos, header.size)
            stats.map_bytes_read += header.size
            if header.is_control:
                txns.on_control_batch_read(header, _control_type(data))
                stats.map_messages_read += 1
            elif txns.on_batch_read(header):
                stats.map_messages_read += header.records_count
            else:
                for record in _scan(data, header):
                    offset = header.base_offset + record.offset_delta
                    if record.key is not None and offset >= start:
                        if len(offset_map) >= desired:
                            return True
                        offset_map.put(record.key, offset)
                    stats.map_messages_read += 1
            if header.last_offset >= start:
                offset_map.latest_offset = header.last_offset
            yield None
        # Past a gap at the end of the segment: everything up to the next one is mapped.
        offset_map.latest_offset = next_start - 1
        return False

    def _clean_segments(self, ltc: LogToClean, group: list[LogSegment], now_ms: int, stats: CleanerStats,
                        txns: _CleanedTransactions) -> Steps[None]:
        log = ltc.log
        base = group[0].base_offset
        for path in log.dir.glob(f"{base:020d}.*{CLEANED_SUFFIX}"):
            path.unlink()  # an attempt this process abandoned: LogSegment appends to what exists
        cleaned = LogSegment(log.dir, base, log.config.index_interval_bytes, now_ms, log.writer, suffix=CLEANED_SUFFIX)
        txns.cleaned_index = cleaned.txn_index
        swapped = False
        try:
            last_records = log.last_records_of_active_producers()
            for position, segment in enumerate(group):
                upper = group[position + 1].base_offset if position + 1 < len(group) else segment.next_offset
                txns.add_aborted(log.collect_aborted(segment.base_offset, upper))
                yield from self._clean_into(segment, cleaned, ltc, txns, last_records, now_ms, stats)
            cleaned.seal()
            yield Blocking(cleaned.flush)
            cleaned.set_last_modified(group[-1].last_modified_ns())
            self.crash_point("after_cleaned")
            self._check_current(ltc, group)
            cleaned.change_suffix(SWAP_SUFFIX)  # the commit point, once durable
            yield Blocking(lambda: fsync_dir(log.dir))
            self.crash_point("after_swap")
            self._check_current(ltc, group)
            log.replace_segments(cleaned, group, self.crash_point)
            swapped = True
            yield Blocking(lambda: fsync_dir(log.dir))
        finally:
            if not swapped:
                cleaned.delete()  # under its current name, .cleaned or .swap

    def _check_current(self, ltc: LogToClean, group: list[LogSegment]) -> None:
        """Retention or DeleteRecords may have removed some of these segments between steps, or the
        topic may be gone: then this cleaning is dropped and the next one starts afresh."""
        if not self.still_current(ltc) or not _consecutive_in(ltc.log, group):
            raise CleaningAborted(f"{ltc.topic}-{ltc.partition} changed while it was cleaned")

    def _clean_into(self, source: LogSegment, dest: LogSegment, ltc: LogToClean, txns: _CleanedTransactions,
                    last_records: dict[int, tuple[int | None, int]], now_ms: int,
                    stats: CleanerStats) -> Steps[None]:
        delete_retention_ms = ltc.log.config.delete_retention_ms
        for pos, header in source.iter_headers():
            data = source.read(pos, header.size)
            stats.bytes_read += header.size
            control_type = _control_type(data) if header.is_control else None
            horizon = header.delete_horizon_ms
            if header.is_control:
                can_discard = txns.on_control_batch_read(header, control_type)
                discard_records = can_discard and horizon is not None and horizon <= now_ms
            else:
                can_discard = txns.on_batch_read(header)
                discard_records = can_discard
            last = last_records.get(header.producer_id)
            if last is None:
                last_of_producer = False
            elif last[0] is not None:
                last_of_producer = header.last_offset == last[0]
            else:
                last_of_producer = header.is_control and header.producer_epoch == last[1]
            if header.producer_id >= 0 and last_of_producer:
                retention = _Retention.RETAIN_EMPTY
            elif header.next_offset == ltc.first_uncleanable_offset:
                # The last batch of the cleaned range stays, so the offset it ends at is not lost.
                retention = _Retention.RETAIN_EMPTY
            elif discard_records:
                retention = _Retention.DELETE
            else:
                retention = _Retention.DELETE_EMPTY
            marker_for_empty_txn = can_discard and header.is_control
            if retention is _Retention.DELETE:
                stats.messages_read += header.records_count
                yield None
                continue
            records = _scan(data, header)
            stats.messages_read += len(records)
            if discard_records:
                retained: list[int] = []
            elif header.is_control:
                retained = list(range(len(records)))
            else:
                retained = [i for i, r in enumerate(records) if self._retain(header, r, horizon, now_ms, stats)]
            out: bytes | None = None
            if retained:
                tombstones = not header.is_control and not all(records[i].has_value for i in retained)
                set_horizon = (tombstones or marker_for_empty_txn) and horizon is None
                if len(retained) == len(records) and not set_horizon:
                    out = data
                elif set_horizon:
                    # The base timestamp becomes the delete horizon: every timestamp delta changes.
                    decoded = decode_batch(data).records
                    out = rebuild_batch(header, [decoded[i] for i in retained], now_ms + delete_retention_ms)
                else:
                    out = _rebuild_raw(data, header, records, retained)
                stats.messages_retained += len(retained)
            elif retention is _Retention.RETAIN_EMPTY:
                out = empty_batch(header)
            if out is not None:
                dest.append(out, [(0, BatchHeader.parse_header_only(out, 0))])
                stats.bytes_written += len(out)
            yield None

    def _retain(self, header: BatchHeader, record: RawRecord, horizon: int | None, now_ms: int,
                stats: CleanerStats) -> bool:
        """Kafka's Cleaner.shouldRetainRecord: the key's last record, and a tombstone only until its
        delete horizon; past the mapped range everything stays."""
        offset = header.base_offset + record.offset_delta
        if offset > self.offset_map.latest_offset:
            return True
        if record.key is None:
            stats.invalid_messages += 1
            return False
        latest_for_key = offset >= self.offset_map.get(record.key)
        keep_deletes = horizon is None or now_ms < horizon
        return latest_for_key and (record.has_value or keep_deletes)


def _payload(data: bytes, header: BatchHeader) -> bytes:
    return decompress(header.compression, memoryview(data)[HEADER_SIZE : header.size])


def _scan(data: bytes, header: BatchHeader) -> list[RawRecord]:
    return scan_records(_payload(data, header), header.records_count)


def _rebuild_raw(data: bytes, header: BatchHeader, records: list[RawRecord], retained: list[int]) -> bytes:
    """The batch with only the `retained` records, copied as encoded (no decoding)."""
    payload = _payload(data, header)
    kept = b"".join(payload[records[i].start : records[i].end] for i in retained)
    if header.log_append_time:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = header.base_timestamp + max(records[i].timestamp_delta for i in retained)
    return rebuild_batch_raw(header, kept, len(retained), max_timestamp)


def _consecutive_in(log: PartitionLog, group: list[LogSegment]) -> bool:
    for index, segment in enumerate(log.segments):
        if segment is group[0]:
            window = log.segments[index : index + len(group)]
            return len(window) == len(group) and all(a is b for a, b in zip(window, group, strict=True))
    return False


# --- the manager and its driver on the event loop ----------------------------------------------


class LogSource(Protocol):
    """What the cleaner needs of the LogManager."""

    def partition_logs(self) -> list[tuple[TopicPartition, PartitionLog]]: ...

    def partition(self, topic: str, partition: int) -> PartitionLog | None: ...


def _kill_own_process(point: str) -> None:
    _log.warning("cleaner crash point reached: killing the broker process", point=point)
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


class LogCleaner:
    """Picks the filthiest compacted log and cleans it, in slices on the event loop (Kafka's
    LogCleaner thread with LogCleanerManager). `start` is the broker's periodic job
    (log.cleaner.backoff.ms): it cleans until no log is cleanable, then waits for the next call."""

    def __init__(self, source: LogSource, data_dir: Path, clock: Clock, *, map_entries: int = DEFAULT_MAP_ENTRIES,
                 slice_s: float = SLICE_S) -> None:
        self._source = source
        self._checkpoint_path = data_dir / CLEANER_CHECKPOINT_FILE
        self._clock = clock
        self._slice_s = slice_s
        self._checkpoints: dict[TopicPartition, int] | None = None
        self._uncleanable: set[TopicPartition] = set()
        # Partitions being cleaned: retention leaves them alone meanwhile (in Kafka the cleaner thread
        # itself deletes the old segments of compact,delete logs, so the two never overlap).
        self.in_progress: set[TopicPartition] = set()
        self._task: asyncio.Task[None] | None = None
        self._current: Steps[int] | None = None
        self._stopped = False
        self.crash_point_name: str | None = None
        self.on_crash_point: Callable[[str], None] = _kill_own_process
        self.cleaner = Cleaner(OffsetMap(map_entries), self._crash_point, self._still_current)
        self.rounds = 0  # cleanings finished, for tests and metrics
        self._paused_s = 0.0  # time the driver spent letting the event loop run, to tell busy time apart
        self.last_stats: CleanerStats | None = None

    # --- checkpoints ---------------------------------------------------------------------

    @property
    def checkpoints(self) -> dict[TopicPartition, int]:
        if self._checkpoints is None:
            self._checkpoints = read_checkpoint(self._checkpoint_path)
        return self._checkpoints

    def _write_checkpoints(self) -> None:
        live = {tp for tp, _log in self._source.partition_logs()}
        current = {tp: offset for tp, offset in self.checkpoints.items() if tp in live}
        self._checkpoints = current
        write_checkpoint(self._checkpoint_path, current)

    def forget(self, topic: str) -> None:
        """A deleted topic's offsets must not apply to a new topic of the same name."""
        checkpoints = self.checkpoints
        stale = [tp for tp in checkpoints if tp[0] == topic]
        for tp in stale:
            del checkpoints[tp]
        self._uncleanable = {tp for tp in self._uncleanable if tp[0] != topic}
        if stale:
            try:
                self._write_checkpoints()
            except OSError as exc:
                _log.error("writing the cleaner checkpoint failed", error=str(exc))

    # --- choosing ------------------------------------------------------------------------

    def grab_filthiest(self, now_ms: int) -> Steps[LogToClean | None]:
        """Kafka's grabFilthiestCompactedLog, a partition per step."""
        checkpoints = self.checkpoints
        reset = False
        candidates: list[LogToClean] = []
        for (topic, partition), log in self._source.partition_logs():
            if not log.config.compact or (topic, partition) in self._uncleanable or not log.segments:
                continue
            first_dirty, uncleanable, force = cleanable_offsets(log, checkpoints.get((topic, partition)), now_ms)
            if force:
                checkpoints[(topic, partition)] = first_dirty
                reset = True
            delay = max_compaction_delay(log, first_dirty, now_ms)
            ltc = log_to_clean(topic, partition, log, first_dirty, uncleanable, delay > 0)
            if ltc.total_bytes > 0 and ((ltc.need_compaction_now and ltc.cleanable_bytes > 0)
                                        or ltc.cleanable_ratio > log.config.min_cleanable_dirty_ratio):
                candidates.append(ltc)
            yield None
        if reset:
            self._write_checkpoints()
        return max(candidates, key=lambda c: c.cleanable_ratio) if candidates else None

    def _still_current(self, ltc: LogToClean) -> bool:
        return not self._stopped and self._source.partition(ltc.topic, ltc.partition) is ltc.log

    def _crash_point(self, point: str) -> None:
        if point == self.crash_point_name:
            self.on_crash_point(point)

    # --- cleaning ------------------------------------------------------------------------

    def clean_log(self, ltc: LogToClean, now_ms: int) -> Steps[CleanerStats | None]:
        tp = (ltc.topic, ltc.partition)
        stats = CleanerStats()
        log_start = ltc.log.log_start_offset
        self.in_progress.add(tp)
        try:
            end_offset = yield from self.cleaner.clean(ltc, now_ms, stats)
        except CleaningAborted as exc:
            _log.info("log cleaning aborted", topic=ltc.topic, partition=ltc.partition, reason=str(exc))
            return None
        except Exception as exc:
            if not self._still_current(ltc) or ltc.log.log_start_offset != log_start:
                # Deleted, or DeleteRecords removed segments being read: the next run starts afresh.
                _log.info("log cleaning aborted", topic=ltc.topic, partition=ltc.partition, reason=repr(exc))
                return None
            if isinstance(exc, OSError):
                # A full or failing disk: unlike Kafka (which takes the log dir offline) the next run
                # tries again, as appends here do once space is freed.
                _log.warning("log cleaning failed on the disk; retried at the next run", topic=ltc.topic,
                             partition=ltc.partition, error=str(exc))
                return None
            # As Kafka's markPartitionUncleanable: not retried until the broker restarts.
            _log.exception("log cleaning failed; the partition is left uncleaned", topic=ltc.topic,
                           partition=ltc.partition)
            self._uncleanable.add(tp)
            return None
        finally:
            self.in_progress.discard(tp)
        self.checkpoints[tp] = end_offset
        try:
            self._write_checkpoints()
        except OSError as exc:
            _log.error("writing the cleaner checkpoint failed", error=str(exc))
        self.rounds += 1
        return stats

    def run_until_idle(self, max_rounds: int = MAX_ROUNDS_PER_RUN) -> Steps[int]:
        """Clean the filthiest log until none is cleanable; returns how many were cleaned."""
        cleaned = 0
        for _ in range(max_rounds):
            now_ms = self._clock.now_ms()
            ltc = yield from self.grab_filthiest(now_ms)
            if ltc is None:
                break
            started, paused = time.monotonic(), self._paused_s
            stats = yield from self.clean_log(ltc, now_ms)
            if stats is None:
                break  # aborted or failed: back off until the next run rather than spin on it
            cleaned += 1
            stats.busy_s = (time.monotonic() - started) - (self._paused_s - paused)
            self.last_stats = stats
            _log.info("log cleaned", topic=ltc.topic, partition=ltc.partition,
                      dirty_ratio=round(ltc.cleanable_ratio, 3),
                      bytes_read=stats.bytes_read, bytes_written=stats.bytes_written,
                      messages_read=stats.messages_read, messages_retained=stats.messages_retained,
                      busy_ms=round(stats.busy_s * 1000, 1), mb_per_s=round(stats.mb_per_s, 2))
        return cleaned

    def clean_now(self) -> int:
        """Run to the end without yielding to an event loop (tests, benchmarks, tools)."""
        steps = self.run_until_idle()
        try:
            while True:
                step = next(steps)
                if step is not None:
                    step.run()
        except StopIteration as stop:
            return int(stop.value)

    def start(self) -> None:
        """The periodic job: start cleaning in the background unless a run is still going."""
        if self._stopped or (self._task is not None and not self._task.done()):
            return
        self._task = asyncio.get_running_loop().create_task(self._run(), name="minikafka-log-cleaner")

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def _run(self) -> None:
        steps = self.run_until_idle()
        self._current = steps
        slice_end = time.monotonic() + self._slice_s
        try:
            while not self._stopped:
                step = next(steps)
                now = time.monotonic()
                if step is not None:
                    await _off_the_loop(step.run)
                    slice_end = time.monotonic() + self._slice_s
                    self._paused_s += slice_end - self._slice_s - now
                elif now >= slice_end:
                    await asyncio.sleep(0)
                    slice_end = time.monotonic() + self._slice_s
                    self._paused_s += slice_end - self._slice_s - now
        except StopIteration:
            pass
        except Exception:
            _log.exception("log cleaner run failed")
        finally:
            self._current = None
            steps.close()

    def stop(self) -> None:
        """Before the logs close: abandon a cleaning in progress (its `.cleaned` files are removed)."""
        self._stopped = True
        current = self._current
        if current is not None and self._task is not None and not self._task.done():
            # ValueError: the generator is running (called from inside it); it ends at its next step.
            with contextlib.suppress(ValueError):
                current.close()
        if self._task is not None and not self._task.done():
            self._task.cancel()
