"""LogSegment: one `.log` file of record batches plus its `.index`, `.timeindex` and `.txnindex`.

Batches are written exactly as they will be served (base offsets already assigned) and read back
as byte slices. Headers are read with `pread`, a window of them at a time; records are never decoded
here except to answer timestamp lookups inside one batch.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from minikafka.protocol.errors import CorruptRecord
from minikafka.protocol.records import (
    BATCH_LENGTH_OFFSET,
    HEADER_SIZE,
    INT32,
    INT64,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    BatchHeader,
    decode_batch,
    is_crc_valid,
)
from minikafka.protocol.regions import FileRegion
from minikafka.storage.files import OS_WRITER, FileWriter, write_fully, write_parts_fully
from minikafka.storage.index import OffsetIndex, TimeIndex, TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
# Kafka's LocalLog suffixes for a segment the log cleaner is writing, and for one ready to replace
# the segments it was cleaned from (storage/log.py completes or discards them on load).
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
# Bytes read at once when scanning batch headers (segment.iter_headers), beyond the index interval.
HEADER_WINDOW_BYTES = 4096
# Bytes read at once when recovery re-reads a segment to check every batch (more for a bigger batch).
RECOVERY_READ_BYTES = 1 << 20


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class SegmentMark(NamedTuple):
    """What a segment looked like before an append, to put it back if the append fails."""

    size: int
    next_offset: int
    max_timestamp: int
    max_timestamp_offset: int
    rolling_timestamp: int | None
    bytes_since_index: int
    offset_entries: int
    time_entries: int


class LogSegment:
    def __init__(self, directory: Path, base_offset: int, index_interval_bytes: int, created_ms: int,
                 writer: FileWriter = OS_WRITER, suffix: str = "") -> None:
        """`suffix` (CLEANED_SUFFIX) names a segment the log cleaner writes beside the live ones."""
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self._writer = writer
        self.suffix = suffix
        name = segment_name(base_offset)
        self.log_path = directory / f"{name}{LOG_SUFFIX}{suffix}"
        self.offset_index = OffsetIndex(directory / f"{name}{INDEX_SUFFIX}{suffix}", base_offset, writer)
        self.time_index = TimeIndex(directory / f"{name}{TIME_INDEX_SUFFIX}{suffix}", base_offset, writer)
        self.txn_index = TransactionIndex(directory / f"{name}{TXN_INDEX_SUFFIX}{suffix}", writer)
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = os.fstat(self._fd).st_size
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.max_timestamp_offset = -1  # last offset of the batch holding max_timestamp
        self.rolling_timestamp: int | None = None  # first batch's max timestamp (Kafka's roll basis)
        self.created_ms = created_ms
        self._bytes_since_index = 0
        # Set when the aborted-transaction index must be rebuilt by replaying producer state.
        self.needs_txn_rebuild = False
        # Set when undoing a failed append could not truncate the file: O_APPEND would write after
        # the torn tail, so the next append truncates first.
        self._torn_tail = False
        # Written or truncated since the last fsync. As Kafka flushes only past its recovery point, a
        # flush of an untouched segment is skipped: on ext4 each fsync is a journal commit, and a
        # shutdown fsyncing every empty partition of __consumer_offsets took hundreds of ms.
        self._unflushed = False
        # Regions of the file a response still holds (protocol/regions.py): until the last one goes,
        # closing the segment leaves the descriptor open for them, and tells their holders.
        self._open_regions = 0
        self._fd_after_regions = -1
        self._regions: weakref.WeakSet[FileRegion] = weakref.WeakSet()

    # --- opening and recovery ------------------------------------------------------------

    def load(self, recover: bool) -> int:
        """Make the in-memory view match the files; returns bytes truncated from a torn tail."""
        if self.size == 0:
            self._load_empty()
            return 0
        # Below one index interval no batch was indexed, so absent index files are not damage: they
        # were never needed (a recovered small segment does not create them either).
        unindexed = self.size <= self.index_interval_bytes
        if (recover or not self.offset_index.load(self.size, missing_is_empty=unindexed)
                or not self.time_index.load(missing_is_empty=unindexed)):
            return self.recover()
        if not self.txn_index.load():
            self.needs_txn_rebuild = True
        start_offset, start_position = self.offset_index.lookup(2**63 - 1)
        if self.offset_index.offsets:
            self.next_offset = start_offset + 1
        if self.time_index.timestamps:
            self.max_timestamp = self.time_index.timestamps[-1]
            self.max_timestamp_offset = self.time_index.offsets[-1]
        for _pos, header in self.iter_headers(start_position if self.offset_index.offsets else 0):
            self._track(header)
        self._note_rolling_timestamp()
        return 0

    def _load_empty(self) -> None:
        """An empty `.log` has nothing to recover and nothing to index. Index files it never needed
        are not created (restarting with thousands of fresh partitions stays cheap), but any entries
        left in existing ones point past the end of the log, so those files are emptied."""
        for index in (self.offset_index, self.time_index, self.txn_index):
            if index.path.exists() and index.path.stat().st_size:
                index.reset()

    def _note_rolling_timestamp(self) -> None:
        if self.size:
            first = self.header_at(0)
            if first is not None and first.max_timestamp >= 0:
                self.rolling_timestamp = first.max_timestamp

    def recover(self) -> int:
        """Re-read every batch, keep the valid prefix, rebuild both indexes (Kafka's recoverSegment)."""
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        self.needs_txn_rebuild = True
        self.next_offset = self.base_offset
        self.max_timestamp, self.max_timestamp_offset = -1, -1
        self._bytes_since_index = 0
        valid = 0
        with self.offset_index.buffered_appends(), self.time_index.buffered_appends():
            for position, window, at in self._header_slots(0, RECOVERY_READ_BYTES):
                try:
                    header = BatchHeader.parse_header_only(window, at)
                except CorruptRecord:
                    break
                if position + header.size > self.size:
                    break  # cut short by the end of the file
                if at + header.size > len(window):  # runs past the window: read it whole
                    window, at = os.pread(self._fd, header.size, position), 0
                if not is_crc_valid(window, at, header):
                    break
                self._index(header, position)
                valid = position + header.size
        truncated = self.size - valid
        # Recovered after a crash: what was read back may still be only in the page cache.
        self._unflushed = True
        if truncated:
            os.ftruncate(self._fd, valid)
            self.size = valid
        self._note_rolling_timestamp()
        return truncated

    # --- writing -------------------------------------------------------------------------

    def append(self, data: bytes | bytearray | list[bytes | bytearray | memoryview],
               batches: list[tuple[int, BatchHeader]]) -> SegmentMark:
        """Append whole batches whose offsets are already assigned; index them as Kafka does. `data` is
        their bytes, in one buffer or as consecutive parts (written with one writev).

        All or nothing: if any write fails (disk full, read-only, I/O error) the file, its indexes
        and the in-memory view are put back as they were and the OSError propagates. Returns the
        mark before the append, for a caller that must undo it later.
        """
        mark = self.mark()
        self._unflushed = True
        try:
            if self._torn_tail:
                os.ftruncate(self._fd, self.size)
                self._torn_tail = False
            if isinstance(data, list):
                write_parts_fully(self._writer, self._fd, data)
                size = sum(len(part) for part in data)
            else:
                write_fully(self._writer, self._fd, data)
                size = len(data)
            for pos, header in batches:
                self._index(header, mark.size + pos)
        except OSError:
            self.rewind(mark)
            raise
        self.size = mark.size + size
        if self.rolling_timestamp is None and batches and batches[0][1].max_timestamp >= 0:
            self.rolling_timestamp = batches[0][1].max_timestamp
        return mark

    def mark(self) -> SegmentMark:
        return SegmentMark(self.size, self.next_offset, self.max_timestamp, self.max_timestamp_offset,
                           self.rolling_timestamp, self._bytes_since_index, len(self.offset_index.offsets),
                           len(self.time_index.timestamps))

    def rewind(self, mark: SegmentMark) -> None:
        """Undo everything appended since `mark`: a torn batch must never be served or recovered.

        The in-memory view goes back first, so nothing past the mark is served even if truncating
        the files fails too; the next append retries the truncation.
        """
        self.size = mark.size
        self.next_offset = mark.next_offset
        self.max_timestamp, self.max_timestamp_offset = mark.max_timestamp, mark.max_timestamp_offset
        self.rolling_timestamp = mark.rolling_timestamp
        self._bytes_since_index = mark.bytes_since_index
        self._torn_tail = True
        self._unflushed = True
        self.offset_index.truncate_entries(mark.offset_entries)
        self.time_index.truncate_entries(mark.time_entries)
        os.ftruncate(self._fd, mark.size)
        self._torn_tail = False

    def _track(self, header: BatchHeader) -> None:
        self.next_offset = header.next_offset
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.max_timestamp_offset = header.last_offset

    def _index(self, header: BatchHeader, position: int) -> None:
        self._track(header)
        if self._bytes_since_index > self.index_interval_bytes:
            self.offset_index.append(header.last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.max_timestamp_offset)
            self._bytes_since_index = 0
        self._bytes_since_index += header.size

    def seal(self) -> None:
        """On roll or close: record the final max timestamp in the time index, as Kafka does."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.max_timestamp_offset)

    # --- reading -------------------------------------------------------------------------

    def header_at(self, position: int) -> BatchHeader | None:
        data = os.pread(self._fd, HEADER_SIZE, position)
        try:
            return BatchHeader.parse_header_only(data, 0)
        except CorruptRecord:
            return None

    def _header_slots(self, position: int, read_bytes: int | None = None) -> Iterator[tuple[int, bytes, int]]:
        """(position, window, index in window) of each batch header from `position` on, up to the first
        one whose length or magic is impossible; the window holds at least the whole header.

        The file is read `read_bytes` at a time rather than one `pread` per header: by default a lookup's
        window, since a lookup scans from an index entry, at most an index interval (plus one batch)
        before its target, so with small batches one read serves the whole scan. After a batch bigger
        than a window the next read is the header alone: a window there would copy a batch's worth of
        records to read 61 bytes.
        """
        window_size = read_bytes or min(max(self.index_interval_bytes, HEADER_WINDOW_BYTES) + HEADER_WINDOW_BYTES,
                                        1 << 20)
        read_size = window_size
        window, window_start = b"", position
        while position < self.size:
            at = position - window_start
            if at + HEADER_SIZE > len(window):
                window = os.pread(self._fd, min(read_size, self.size - position), position)
                window_start, at = position, 0
                if len(window) < HEADER_SIZE:
                    return
            (batch_length,) = INT32.unpack_from(window, at + BATCH_LENGTH_OFFSET)
            if batch_length < HEADER_SIZE - LOG_OVERHEAD or window[at + MAGIC_OFFSET] != MAGIC_V2:
                return
            yield position, window, at
            position += batch_length + LOG_OVERHEAD
            read_size = HEADER_SIZE if batch_length >= window_size else window_size

    def iter_headers(self, position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch from `position` on, up to the first invalid header."""
        for batch_position, window, at in self._header_slots(position):
            try:
                header = BatchHeader.parse_header_only(window, at)
            except CorruptRecord:
                return
            yield batch_position, header

    def find(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= `offset`. Headers passed over
        are not parsed: their base offset and last offset delta are all the scan needs."""
        _indexed, position = self.offset_index.lookup(offset)
        for batch_position, window, at in self._header_slots(position):
            (base_offset,) = INT64.unpack_from(window, at)
            (last_offset_delta,) = INT32.unpack_from(window, at + LAST_OFFSET_DELTA_OFFSET)
            if base_offset + last_offset_delta >= offset:
                try:
                    return batch_position, BatchHeader.parse_header_only(window, at)
                except CorruptRecord:
                    return None
        return None

    def position_of(self, offset: int) -> int:
        """Byte position of the first batch at or after `offset` (the segment size if none)."""
        found = self.find(offset)
        return found[0] if found is not None else self.size

    def read(self, position: int, length: int) -> bytes:
        return os.pread(self._fd, length, position)

    def region(self, position: int, length: int) -> FileRegion:
        """The bytes `read` would return, left in the file (see protocol/regions.py)."""
        if self._fd < 0:
            raise ValueError(f"{self.log_path} is closed")
        self._open_regions += 1
        region = FileRegion(self._fd, position, length, self._region_ended)
        self._regions.add(region)
        return region

    def _region_ended(self) -> None:
        self._open_regions -= 1
        if self._open_regions == 0 and self._fd_after_regions >= 0:
            fd, self._fd_after_regions = self._fd_after_regions, -1
            os.close(fd)

    def find_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp` in this segment."""
        start = self.time_index.lookup(timestamp)
        _indexed, position = self.offset_index.lookup(start)
        for pos, header in self.iter_headers(position):
            if header.max_timestamp >= timestamp and not header.is_control:
                for record in decode_batch(self.read(pos, header.size)).records:
                    if record.timestamp >= timestamp:
                        return record.offset, record.timestamp
        return None

    def record_with_max_timestamp(self) -> tuple[int, int] | None:
        if self.max_timestamp < 0:
            return None
        found = self.find(self.max_timestamp_offset)
        if found is None:
            return None
        pos, header = found
        for record in decode_batch(self.read(pos, header.size)).records:
            if record.timestamp == self.max_timestamp:
                return record.offset, record.timestamp
        return header.last_offset, self.max_timestamp

    def largest_timestamp(self) -> int:
        """Retention's age basis: the max record timestamp, else the file's modification time."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.fstat(self._fd).st_mtime * 1000)

    # --- lifecycle -----------------------------------------------------------------------

    def change_suffix(self, new_suffix: str) -> None:
        """Rename the four files (Kafka's changeFileSuffixes): the indexes first and the `.log` last, so
        a `.log` under the new name means its indexes are complete under it too. Open descriptors
        follow the files. Every index file is made first: a missing `.txnindex` would let the old
        segment's one, of the same base offset, survive the swap."""
        name = segment_name(self.base_offset)
        for index, suffix in ((self.offset_index, INDEX_SUFFIX), (self.time_index, TIME_INDEX_SUFFIX),
                              (self.txn_index, TXN_INDEX_SUFFIX)):
            if not index.path.exists():
                index.path.touch()
            target = self.directory / f"{name}{suffix}{new_suffix}"
            os.replace(index.path, target)
            index.path = target
        target = self.directory / f"{name}{LOG_SUFFIX}{new_suffix}"
        os.replace(self.log_path, target)
        self.log_path = target
        self.suffix = new_suffix

    def set_last_modified(self, mtime_ns: int) -> None:
        """Keep the replaced segments' age (retention falls back to it when no timestamp is known)."""
        os.utime(self.log_path, ns=(mtime_ns, mtime_ns))

    def last_modified_ns(self) -> int:
        return os.fstat(self._fd).st_mtime_ns

    def flush(self) -> None:
        for flush in self.unflushed_files():
            flush()

    def unflushed_files(self) -> list[Callable[[], None]]:
        """The fsyncs a flush would make now, one per file written since its last: a caller flushing
        many segments may run them at once, so that they share journal commits."""
        flushes = [self._flush_log] if self._unflushed else []
        flushes += [index.flush for index in (self.offset_index, self.time_index, self.txn_index) if index.unflushed]
        return flushes

    def mark_flushed(self) -> None:
        self._unflushed = False
        for index in (self.offset_index, self.time_index, self.txn_index):
            index.mark_flushed()

    def _flush_log(self) -> None:
        os.fsync(self._fd)
        self._unflushed = False

    def close(self) -> None:
        orphaned: list[FileRegion] = []
        if self._fd >= 0:
            if self._open_regions:
                self._fd_after_regions = self._fd
                orphaned = list(self._regions)
            else:
                os.close(self._fd)
            self._fd = -1
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        # Told once the segment is closed: a holder letting go may end the last region, which closes the
        # descriptor (the list holds them until the loop is done).
        for region in orphaned:
            region.orphaned()

    def delete(self) -> None:
        self.close()
        self.log_path.unlink(missing_ok=True)
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
