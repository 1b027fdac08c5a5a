"""Sparse offset and time indexes with Kafka's entry layouts.

`.index`: 8-byte entries (int32 offset relative to the segment base, int32 file position).
`.timeindex`: 12-byte entries (int64 timestamp, int32 relative offset).
`.txnindex`: 34-byte entries (int16 version 0, int64 producer id, first offset, last offset, last
stable offset), one per aborted transaction, in the segment where its ABORT marker landed.
Kafka preallocates both files to segment.index.bytes and trims them on roll; minikafka appends
entries instead, so the files hold exactly the entries (the same bytes Kafka's trimmed files hold).
Entries are kept in memory too: lookups are a bisect, never a file read.
"""

from __future__ import annotations

import bisect
import os
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from minikafka.storage.files import OS_WRITER, FileWriter, write_fully

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


# Index descriptors kept open between appends, across the process (the descriptor limit is the
# process's). Past this many, an index closes its own descriptor after each write, so a broker with
# thousands of active partitions holds about one descriptor per segment, its log's, as Kafka does
# (it maps its indexes and closes their files). Three per partition ran out of descriptors at 10,000.
MAX_HELD_INDEX_DESCRIPTORS = 1024


class _HeldDescriptors:
    """How many index descriptors are open; written from the event loop and the close threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def add(self, delta: int) -> None:
        with self._lock:
            self.count += delta


_held = _HeldDescriptors()


class _AppendOnlyIndex:
    entry: struct.Struct

    def __init__(self, path: Path, writer: FileWriter = OS_WRITER) -> None:
        self.path = path
        self._writer = writer
        self._fd = -1
        self._pending: bytearray | None = None  # entries held back by `buffered_appends`
        # Written (or truncated) since the last fsync: a flush of an untouched index (most of them,
        # at a shutdown) costs a journal commit on ext4 and buys nothing.
        self._unflushed = False

    def _open(self) -> int:
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            _held.add(1)
        return self._fd

    def _release_if_over_budget(self) -> None:
        if _held.count > MAX_HELD_INDEX_DESCRIPTORS:
            self.close()

    def _entry_count(self) -> int:
        """Entries in memory; the file holds exactly these (appends write before they are listed)."""
        raise NotImplementedError

    def _write(self, data: bytes) -> None:
        """Append one entry (called before it is listed in memory), or keep it for the end of
        `buffered_appends`."""
        if self._pending is not None:
            self._pending += data
            return
        self._write_at(data, self._entry_count() * self.entry.size)

    @contextmanager
    def buffered_appends(self) -> Iterator[None]:
        """Entries appended inside are written at the end in one write: rebuilding the index of a
        crashed segment wrote (and fstat'ed) the file once per entry."""
        self._pending = bytearray()
        try:
            yield
        finally:
            pending, self._pending = self._pending, None
            if pending:
                self._write_at(pending, self._entry_count() * self.entry.size - len(pending))

    def _write_at(self, data: bytes | bytearray, before: int) -> None:
        """Append whole or not at all: a failed write truncates the file back to `before` bytes."""
        fd = self._open()
        self._unflushed = True
        try:
            write_fully(self._writer, fd, data)
        except OSError:
            os.ftruncate(fd, before)
            raise
        finally:
            self._release_if_over_budget()

    def _truncate_file(self, entries: int) -> None:
        if self._fd >= 0 or self.path.exists():
            self._unflushed = True
            os.ftruncate(self._open(), entries * self.entry.size)
            self._release_if_over_budget()

    def _read_entries(self) -> list[tuple[int, int]] | None:
        """Entries of the file, or None if it is missing or not a whole number of entries."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        if len(data) % self.entry.size:
            return None
        return [self.entry.unpack_from(data, pos) for pos in range(0, len(data), self.entry.size)]

    def reset(self) -> None:
        """Drop every entry. A missing file stays missing: the first append creates it, and a segment
        too small for any entry needs none (creating thousands of empty files slowed recovery)."""
        self.close()
        try:
            os.truncate(self.path, 0)
        except FileNotFoundError:
            return
        self._unflushed = True

    @property
    def unflushed(self) -> bool:
        return self._unflushed

    def mark_flushed(self) -> None:
        self._unflushed = False

    def flush(self) -> None:
        if not self._unflushed:
            return
        if self._fd >= 0:
            os.fsync(self._fd)
        else:
            # Its descriptor was given back after the write: fsync reaches the file's dirty pages
            # through any descriptor.
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                fd = -1
            if fd >= 0:
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        self._unflushed = False

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            _held.add(-1)

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class OffsetIndex(_AppendOnlyIndex):
    entry = _OFFSET_ENTRY

    def __init__(self, path: Path, base_offset: int, writer: FileWriter = OS_WRITER) -> None:
        super().__init__(path, writer)
        self.base_offset = base_offset
        self.offsets: list[int] = []  # absolute offsets
        self.positions: list[int] = []

    def _entry_count(self) -> int:
        return len(self.offsets)

    def load(self, segment_size: int, missing_is_empty: bool = False) -> bool:
        """Load entries; False if the file fails Kafka's sanity checks, or is missing where it must
        exist (`missing_is_empty`: the segment is too small to have had an entry)."""
        entries = self._read_entries()
        if entries is None:
            return missing_is_empty and not self.path.exists()
        last_rel, last_pos = -1, -1
        for rel, pos in entries:
            if rel <= last_rel or pos < last_pos or pos >= max(segment_size, 1) or rel < 0:
                return False
            last_rel, last_pos = rel, pos
        self.offsets = [self.base_offset + rel for rel, _ in entries]
        self.positions = [pos for _, pos in entries]
        return True

    def append(self, offset: int, position: int) -> None:
        if self.offsets and offset <= self.offsets[-1]:
            return
        self._write(_OFFSET_ENTRY.pack(offset - self.base_offset, position))
        self.offsets.append(offset)
        self.positions.append(position)

    def truncate_entries(self, count: int) -> None:
        """Keep the first `count` entries (undoing a failed append)."""
        if count < len(self.offsets):
            del self.offsets[count:], self.positions[count:]
            self._truncate_file(count)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or below `offset`, or (base, 0)."""
        index = bisect.bisect_right(self.offsets, offset) - 1
        if index < 0:
            return self.base_offset, 0
        return self.offsets[index], self.positions[index]

    def reset(self) -> None:
        super().reset()
        self.offsets, self.positions = [], []

    @property
    def last_position(self) -> int:
        return self.positions[-1] if self.positions else 0


class TimeIndex(_AppendOnlyIndex):
    entry = _TIME_ENTRY

    def __init__(self, path: Path, base_offset: int, writer: FileWriter = OS_WRITER) -> None:
        super().__init__(path, writer)
        self.base_offset = base_offset
        self.timestamps: list[int] = []
        self.offsets: list[int] = []

    def _entry_count(self) -> int:
        return len(self.timestamps)

    def load(self, missing_is_empty: bool = False) -> bool:
        entries = self._read_entries()
        if entries is None:
            return missing_is_empty and not self.path.exists()
        last_ts, last_rel = -(2**63), -1
        for ts, rel in entries:
            if ts < last_ts or rel < last_rel or rel < 0:
                return False
            last_ts, last_rel = ts, rel
        self.timestamps = [ts for ts, _ in entries]
        self.offsets = [self.base_offset + rel for _, rel in entries]
        return True

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Record (max timestamp so far, offset) when the timestamp grows, as Kafka does."""
        if self.timestamps and timestamp <= self.timestamps[-1]:
            return
        self._write(_TIME_ENTRY.pack(timestamp, offset - self.base_offset))
        self.timestamps.append(timestamp)
        self.offsets.append(offset)

    def truncate_entries(self, count: int) -> None:
        if count < len(self.timestamps):
            del self.timestamps[count:], self.offsets[count:]
            self._truncate_file(count)

    def lookup(self, timestamp: int) -> int:
        """Offset of the last entry whose timestamp is below `timestamp` (a safe scan start)."""
        index = bisect.bisect_left(self.timestamps, timestamp) - 1
        return self.offsets[index] if index >= 0 else self.base_offset

    def reset(self) -> None:
        super().reset()
        self.timestamps, self.offsets = [], []


_ABORTED_TXN = struct.Struct(">hqqqq")


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """A `.txnindex` entry (Kafka's AbortedTxn, version 0, 34 bytes)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex(_AppendOnlyIndex):
    """Aborted transactions whose ABORT marker was written in this segment."""

    entry = _ABORTED_TXN

    def __init__(self, path: Path, writer: FileWriter = OS_WRITER) -> None:
        super().__init__(path, writer)
        self.aborted: list[AbortedTxn] = []

    def _entry_count(self) -> int:
        return len(self.aborted)

    def load(self) -> bool:
        entries = self._read_entries()
        if entries is None:
            return not self.path.exists()  # no file simply means no aborted transactions
        if any(fields[0] != 0 for fields in entries):
            return False
        self.aborted = [AbortedTxn(*fields[1:]) for fields in entries]
        return True

    def _read_entries(self) -> list[tuple[int, ...]] | None:  # type: ignore[override]
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        if len(data) % _ABORTED_TXN.size:
            return None
        return [_ABORTED_TXN.unpack_from(data, pos) for pos in range(0, len(data), _ABORTED_TXN.size)]

    def append(self, txn: AbortedTxn) -> None:
        self._write(_ABORTED_TXN.pack(0, txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset))
        self.aborted.append(txn)

    def reset(self) -> None:
        if self.path.exists():
            super().reset()
        self.aborted = []

    def overlapping(self, start: int, end: int) -> list[AbortedTxn]:
        """Entries that may hold records in [start, end): Kafka's TransactionIndex.collectAbortedTxns."""
        return [t for t in self.aborted if t.last_offset >= start and t.first_offset < end]


# --- pure readers (tools: `minikafka dump-log`) --------------------------------------------------

OFFSET_ENTRY_SIZE = _OFFSET_ENTRY.size
TIME_ENTRY_SIZE = _TIME_ENTRY.size
ABORTED_TXN_SIZE = _ABORTED_TXN.size


def parse_offset_index(data: bytes) -> list[tuple[int, int]]:
    """(relative offset, position) of every whole entry, unchecked; a partial tail is left out, as
    Kafka's index reader rounds the file size down to whole entries."""
    return [_OFFSET_ENTRY.unpack_from(data, pos) for pos in range(0, len(data) - OFFSET_ENTRY_SIZE + 1,
                                                                  OFFSET_ENTRY_SIZE)]


def parse_time_index(data: bytes) -> list[tuple[int, int]]:
    """(timestamp, relative offset) of every whole entry, unchecked; a partial tail is left out."""
    return [_TIME_ENTRY.unpack_from(data, pos) for pos in range(0, len(data) - TIME_ENTRY_SIZE + 1,
                                                                TIME_ENTRY_SIZE)]


def parse_txn_index(data: bytes) -> list[tuple[int, AbortedTxn]]:
    """(version, entry) of every whole `.txnindex` entry, whatever its version; a partial tail is left out."""
    entries = []
    for pos in range(0, len(data) - ABORTED_TXN_SIZE + 1, ABORTED_TXN_SIZE):
        version, *fields = _ABORTED_TXN.unpack_from(data, pos)
        entries.append((version, AbortedTxn(*fields)))
    return entries
