"""PartitionLog: the segments of one partition, with offsets, roll, retention and producer state.

Appends follow Kafka's order (UnifiedLog.append): validate everything (sizes, producer epochs and
sequences) against copies, then assign offsets, write, and only then update producer state and the
high watermark. Nothing awaits in between: the event loop is the partition's lock.

Disk faults: a write that fails (no space, read-only, I/O error) raises KafkaStorageError after the
append is undone everywhere (file, indexes, producer state, offsets), so nothing half-written is
served or survives a restart. Unlike Kafka, which takes the whole log dir offline on an
IOException until restart, the partition stays online: reads go on, and every later append tries
the disk again, so writes resume by themselves once space is freed.

Compaction (storage/cleaner.py) swaps cleaned segments in with `replace_segments`; `open` first
finishes or discards a swap a crash interrupted. A compacted topic refuses records without a key.
"""

from __future__ import annotations

import bisect
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

import structlog
from minikafka.protocol.records import (
    HEADER_SIZE,
    BatchHeader,
    ControlType,
    build_control_batch,
    decode_batch,
    iter_batches,
    parse_control_record,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from minikafka.protocol.regions import FileRegion
from minikafka.storage.config import LogConfig
from minikafka.storage.epochs import LEADER_EPOCH_FILE, LeaderEpochCache
from minikafka.storage.errors import (
    InvalidTimestamp,
    KafkaStorageError,
    OffsetOutOfRange,
    RecordTooLarge,
    RecordValidationError,
)
from minikafka.storage.files import OS_WRITER, FileWriter
from minikafka.storage.index import AbortedTxn
from minikafka.storage.origin import AppendOrigin
from minikafka.storage.producer_state import (
    CompletedTxn,
    InvalidTxnState,
    ProducerAppendInfo,
    ProducerStateEntry,
    ProducerStateManager,
    VerificationGuard,
)
from minikafka.storage.segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    SegmentMark,
)

T = TypeVar("T")

_log = structlog.get_logger("minikafka.storage")
# Appends at least this big are written from the caller's bytes with their batch headers patched in copies;
# smaller ones are copied whole and patched there (one buffer is cheaper than a writev of pieces).
_WRITTEN_IN_PLACE_BYTES = 16 * 1024
# Reads at least this big may stay in the file as a region sent with sendfile (`read(as_region=True)`);
# below it, reading the bytes is cheaper than a sendfile call of their own. bench/sendfile_threshold.py
# puts the crossing at 24-32 KiB before the few µs of Python a region costs the broker on top.
REGION_MIN_BYTES = 48 * 1024


