"""Per-partition producer state: idempotent sequence checks, de-duplication, snapshots.

Follows Kafka's ProducerStateManager / ProducerAppendInfo / ProducerStateEntry:
- per producer id: the epoch and the metadata of its last 5 batches (the de-duplication window);
- `prepare_update` hands out a `ProducerAppendInfo` that validates a batch against a *copy* of the
  entry, so nothing changes until `update` is called after the batch is written (validate before
  mutating);
- a new epoch must start at sequence 0, unless the producer has no epoch at all (its state expired
  or was removed with the segments that held it: KIP-360 accepts any sequence then);
- sequences wrap from Int32 max to 0.
Snapshots are Kafka's `<offset>.snapshot` files: int16 version 1, uint32 CRC32C over the rest,
int32 count, then per producer 8 fields (pid, epoch, last seq, last offset, offset delta, timestamp,
coordinator epoch, current txn first offset). Only the last batch of each producer is persisted, as
in Kafka, so after a restart the de-duplication window is one batch until new appends refill it.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import structlog
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.records import crc32c
from minikafka.storage.checkpoint import write_atomically
from minikafka.storage.origin import AppendOrigin

NO_EPOCH = -1
NO_SEQUENCE = -1
NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 2**31 - 1

_log = structlog.get_logger("minikafka.storage")

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_SNAPSHOT_HEAD = struct.Struct(">hIi")
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")


class OutOfOrderSequence(KafkaError):
    error_code = ErrorCode.out_of_order_sequence_number


class InvalidProducerEpoch(KafkaError):
    error_code = ErrorCode.invalid_producer_epoch


class ProducerFenced(KafkaError):
    error_code = ErrorCode.producer_fenced


class TransactionCoordinatorFenced(KafkaError):
    error_code = ErrorCode.transaction_coordinator_fenced


class InvalidTxnState(KafkaError):
    error_code = ErrorCode.invalid_txn_state


class CorruptSnapshot(Exception):
    pass


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction ended on this partition by a marker at `last_offset`."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


# Not frozen: a frozen dataclass's __init__ sets each field through object.__setattr__ (see records.BatchHeader)
@dataclass(slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    epoch: int = NO_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def copy(self) -> ProducerStateEntry:
        # Every append validates against a copy: the constructor is twice as fast as dataclasses.replace.
        return ProducerStateEntry(self.producer_id, self.epoch, deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN),
                                  self.coordinator_epoch, self.last_timestamp, self.current_txn_first_offset)

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerAppendInfo:
    """Validates appends of one producer against a copy of its entry; applied by `update`."""

    def __init__(self, producer_id: int, current: ProducerStateEntry | None,
                 origin: AppendOrigin = AppendOrigin.CLIENT) -> None:
        self.producer_id = producer_id
        self._current = current
        self.entry = current.copy() if current is not None else ProducerStateEntry(producer_id)
        self._validate = origin is not AppendOrigin.REPLICATION
        self._check_sequences = origin is AppendOrigin.CLIENT

    def _check_epoch(self, epoch: int, transactional: bool) -> None:
        if epoch < self.entry.epoch:
            message = f"epoch {epoch} of producer {self.producer_id} is older than {self.entry.epoch}"
            # Kafka 2.7+ answers a stale data batch with INVALID_PRODUCER_EPOCH, transactional or not,
            # so the client aborts and retries instead of treating it as fatal fencing (KIP-588)
            raise InvalidProducerEpoch(message)

    def _check_sequence(self, epoch: int, first_seq: int) -> None:
        entry = self.entry
        if epoch != entry.epoch:
            if first_seq != 0 and entry.epoch != NO_EPOCH:
                raise OutOfOrderSequence(
                    f"producer {self.producer_id}: new epoch {epoch} must start at sequence 0, got {first_seq}")
            return
        current_epoch = self._current.epoch if self._current is not None else NO_EPOCH
        if current_epoch != NO_EPOCH and not _in_sequence(entry.last_seq, first_seq):
            raise OutOfOrderSequence(
                f"producer {self.producer_id}: sequence {first_seq} does not follow {entry.last_seq}")

    def append_data_batch(self, epoch: int, first_seq: int, last_seq: int, timestamp: int,
                          first_offset: int, last_offset: int, transactional: bool = False) -> None:
        if self._validate:
            self._check_epoch(epoch, transactional)
            if self._check_sequences:
                self._check_sequence(epoch, first_seq)
        entry = self.entry
        if epoch != entry.epoch:
            entry.batches.clear()
            entry.epoch = epoch
        entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset, last_offset - first_offset, timestamp))
        entry.last_timestamp = timestamp
        if transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset

    def check_transactional(self, transactional: bool) -> None:
        """Kafka refuses plain batches from a producer whose transaction is still open."""
        if self._validate and not transactional and self.entry.current_txn_first_offset >= 0:
            raise InvalidTxnState(f"producer {self.producer_id} has an open transaction; its batches must be "
                                  "transactional")

    def append_end_txn_marker(self, epoch: int, coordinator_epoch: int, marker_offset: int, commit: bool,
                              timestamp: int) -> CompletedTxn:
        """Apply a COMMIT/ABORT marker: closes the producer's open transaction on this partition."""
        entry = self.entry
        if self._validate:
            if epoch < entry.epoch:
                raise ProducerFenced(f"marker epoch {epoch} of producer {self.producer_id} is older than "
                                     f"{entry.epoch}")
            if coordinator_epoch < entry.coordinator_epoch:
                raise TransactionCoordinatorFenced(
                    f"coordinator epoch {coordinator_epoch} is older than {entry.coordinator_epoch}")
        first_offset = entry.current_txn_first_offset if entry.current_txn_first_offset >= 0 else marker_offset
        if epoch != entry.epoch:
            entry.batches.clear()
            entry.epoch = epoch
        entry.coordinator_epoch = coordinator_epoch
        entry.current_txn_first_offset = -1
        entry.last_timestamp = timestamp
        return CompletedTxn(self.producer_id, first_offset, marker_offset, not commit)