def fsync_dir(directory: Path) -> None:
    """Make renames in `directory` durable (a crash after it cannot bring the old names back)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@lru_cache(maxsize=64)
def _marker_batch(producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                  timestamp: int) -> tuple[bytes, BatchHeader]:
    """A transaction's marker, built once for all the partitions it ends: they differ only in the
    base offset and leader epoch, which lie outside the CRC and are set at each append."""
    marker = build_control_batch(producer_id=producer_id, producer_epoch=producer_epoch,
                                 control_type=ControlType.COMMIT if commit else ControlType.ABORT,
                                 coordinator_epoch=coordinator_epoch, timestamp=timestamp)
    return marker, BatchHeader.parse_header_only(marker, 0)


# Not frozen: a frozen dataclass's __init__ sets each field through object.__setattr__ (see records.BatchHeader)
@dataclass(slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time: int
    log_start_offset: int
    duplicate: bool = False


# Not frozen: a frozen dataclass's __init__ sets each field through object.__setattr__ (see records.BatchHeader)
@dataclass(slots=True)
class ReadResult:
    records: bytes | FileRegion
    high_watermark: int
    log_start_offset: int
    log_end_offset: int


class PartitionLog:
    def __init__(self, directory: Path, topic: str, partition: int, config: LogConfig, now_ms: int,
                 writer: FileWriter = OS_WRITER) -> None:
        self.dir = directory
        self._writer = writer
        self.topic = topic
        self.partition = partition
        self.config = config
        self.leader_epoch = 0
        self.epochs = LeaderEpochCache(directory / LEADER_EPOCH_FILE)
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.log_start_offset = 0
        self.producer_state = ProducerStateManager(directory)
        self._now_ms = now_ms

    def become_leader(self, epoch: int) -> None:
        """A new leader epoch from the log end on: later batches are stamped with it, and the checkpoint
        records where it started. An epoch not newer than the current one changes nothing."""
        if self.epochs.assign(epoch, self.log_end_offset):
            self.leader_epoch = epoch

    def load_epochs(self, entries: list[tuple[int, int]]) -> None:
        """The epoch history read back from `leader-epoch-checkpoint` at start."""
        if entries:
            self.epochs.entries = entries
            self.leader_epoch = entries[-1][0]

    # --- opening -------------------------------------------------------------------------

    def create(self) -> None:
        """Start a brand-new, empty partition: its directory and an empty first segment.

        Unlike `open` nothing is scanned (no segments, no producer snapshots can exist yet), so a
        request creating thousands of partitions costs a mkdir and one file each. A directory left
        by a topic of the same name whose deletion was cut short is stale data: it is removed.
        """
        try:
            self.dir.mkdir(parents=True)
        except FileExistsError:
            shutil.rmtree(self.dir)
            self.dir.mkdir()
        self.segments.append(LogSegment(self.dir, 0, self.config.index_interval_bytes, self._now_ms, self._writer))
        self._bases = [0]
        self.log_start_offset = 0

    def open(self, *, recovery_point: int, log_start_offset: int, clean: bool) -> int:
        """Open every segment; recover those at/after the recovery point unless shut down cleanly.

        A segment with a torn or corrupt tail is truncated and every later segment is dropped,
        so the log stays a gap-free prefix. Returns the number of bytes truncated.
        """
        self.dir.mkdir(parents=True, exist_ok=True)
        # One listing per partition (glob is several times slower): start-up lists thousands of them.
        names = os.listdir(self.dir)
        if any(name.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)) for name in names):
            self._finish_interrupted_swaps()
            names = os.listdir(self.dir)
        bases = sorted(int(name[: -len(LOG_SUFFIX)]) for name in names
                       if name.endswith(LOG_SUFFIX) and name[: -len(LOG_SUFFIX)].isdigit())
        truncated = 0
        for position, base in enumerate(bases):
            segment = LogSegment(self.dir, base, self.config.index_interval_bytes, self._now_ms, self._writer)
            next_base = bases[position + 1] if position + 1 < len(bases) else None
            must_recover = not clean and (next_base is None or next_base > recovery_point)
            truncated += segment.load(recover=must_recover)
            self.segments.append(segment)
            if truncated and next_base is not None:
                for later in bases[position + 1 :]:
                    LogSegment(self.dir, later, self.config.index_interval_bytes, self._now_ms, self._writer).delete()
                break
        if not self.segments:
            self.segments.append(LogSegment(self.dir, max(log_start_offset, 0), self.config.index_interval_bytes,
                                            self._now_ms, self._writer))
        self._bases = [s.base_offset for s in self.segments]
        self.log_start_offset = max(log_start_offset, self.segments[0].base_offset)
        stale = [segment.base_offset for segment in self.segments if segment.needs_txn_rebuild]
        self._load_producer_state(rebuild_txn_index_from=min(stale) if stale else None)
        if not clean and self.log_end_offset > 0:
            # As Kafka's LogLoader: snapshot the rebuilt state so the next start replays less. An
            # empty log has no state (Kafka's takeSnapshot skips it too): no file and fsync per
            # untouched partition after a crash. Not fsynced: it only saves replay time, and one
            # fsync per partition made recovering 10,000 of them take 10 s.
            self.producer_state.take_snapshot(self.log_end_offset, durable=False)
        return truncated

    def _finish_interrupted_swaps(self) -> None:
        """Complete or discard what a crash left of a log cleaner's segment swap (Kafka's LogLoader).

        `.cleaned` files are an unfinished cleaning: removed, the segments they came from stay. A
        `<base>.log.swap` is a finished one (written and fsynced before that rename): it replaces every
        segment whose base offset lies in [base, its next offset), its `.swap` indexes replace theirs,
        and it takes its final name. Index `.swap` files without their `.log.swap` never committed."""
        for path in list(self.dir.iterdir()):
            if path.name.endswith(CLEANED_SUFFIX):
                path.unlink(missing_ok=True)
        index_suffixes = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
        for swap in sorted(self.dir.glob(f"*{LOG_SUFFIX}{SWAP_SUFFIX}")):
            stem = swap.name[: -len(LOG_SUFFIX + SWAP_SUFFIX)]
            if not stem.isdigit():
                continue
            base = int(stem)
            swapped = LogSegment(self.dir, base, self.config.index_interval_bytes, self._now_ms, self._writer,
                                 suffix=SWAP_SUFFIX)
            end = base
            for _pos, header in swapped.iter_headers():  # fsynced before its rename: whole
                end = header.next_offset
            swapped.close()
            for old in list(self.dir.glob(f"*{LOG_SUFFIX}")):
                old_stem = old.name[: -len(LOG_SUFFIX)]
                if old_stem.isdigit() and base < int(old_stem) < end:
                    LogSegment(self.dir, int(old_stem), self.config.index_interval_bytes, self._now_ms,
                               self._writer).delete()
            for suffix in index_suffixes:
                pending = self.dir / f"{stem}{suffix}{SWAP_SUFFIX}"
                final = self.dir / f"{stem}{suffix}"
                # Written and fsynced before the .log.swap rename; one already renamed is the new one.
                if pending.exists():
                    os.replace(pending, final)
            os.replace(swap, self.dir / f"{stem}{LOG_SUFFIX}")
            _log.info("completed an interrupted log cleaner swap", dir=str(self.dir), base_offset=base,
                      next_offset=end)
        for suffix in index_suffixes:
            for orphan in self.dir.glob(f"*{suffix}{SWAP_SUFFIX}"):
                orphan.unlink(missing_ok=True)

    def replace_segments(self, cleaned: LogSegment, old: list[LogSegment], crash_point: Callable[[str], None]) -> None:
        """Swap a cleaned segment in for the consecutive segments `old` it was cleaned from (Kafka's
        LocalLog.replaceSegments). `cleaned` is flushed and already renamed `.swap` with that rename
        made durable (the commit point: see `_finish_interrupted_swaps`); here the old files go and it
        takes its final name. Nothing here awaits, so no request sees a half swap; the caller makes
        the final names durable (fsync_dir), which recovery does not depend on."""
        first = self.segments.index(old[0])
        assert self.segments[first : first + len(old)] == old, "the segments to replace must be consecutive"
        assert cleaned.suffix == SWAP_SUFFIX, "a cleaned segment is swapped in from its .swap files"
        for segment in old:
            if segment.base_offset == cleaned.base_offset:
                segment.close()  # its files are replaced by the rename below
            else:
                segment.delete()
        crash_point("after_delete")
        cleaned.change_suffix("")
        self.segments[first : first + len(old)] = [cleaned]
        self._bases = [segment.base_offset for segment in self.segments]

    def last_records_of_active_producers(self) -> dict[int, tuple[int | None, int]]:
        """Per producer: its last data batch's last offset (None if it has none) and its epoch
        (Kafka's UnifiedLog.lastRecordsOfActiveProducers): batches the cleaner must keep, if empty."""
        return {pid: (entry.last_offset if entry.batches else None, entry.epoch)
                for pid, entry in self.producer_state.entries.items()}

    def _load_producer_state(self, rebuild_txn_index_from: int | None) -> None:
        """Newest snapshot at or below where replay must start, then replay the batches after it
        (Kafka's order). Segments whose `.txnindex` was lost get it rebuilt from the markers."""
        state = self.producer_state
        end = self.log_end_offset
        state.delete_snapshots_above(end)
        loaded = state.load_latest_snapshot(end if rebuild_txn_index_from is None else rebuild_txn_index_from)
        start = loaded if loaded is not None else self.log_start_offset
        for segment in self.segments:
            if segment.next_offset <= start:
                continue
            rebuild = rebuild_txn_index_from is not None and segment.base_offset >= rebuild_txn_index_from
            if rebuild:
                segment.txn_index.reset()
            for pos, header in segment.iter_headers():
                if header.last_offset < start or header.producer_id < 0:
                    continue
                info = state.prepare_update(header.producer_id, AppendOrigin.REPLICATION)
                if header.is_control:
                    marker, coordinator_epoch = parse_control_record(decode_batch(segment.read(pos, header.size))
                                                                     .records[0])
                    completed = info.append_end_txn_marker(header.producer_epoch, coordinator_epoch,
                                                           header.base_offset, marker == ControlType.COMMIT,
                                                           header.max_timestamp)
                    state.update(info)
                    if rebuild and completed.aborted:
                        segment.txn_index.append(self._aborted_entry(completed))
                    continue
                info.append_data_batch(header.producer_epoch, header.base_sequence, header.last_sequence,
                                       header.max_timestamp, header.base_offset, header.last_offset,
                                       header.is_transactional)
                state.update(info)
            segment.needs_txn_rebuild = False

    def _aborted_entry(self, completed: CompletedTxn) -> AbortedTxn:
        """Kafka's lastStableOffset(completedTxn): the oldest other open transaction, else past the marker."""
        unstable = self.producer_state.first_unstable_offset()
        last_stable = unstable if unstable is not None else completed.last_offset + 1
        return AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset, last_stable)

    # --- offsets -------------------------------------------------------------------------

    @property
    def writer(self) -> FileWriter:
        """The seam this log writes through (tests make it fail as a full disk would)."""
        return self._writer

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.active.next_offset

    @property
    def high_watermark(self) -> int:
        return self.active.next_offset  # one replica: everything written is replicated

    @property
    def last_stable_offset(self) -> int:
        """min(first unstable offset, high watermark): read_committed consumers stop here."""
        unstable = self.producer_state.first_unstable_offset()
        return self.high_watermark if unstable is None else min(unstable, self.high_watermark)

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for segment in self.segments:
            segment.index_interval_bytes = config.index_interval_bytes

    # --- appending -----------------------------------------------------------------------

    def append(self, records: bytes | bytearray, now_ms: int,
               batches: list[tuple[int, BatchHeader]] | None = None, *, origin: AppendOrigin = AppendOrigin.CLIENT,
               verification_guard: VerificationGuard | None = None) -> AppendResult:
        """Append batches (already CRC-checked): validate as their `origin` requires, assign offsets, write.

        `origin` is Kafka's AppendOrigin (storage/origin.py): a producer's batches get every check,
        a coordinator's own records (its state topics, a producer's transactional offset commits)
        only the producer epoch and transactional state.
        `verification_guard` (a produce the transaction coordinator verified): a transactional batch
        that opens a transaction here must bring the producer's guard still on record, else
        INVALID_TXN_STATE (Kafka's UnifiedLog batchMissingRequiredVerification).
        """
        if batches is None:
            batches = list(iter_batches(records, check_crc=False))
        config = self.config
        from_client = origin is AppendOrigin.CLIENT
        if from_client and config.compact:
            self._check_keys(records, batches)
        for _pos, header in batches:
            if header.size > config.max_message_bytes:
                raise RecordTooLarge(
                    f"batch of {header.size} bytes exceeds max.message.bytes={config.max_message_bytes}")
            if from_client:
                self._check_timestamps(header, now_ms)
        updates: dict[int, ProducerAppendInfo] = {}
        next_offset = self.log_end_offset
        log_append_time = config.message_timestamp_type == "LogAppendTime"
        for _pos, header in batches:
            if header.producer_id < 0:
                continue
            entry = self.producer_state.last_entry(header.producer_id)
            duplicate = entry.find_duplicate(header.producer_epoch, header.base_sequence,
                                             header.last_sequence) if entry and from_client else None
            if duplicate is not None and len(batches) == 1:
                # Kafka answers a retry with the original batch's offsets and (LogAppendTime) timestamp.
                append_time = duplicate.timestamp if log_append_time else -1
                return AppendResult(duplicate.first_offset, duplicate.last_offset, append_time,
                                    self.log_start_offset, duplicate=True)
            info = updates.get(header.producer_id) or self.producer_state.prepare_update(header.producer_id, origin)
            info.check_transactional(header.is_transactional)
            if (verification_guard is not None and header.is_transactional and info.entry.current_txn_first_offset < 0
                    and not self.producer_state.is_verified(header.producer_id, verification_guard)):
                raise InvalidTxnState(f"producer {header.producer_id}: the record was not part of an ongoing "
                                      f"transaction on {self.topic}-{self.partition} (its verification is stale)")
            count = header.last_offset_delta + 1
            timestamp = now_ms if log_append_time else header.max_timestamp
            info.append_data_batch(header.producer_epoch, header.base_sequence, header.last_sequence,
                                   timestamp, next_offset, next_offset + count - 1, header.is_transactional)
            updates[header.producer_id] = info
            next_offset += count
        result = self._write(records, batches, now_ms, updates)
        if verification_guard is not None:
            for producer_id in updates:
                self.producer_state.clear_verification(producer_id)  # the transaction is open: guard spent
        return result

    def _check_keys(self, records: bytes | bytearray, batches: list[tuple[int, BatchHeader]]) -> None:
        """Kafka's LogValidator.validateKey: a compacted topic refuses every record without a key,
        each reported by its index in the batch. Only compacted topics pay for decoding the records."""
        errors = [(index, f"Compacted topic cannot accept message without key in topic partition "
                          f"{self.topic}-{self.partition}")
                  for pos, header in batches if not header.is_control
                  for index, record in enumerate(decode_batch(records, pos).records) if record.key is None]
        if errors:
            raise RecordValidationError(errors)

    def _check_timestamps(self, header: BatchHeader, now_ms: int) -> None:
        """Kafka's LogValidator bounds on CreateTime timestamps (message.timestamp.{before,after}.max.ms).

        Kafka checks every record; the hot path reads only the header, so the batch's max timestamp
        stands for the newest record and its base timestamp for the oldest (producers put the first
        record's timestamp there and rarely send earlier ones after it).
        """
        if self.config.message_timestamp_type != "CreateTime":
            return
        if header.max_timestamp >= 0 and header.max_timestamp - now_ms > self.config.message_timestamp_after_max_ms:
            raise InvalidTimestamp(
                f"timestamp {header.max_timestamp} is more than message.timestamp.after.max.ms="
                f"{self.config.message_timestamp_after_max_ms} ahead of the broker clock {now_ms}")
        if header.base_timestamp >= 0 and (
                now_ms - header.base_timestamp > self.config.message_timestamp_before_max_ms):
            raise InvalidTimestamp(
                f"timestamp {header.base_timestamp} is more than message.timestamp.before.max.ms="
                f"{self.config.message_timestamp_before_max_ms} behind the broker clock {now_ms}")

    def _write(self, records: bytes | bytearray, batches: list[tuple[int, BatchHeader]], now_ms: int,
               updates: dict[int, ProducerAppendInfo]) -> AppendResult:
        return self._write_marked(records, batches, now_ms, updates)[0]

    def _write_marked(self, records: bytes | bytearray, batches: list[tuple[int, BatchHeader]], now_ms: int,
                      updates: dict[int, ProducerAppendInfo]) -> tuple[AppendResult, LogSegment, SegmentMark]:
        """Write; also return the segment written to and its mark before the write, to undo it."""
        base = offset = self.log_end_offset
        epoch = self.leader_epoch
        append_time = now_ms if self.config.message_timestamp_type == "LogAppendTime" else -1
        assigned: list[tuple[int, BatchHeader]] = []
        data: bytearray | list[bytes | bytearray | memoryview]
        if append_time < 0 and len(records) >= _WRITTEN_IN_PLACE_BYTES:
            # From 16 KiB (and outside LogAppendTime, which changes the CRC) the fields assigned here, base
            # offset and leader epoch, are patched in a copy of each batch's header and the rest is written
            # from the caller's bytes with one writev.
            view = memoryview(records)
            data = []
            written_to = 0
            for pos, header in batches:
                if pos > written_to:
                    data.append(view[written_to:pos])
                patched = bytearray(view[pos:pos + HEADER_SIZE])
                set_base_offset(patched, 0, offset)
                set_partition_leader_epoch(patched, 0, epoch)
                data += (patched, view[pos + HEADER_SIZE:pos + header.size])
                written_to = pos + header.size
                assigned.append((pos, header.placed(offset, epoch)))
                offset += header.last_offset_delta + 1
            if written_to < len(records):
                data.append(view[written_to:])
        else:
            # Smaller appends, and LogAppendTime ones of any size (their CRC changes), are copied whole and
            # patched in place.
            data = bytearray(records)
            for pos, header in batches:
                set_base_offset(data, pos, offset)
                set_partition_leader_epoch(data, pos, epoch)
                if append_time >= 0:
                    set_log_append_time(data, pos, header, append_time)
                    assigned.append((pos, BatchHeader.parse_header_only(data, pos)))
                else:
                    assigned.append((pos, header.placed(offset, epoch)))
                offset += header.last_offset_delta + 1
        try:
            self._maybe_roll(len(records), assigned[0][1] if assigned else None, now_ms)
            segment = self.active
            mark = segment.append(data, assigned)
        except OSError as exc:
            raise self._storage_error(exc) from exc
        for info in updates.values():
            self.producer_state.update(info)
        return AppendResult(base, offset - 1, append_time, self.log_start_offset), segment, mark

    def _on_disk(self, write: Callable[[], T]) -> T:
        """Run a disk access; an OSError is the client's KAFKA_STORAGE_ERROR (Kafka's KafkaStorageException)."""
        try:
            return write()
        except OSError as exc:
            raise self._storage_error(exc) from exc

    def _storage_error(self, exc: OSError) -> KafkaStorageError:
        reason = exc.strerror or str(exc)
        return KafkaStorageError(f"disk access to {self.topic}-{self.partition} failed: {reason}")

    def append_control(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                       now_ms: int) -> AppendResult:
        """Write a COMMIT or ABORT marker for the producer's transaction (the WriteTxnMarkers path).

        The marker closes the producer's open transaction here; an aborted one is recorded in the
        active segment's `.txnindex` so read_committed fetches can tell consumers to skip it.
        """
        offset = self.log_end_offset
        info = self.producer_state.prepare_update(producer_id, AppendOrigin.COORDINATOR)
        completed = info.append_end_txn_marker(producer_epoch, coordinator_epoch, offset, commit, now_ms)
        marker, header = _marker_batch(producer_id, producer_epoch, coordinator_epoch, commit, now_ms)
        previous = self.producer_state.entries.get(producer_id)
        result, segment, mark = self._write_marked(marker, [(0, header)], now_ms, {producer_id: info})
        # a verification from before this marker must not open a transaction after it
        self.producer_state.clear_verification(producer_id)
        if completed.aborted:
            try:
                self._on_disk(lambda: self.active.txn_index.append(self._aborted_entry(completed)))
            except KafkaStorageError:
                # A marker without its .txnindex entry would show the aborted records to
                # read_committed consumers after a restart: take the marker back too.
                self._undo_append(segment, mark, producer_id, previous)
                raise
        return result

    def _undo_append(self, segment: LogSegment, mark: SegmentMark, producer_id: int,
                     previous: ProducerStateEntry | None) -> None:
        self.producer_state.restore(producer_id, previous)
        self._on_disk(lambda: segment.rewind(mark))

    def collect_aborted(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions that may have records in [start, end), for read_committed fetches."""
        found: list[AbortedTxn] = []
        for segment in self.segments[self._segment_index(start):]:
            found.extend(segment.txn_index.overlapping(start, end))
        return found

    def _maybe_roll(self, incoming: int, first: BatchHeader | None, now_ms: int) -> None:
        """Kafka's LogSegment.shouldRoll: full by size, or spanning more than segment.ms."""
        active = self.active
        if active.size == 0:
            return
        too_big = active.size + incoming > self.config.segment_bytes
        # Kafka's timeWaitedForRoll: incoming max timestamp minus the segment's first batch timestamp,
        # so producers with old timestamps do not roll a segment per batch; wall clock otherwise.
        if active.rolling_timestamp is not None and first is not None and first.max_timestamp >= 0:
            waited = first.max_timestamp - active.rolling_timestamp
        else:
            waited = now_ms - active.created_ms
        too_old = waited > self.config.segment_ms - self.config.segment_jitter_ms
        if too_big or too_old:
            self.roll(now_ms)

    def roll(self, now_ms: int) -> None:
        active = self.active
        if active.size == 0:
            return
        active.seal()
        new_base = active.next_offset
        self.producer_state.take_snapshot(new_base)
        self.segments.append(LogSegment(self.dir, new_base, self.config.index_interval_bytes, now_ms, self._writer))
        self._bases.append(new_base)

    # --- reading -------------------------------------------------------------------------

    def _segment_index(self, offset: int) -> int:
        return max(bisect.bisect_right(self._bases, offset) - 1, 0)

    def read(self, offset: int, max_bytes: int, *, upper_bound: int | None = None,
             min_one_batch: bool = True, as_region: bool = False) -> ReadResult:
        """Batches from the one holding `offset`, at most `max_bytes` (a whole first batch if
        `min_one_batch`), never at or past `upper_bound`. Like Kafka, the last batch of a slice may
        be cut short; clients discard a partial trailing batch. Reads stay within one segment.
        With `as_region`, a slice of REGION_MIN_BYTES or more stays in the file (a FileRegion, for a
        response that sends it with sendfile)."""
        return self._on_disk(lambda: self._read(offset, max_bytes, upper_bound, min_one_batch, as_region))

    def _read(self, offset: int, max_bytes: int, upper_bound: int | None, min_one_batch: bool,
              as_region: bool) -> ReadResult:
        end = self.log_end_offset
        if offset < self.log_start_offset or offset > end:
            raise OffsetOutOfRange(
                f"offset {offset} is outside [{self.log_start_offset}, {end}] of {self.topic}-{self.partition}")
        bound = end if upper_bound is None else min(upper_bound, end)
        records: bytes | FileRegion = b""
        index = self._segment_index(offset)
        while offset < bound and index < len(self.segments):
            segment = self.segments[index]
            found = segment.find(offset)
            if found is None:
                index += 1
                continue
            position, header = found
            if header.base_offset >= bound:
                break
            limit = segment.size if bound >= segment.next_offset else segment.position_of(bound)
            length = min(max_bytes, limit - position)
            if min_one_batch and header.size > length:
                length = header.size
            if as_region and length >= REGION_MIN_BYTES:
                records = segment.region(position, length)
            elif length > 0:
                records = segment.read(position, length)
            break
        return ReadResult(records, self.high_watermark, self.log_start_offset, end)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        for segment in self.segments:
            if segment.max_timestamp < timestamp_ms:
                continue
            found = segment.find_timestamp(timestamp_ms)
            if found is not None and found[0] >= self.log_start_offset:
                return found
        return None

    def max_timestamp_offset(self) -> tuple[int, int]:
        best = max(self.segments, key=lambda s: s.max_timestamp)
        found = best.record_with_max_timestamp()
        return found if found is not None else (-1, -1)

    # --- deleting ------------------------------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        if offset > self.high_watermark or offset < 0:
            raise OffsetOutOfRange(f"offset {offset} is above the high watermark {self.high_watermark}")
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self._delete_segments_below_start()
        return self.log_start_offset

    def _delete_segments_below_start(self) -> None:
        while len(self.segments) > 1 and self.segments[1].base_offset <= self.log_start_offset:
            self._delete_oldest()

    def _delete_oldest(self) -> None:
        segment = self.segments.pop(0)
        self._bases.pop(0)
        segment.delete()
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        self.producer_state.delete_snapshots_below(self.segments[0].base_offset)

    def apply_retention(self, now_ms: int) -> int:
        """Delete whole segments past retention.ms or beyond retention.bytes, oldest first, as Kafka's
        deleteOldSegments does: the active one too once it qualifies and holds data, after rolling a new
        empty segment at the log end (so the end offset stays and the log start moves to it); never a
        segment whose records are not all below the high watermark."""
        deleted = 0
        config = self.config
        if not config.delete:
            # cleanup.policy=compact alone: only the cleaner removes data (Kafka's deleteOldSegments).
            return 0
        for _ in range(len(self.segments)):
            oldest = self.segments[0]
            active = len(self.segments) == 1
            if active and oldest.size == 0:
                break
            following_base = self.log_end_offset if active else self.segments[1].base_offset
            if self.high_watermark < following_base:
                break
            expired = config.retention_ms >= 0 and now_ms - oldest.largest_timestamp() > config.retention_ms
            oversized = config.retention_bytes >= 0 and self.size_bytes - oldest.size >= config.retention_bytes
            if not (expired or oversized):
                break
            if active:
                self.roll(now_ms)
            self._delete_oldest()
            deleted += 1
        if deleted:
            self.producer_state.truncate_and_reload(self.log_start_offset, self.log_end_offset)
        return deleted

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget producers idle past producer.id.expiration.ms (their next batch may use any sequence)."""
        return self.producer_state.remove_expired(now_ms, expiration_ms)

    # --- lifecycle -----------------------------------------------------------------------

    def flush(self) -> None:
        """fsync what was written since the last flush: the active segment and one rolled since (as
        Kafka flushes up to the new segment after a roll); untouched files cost nothing."""
        for flush in self.unflushed_files():
            flush()

    def unflushed_files(self) -> list[Callable[[], None]]:
        return [flush for segment in self.segments for flush in segment.unflushed_files()]

    def prepare_close(self, durable: bool = True) -> list[Callable[[], object]]:
        """Seal the active segment, and return what a clean close still has to write, as steps a caller
        may run at once (LogManager runs those of every log together, so their fsyncs share journal
        commits): the producer snapshot and an fsync per file written since its last. Not `durable`: the
        snapshot alone, without its fsync, for a caller that makes the whole filesystem durable next and
        then calls `mark_flushed`. `close` then finds nothing left to do."""
        self.active.seal()
        steps: list[Callable[[], object]] = [*self.unflushed_files()] if durable else []
        # As Kafka's ProducerStateManager.takeSnapshot: only when the state moved past the last
        # snapshot. An empty log has nothing to snapshot, so a broker holding thousands of
        # untouched partitions does not write and fsync a file for each at every shutdown.
        end = self.log_end_offset
        if end > 0 and not self.producer_state.snapshot_path(end).exists():
            steps.append(lambda: self.producer_state.take_snapshot(end, durable))
        return steps

    def mark_flushed(self) -> None:
        """Everything written so far reached the disk another way (a syncfs of its filesystem)."""
        for segment in self.segments:
            segment.mark_flushed()

    def close(self, clean: bool = True) -> None:
        if clean:
            for step in self.prepare_close():
                step()
        for segment in self.segments:
            segment.close()

    def delete(self) -> None:
        for segment in self.segments:
            segment.delete()
        self.segments = []