class VerificationGuard:
    """Kafka's VerificationGuard: proof, by identity, that the transaction coordinator verified (or,
    under transaction version 2, added) this partition for the producer since its last marker. A
    transactional batch that starts a transaction here must bring the guard still on record, so a
    verification a marker overtook (the hanging-transaction race of KIP-890) cannot open one."""

    __slots__ = ()


class ProducerStateManager:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._entries: dict[int, ProducerStateEntry] = {}
        # Kafka's ongoingTxns: first offset of each open transaction by producer, so the last stable
        # offset is found per fetch without walking every producer that ever wrote here.
        self._ongoing: dict[int, int] = {}
        self._first_unstable: int | None = None
        # Kafka's VerificationStateEntry per producer: in memory only, as in Kafka
        self._verification: dict[int, VerificationGuard] = {}

    def start_verification(self, producer_id: int) -> VerificationGuard:
        """Kafka's maybeCreateVerificationStateEntry: the producer's guard, created if it has none."""
        return self._verification.setdefault(producer_id, VerificationGuard())

    def is_verified(self, producer_id: int, guard: VerificationGuard) -> bool:
        return self._verification.get(producer_id) is guard

    def clear_verification(self, producer_id: int) -> None:
        """A marker ended the producer's transaction here (or one started): the guard is spent."""
        self._verification.pop(producer_id, None)

    @property
    def entries(self) -> Mapping[int, ProducerStateEntry]:
        """Every producer's state; changed only through `update`, `restore` and the bulk operations."""
        return self._entries

    def _replace_all(self, entries: dict[int, ProducerStateEntry]) -> None:
        self._entries = entries
        self._ongoing = {pid: entry.current_txn_first_offset for pid, entry in entries.items()
                         if entry.current_txn_first_offset >= 0}
        self._first_unstable = min(self._ongoing.values(), default=None)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._entries.get(producer_id)

    def prepare_update(self, producer_id: int, origin: AppendOrigin = AppendOrigin.CLIENT) -> ProducerAppendInfo:
        return ProducerAppendInfo(producer_id, self._entries.get(producer_id), origin)

    def update(self, info: ProducerAppendInfo) -> None:
        self.restore(info.producer_id, info.entry)

    def restore(self, producer_id: int, entry: ProducerStateEntry | None) -> None:
        """Set (None: forget) one producer's state, as an append or the undo of a failed one does."""
        if entry is None:
            self._entries.pop(producer_id, None)
        else:
            self._entries[producer_id] = entry
        first_offset = entry.current_txn_first_offset if entry is not None else -1
        previous = self._ongoing.get(producer_id)
        if first_offset == (-1 if previous is None else previous):
            return
        if first_offset >= 0:
            self._ongoing[producer_id] = first_offset
            if self._first_unstable is None or first_offset < self._first_unstable:
                self._first_unstable = first_offset
        else:
            del self._ongoing[producer_id]
        if previous is not None and previous == self._first_unstable:
            self._first_unstable = min(self._ongoing.values(), default=None)

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction: the last stable offset can't pass it."""
        return self._first_unstable

    def remove_expired(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget producers idle longer than producer.id.expiration.ms and with no open transaction."""
        expired = [pid for pid, entry in self._entries.items()
                   if entry.current_txn_first_offset < 0 and now_ms - entry.last_timestamp >= expiration_ms]
        for pid in expired:
            del self._entries[pid]  # not in `_ongoing`: only producers with no open transaction expire
        return expired

    def truncate_and_reload(self, log_start: int, log_end: int) -> None:
        """Drop state for offsets outside [log_start, log_end) (retention, truncation)."""
        self._replace_all({pid: e for pid, e in self._entries.items() if log_start <= e.last_offset < log_end})

    # --- snapshots -----------------------------------------------------------------------

    def snapshot_path(self, offset: int) -> Path:
        return self.directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    def take_snapshot(self, offset: int, durable: bool = True) -> Path:
        """Write `<offset>.snapshot` (tmp, fsync unless not `durable`, rename) with the last batch of each
        producer. A snapshot lost or torn by a crash is found by its CRC and deleted at load, and the
        state is replayed from an older one or the log: only its time is lost."""
        body = bytearray(struct.pack(">i", len(self.entries)))
        for entry in self.entries.values():
            last = entry.batches[-1] if entry.batches else None
            body += _SNAPSHOT_ENTRY.pack(
                entry.producer_id, entry.epoch, last.last_seq if last else NO_SEQUENCE,
                last.last_offset if last else -1, last.offset_delta if last else 0,
                entry.last_timestamp, entry.coordinator_epoch, entry.current_txn_first_offset)
        crc = crc32c(bytes(body))
        data = struct.pack(">hI", SNAPSHOT_VERSION, crc) + body
        path = self.snapshot_path(offset)
        write_atomically(path, data, durable)
        return path

    def snapshot_offsets(self) -> list[int]:
        offsets = []
        for name in os.listdir(self.directory):
            if name.endswith(SNAPSHOT_SUFFIX) and (stem := name[: -len(SNAPSHOT_SUFFIX)]).isdigit():
                offsets.append(int(stem))
        return sorted(offsets)

    def delete_snapshots_below(self, offset: int) -> None:
        for snapshot in self.snapshot_offsets():
            if snapshot < offset:
                self.snapshot_path(snapshot).unlink(missing_ok=True)

    def delete_snapshots_above(self, offset: int) -> None:
        for snapshot in self.snapshot_offsets():
            if snapshot > offset:
                self.snapshot_path(snapshot).unlink(missing_ok=True)

    def load_latest_snapshot(self, at_or_below: int) -> int | None:
        """Load the newest valid snapshot <= `at_or_below`; corrupt ones are deleted. Returns its offset."""
        for offset in reversed(self.snapshot_offsets()):
            if offset > at_or_below:
                continue
            path = self.snapshot_path(offset)
            try:
                self._replace_all(read_snapshot(path))
                return offset
            except CorruptSnapshot as exc:
                _log.warning("ignoring corrupt producer snapshot; rebuilding from the log", path=str(path),
                             reason=str(exc))
                path.unlink(missing_ok=True)
        self._replace_all({})
        return None


def read_snapshot(path: Path) -> dict[int, ProducerStateEntry]:
    data = path.read_bytes()
    if len(data) < _SNAPSHOT_HEAD.size:
        raise CorruptSnapshot(f"{path}: too short")
    version, crc, count = _SNAPSHOT_HEAD.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshot(f"{path}: version {version}")
    if crc32c(data[6:]) != crc:
        raise CorruptSnapshot(f"{path}: CRC mismatch")
    if count < 0 or len(data) != _SNAPSHOT_HEAD.size + count * _SNAPSHOT_ENTRY.size:
        raise CorruptSnapshot(f"{path}: {count} entries do not match the file size")
    entries: dict[int, ProducerStateEntry] = {}
    for index in range(count):
        pid, epoch, last_seq, last_offset, delta, ts, coord_epoch, txn_first = _SNAPSHOT_ENTRY.unpack_from(
            data, _SNAPSHOT_HEAD.size + index * _SNAPSHOT_ENTRY.size)
        entry = ProducerStateEntry(pid, epoch, coordinator_epoch=coord_epoch, last_timestamp=ts,
                                   current_txn_first_offset=txn_first)
        if last_offset >= 0:
            first_seq = last_seq - delta if last_seq >= delta else (last_seq - delta) & INT32_MAX
            entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset, delta, ts))
        entries[pid] = entry
    return entries


@dataclass(frozen=True, slots=True)
class SnapshotEntry:
    """One producer of a `.snapshot` file, fields as stored (Kafka's ProducerSnapshot entry)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int

    @property
    def first_sequence(self) -> int:
        """Kafka's BatchMetadata.firstSeq (DefaultRecordBatch.decrementSequence: wraps below 0)."""
        if self.last_sequence < self.offset_delta:
            return INT32_MAX - (self.offset_delta - self.last_sequence) + 1
        return self.last_sequence - self.offset_delta


def parse_snapshot(data: bytes) -> list[SnapshotEntry]:
    """The entries of a `.snapshot` file in file order; CorruptSnapshot with Kafka's messages
    (ProducerStateManager.readSnapshot) for a bad version, CRC or layout."""
    if len(data) < _SNAPSHOT_HEAD.size:
        raise CorruptSnapshot(f"Snapshot failed schema validation: {len(data)} bytes, less than the "
                              f"{_SNAPSHOT_HEAD.size}-byte header")
    version, crc, count = _SNAPSHOT_HEAD.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshot(f"Snapshot contained an unknown file version {version}")
    computed = crc32c(data[6:])
    if computed != crc:
        raise CorruptSnapshot(f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. "
                              f"Computed crc: {computed}")
    if count < 0 or len(data) != _SNAPSHOT_HEAD.size + count * _SNAPSHOT_ENTRY.size:
        raise CorruptSnapshot(f"Snapshot failed schema validation: {count} entries do not fill "
                              f"{len(data) - _SNAPSHOT_HEAD.size} bytes")
    return [SnapshotEntry(*_SNAPSHOT_ENTRY.unpack_from(data, _SNAPSHOT_HEAD.size + i * _SNAPSHOT_ENTRY.size))
            for i in range(count)]
