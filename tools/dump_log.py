"""`minikafka dump-log`: Kafka's kafka-dump-log.sh (DumpLogSegments) without a JVM.

    minikafka dump-log --files DIR/t-0/00000000000000000000.log,DIR/t-0/00000000000000000000.index \\
        [--print-data-log] [--deep-iteration] [--offsets-decoder | --transaction-log-decoder] \\
        [--verify-index-only] [--index-sanity-check] [--max-message-size N] [--max-bytes N] \\
        [--skip-record-metadata] [--key-decoder-class C] [--value-decoder-class C] [--json]

Option names and output lines are Kafka 4.x's (org.apache.kafka.tools.DumpLogSegments), file by
file after a `Dumping <file>` line:
- `.log` (and KRaft `.checkpoint`): `Log starting offset: N`, then one line per batch
  (`baseOffset: 0 lastOffset: 0 count: 1 baseSequence: ... isTransactional: true isControl: true
  deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: ... crc: ... isvalid: true`); with
  `--deep-iteration` one `| offset: ...` line per record, control records ending in
  `endTxnMarker: COMMIT coordinatorEpoch: 0`; with `--print-data-log` (implied by any decoder) the
  key and payload, decoded as UTF-8, or as `__consumer_offsets` / `__transaction_state` records
  with `--offsets-decoder` / `--transaction-log-decoder` (see dump_log_parsers.py).
- `.index`: `offset: N position: P`; `.timeindex`: `timestamp: T offset: N`. Both are checked
  against the segment's `.log` as Kafka does; `--verify-index-only` prints only the problems,
  `--index-sanity-check` runs the broker's start-up check only (`<file> passed sanity check.`).
- `.snapshot`: one `producerId: ... producerEpoch: ... coordinatorEpoch: ... currentTxnFirstOffset:
  OptionalLong.empty lastTimestamp: ... firstSequence: ...` line per producer.
- `.txnindex`: `version: 0 producerId: P firstOffset: F lastOffset: L lastStableOffset: S`.
Index mismatches, time index problems and non-consecutive record offsets are reported on stderr
after all files, with Kafka's wording.

Where this differs from Kafka:
- The exit status is 1 when anything was wrong: a missing, unreadable or corrupt file (then an
  error line `minikafka dump-log: <file>: <reason>` on stderr, and the other files are still
  dumped), invalid trailing bytes, a batch with a bad CRC, an index or time index mismatch, a
  partial index entry. Kafka exits 0 for all but the exceptions it does not catch, and stops at
  those with a stack trace. A missing `.txnindex` is an error here (Kafka prints nothing).
- Only v2 record batches (all that minikafka writes): a v0/v1 message set is an error. Control
  records other than transaction markers print `controlType: NAME(id)` instead of their KRaft JSON.
  `--cluster-metadata-decoder`, `--remote-log-metadata-decoder` and `--share-group-state-decoder`
  are refused (minikafka has none of those topics); the only decoder class is Kafka's StringDecoder.
- A `.timeindex` whose `.index` is missing is read from the start of the log (Kafka fails).

`--json` (our extension) writes one JSON object per line to stdout instead of the text, each with a
`"type"` and the `"file"` as given:
    {"type":"dumping","file":F}
    {"type":"logStartOffset","file":F,"offset":N}
    {"type":"snapshotId","file":F,"endOffset":N,"epoch":E}     (a KRaft .checkpoint; bootstrap: "bootstrap":true)
    {"type":"batch","file":F,"baseOffset":0,"lastOffset":0,"count":1,"baseSequence":-1,
     "lastSequence":-1,"producerId":-1,"producerEpoch":-1,"partitionLeaderEpoch":0,
     "isTransactional":false,"isControl":false,"deleteHorizonMs":null,"position":0,
     "timestampType":"CreateTime","maxTimestamp":T,"size":S,"magic":2,"compresscodec":"none",
     "crc":C,"isvalid":true}
    {"type":"record","file":F,"offset":0,"timestampType":"CreateTime","timestamp":T,"keySize":-1,
     "valueSize":5,"sequence":-1,"headerKeys":[], then for a control record "endTxnMarker":"COMMIT",
     "coordinatorEpoch":0 (or "controlType":NAME,"controlTypeId":N), and with --print-data-log
     "key":K,"payload":P}  (strings, or objects under a decoder; null when absent or a tombstone;
     --skip-record-metadata does not shorten JSON records)
    {"type":"indexEntry","file":F,"offset":N,"position":P}
    {"type":"timeIndexEntry","file":F,"timestamp":T,"offset":N}
    {"type":"producerSnapshotEntry","file":F,"producerId":P,"producerEpoch":E,"coordinatorEpoch":C,
     "currentTxnFirstOffset":N|null,"lastTimestamp":T, and when the producer has a batch
     "firstSequence","lastSequence","lastOffset","offsetDelta","timestamp"}
    {"type":"abortedTxn","file":F,"version":0,"producerId":P,"firstOffset":N,"lastOffset":N,
     "lastStableOffset":N}
    {"type":"status","file":F,"message":M}    ("... is empty.", "... passed sanity check.", and the
                                                headings of the reports below, e.g. "Mismatches in :ABS")
    {"type":"ignored","file":F}                                 (unknown suffix)
    {"type":"invalidBytes","file":F,"bytes":N}
    {"type":"error","file":F,"message":M}                       (also written to stderr)
    {"type":"indexMismatch","file":ABS,"indexOffset":N,"logOffset":N}
    {"type":"timeIndexMismatch","file":ABS,"indexTimestamp":T,"logTimestamp":T}
    {"type":"timeIndexOutOfOrder","file":ABS,"indexTimestamp":T,"previousTimestamp":T}
    {"type":"timeIndexOffsetNotFound","file":ABS,"indexOffset":N,"logOffset":N}
    {"type":"nonConsecutiveOffsets","file":ABS,"offset":N,"followedBy":N}
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import mmap
import os
import re
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from minikafka.protocol.errors import CorruptRecord, UnsupportedCompression
from minikafka.protocol.records import TIMESTAMP_TYPE_MASK, TRANSACTIONAL_FLAG, BatchHeader, crc32c, decode_batch
from minikafka.storage.index import (
    ABORTED_TXN_SIZE,
    OFFSET_ENTRY_SIZE,
    TIME_ENTRY_SIZE,
    parse_offset_index,
    parse_time_index,
    parse_txn_index,
)
from minikafka.storage.producer_state import CorruptSnapshot, parse_snapshot
from minikafka.tools.cli import OneLineArgumentParser
from minikafka.tools.dump_log_parsers import STRING_DECODERS, MessageParser, MissingKey, Printed, Tombstone, parser_for

INT32_MAX = 2**31 - 1
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
NO_TIMESTAMP = -1

# Kafka's FileLogInputStream: a batch needs offset+size+epoch+magic to be recognised at all
# (HEADER_SIZE_UP_TO_MAGIC), and no record can be smaller than a v0 record (RECORD_OVERHEAD_V0).
_HEADER_SIZE_UP_TO_MAGIC = 17
_LOG_OVERHEAD = 12
_RECORD_OVERHEAD_V0 = 14
_V2_HEADER = struct.Struct(">qiibIhiqqqhii")
_V2_HEADER_SIZE = _V2_HEADER.size
_CRC_START = 21
_DELETE_HORIZON_FLAG = 0x40
_COMPRESSION = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
                  5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}
_CHECKPOINT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
_BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"
_LONG = re.compile(r"^[+-]?[0-9]+$")
_UNSUPPORTED_DECODERS = {
    "cluster_metadata_decoder": "--cluster-metadata-decoder (minikafka has no __cluster_metadata log)",
    "remote_log_metadata_decoder": "--remote-log-metadata-decoder (minikafka has no tiered storage)",
    "share_group_state_decoder": "--share-group-state-decoder (minikafka has no __share_group_state topic)",
}
_STRING_DECODER = "org.apache.kafka.tools.api.StringDecoder"


class DumpError(Exception):
    """A file that cannot be dumped (missing, unreadable, corrupt): one error line, exit status 1."""


@dataclass(frozen=True, slots=True)
class Options:
    files: list[str]
    print_data_log: bool = False
    deep_iteration: bool = False
    verify_only: bool = False
    index_sanity_only: bool = False
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    max_bytes: int = INT32_MAX
    skip_record_metadata: bool = False
    offsets_decoder: bool = False
    transaction_log_decoder: bool = False
    json: bool = False


@dataclass(slots=True)
class _Problems:
    """What Kafka reports after all files (keyed by absolute path, in the order found)."""

    index_mismatches: dict[str, dict[int, int]] = field(default_factory=dict)
    time_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    offsets_not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    non_consecutive: dict[str, dict[int, int]] = field(default_factory=dict)


class _Output:
    def __init__(self, out: TextIO, err: TextIO, as_json: bool) -> None:
        self.out = out
        self.err = err
        self.as_json = as_json
        self.failed = False

    def emit(self, event: dict[str, Any], text: str) -> None:
        if self.as_json:
            self.out.write(json.dumps(event, separators=(",", ":"), ensure_ascii=False) + "\n")
        else:
            self.out.write(text + "\n")

    def report(self, event: dict[str, Any], text: str) -> None:
        """A diagnostic Kafka writes to stderr: there in text mode, in the JSON stream otherwise."""
        if self.as_json:
            self.emit(event, text)
        else:
            self.err.write(text + "\n")

    def error(self, display: str, message: str) -> None:
        self.failed = True
        self.out.flush()
        self.err.write(f"minikafka dump-log: {display}: {message}\n")
        if self.as_json:
            self.emit({"type": "error", "file": display, "message": message}, "")


# --- reading files ------------------------------------------------------------------------------


class _Mapped:
    """A file's bytes, memory-mapped so a 1 GiB segment is not copied; empty files map to b""."""

    def __init__(self, path: Path) -> None:
        self._map: mmap.mmap | None = None
        try:
            with open(path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                self._map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) if size else None
        except FileNotFoundError as exc:
            raise DumpError(f"no such file {path}") from exc
        except IsADirectoryError as exc:
            raise DumpError(f"{path} is a directory") from exc
        except (OSError, ValueError) as exc:
            raise DumpError(f"cannot read {path}: {exc}") from exc
        self.data: bytes | mmap.mmap = self._map if self._map is not None else b""

    def close(self) -> None:
        if self._map is not None:
            # A traceback may still hold a view of the map: the collector unmaps it later then.
            with contextlib.suppress(BufferError):
                self._map.close()

    def __enter__(self) -> bytes | mmap.mmap:
        return self.data

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _read_small(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise DumpError(f"no such file {path}") from exc
    except IsADirectoryError as exc:
        raise DumpError(f"{path} is a directory") from exc
    except OSError as exc:
        raise DumpError(f"cannot read {path}: {exc}") from exc


def _base_offset(path: Path) -> int:
    """Kafka's `Long.parseLong(name.split("\\.")[0])`."""
    stem = path.name.split(".")[0]
    if _LONG.match(stem) is None or not -(2**63) <= int(stem) < 2**63:
        raise DumpError(f'For input string: "{stem}" (not a segment base offset)')
    return int(stem)


def _absolute(display: str) -> str:
    """Java's File.getAbsolutePath: the current directory prepended, nothing normalised."""
    return display if os.path.isabs(display) else os.path.join(os.getcwd(), display)


@dataclass(slots=True)
class _Batch(BatchHeader):
    """A batch header and where in the file it starts."""

    position: int = 0

    @property
    def timestamp_type(self) -> str:
        return "LogAppendTime" if self.attributes & TIMESTAMP_TYPE_MASK else "CreateTime"


_HEADER_FIELDS = tuple(field.name for field in dataclasses.fields(BatchHeader))


def _increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: sequences wrap from Int32 max to 0."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def _batches(data: bytes | mmap.mmap, start: int, end: int, display: str) -> Iterator[_Batch]:
    """The batches in data[start:end], as Kafka's FileLogInputStream finds them: iteration stops
    quietly at a batch that does not fit (the caller counts the trailing bytes); a size below any
    record's is corrupt. Only v2 batches are parsed."""
    if start < 0:
        raise DumpError(f"position {start} is negative")
    position = start
    while position < end - _HEADER_SIZE_UP_TO_MAGIC:
        (size,) = struct.unpack_from(">i", data, position + 8)
        if size < _RECORD_OVERHEAD_V0:
            raise DumpError(f"Found record size {size} smaller than minimum record overhead "
                            f"({_RECORD_OVERHEAD_V0}) in file {display}.")
        if position > end - _LOG_OVERHEAD - size:
            return
        magic = data[position + 16]
        if magic != 2:
            raise DumpError(f"the batch at position {position} has magic {magic}: minikafka reads only "
                            "v2 record batches")
        if _LOG_OVERHEAD + size < _V2_HEADER_SIZE:
            raise DumpError(f"the batch at position {position} is {_LOG_OVERHEAD + size} bytes, less than "
                            f"a v2 batch header ({_V2_HEADER_SIZE})")
        header = BatchHeader(*_V2_HEADER.unpack_from(data, position))
        yield _Batch(**{name: getattr(header, name) for name in _HEADER_FIELDS}, position=position)
        position += _LOG_OVERHEAD + size


def _decoded_records(data: bytes | mmap.mmap, batch: _Batch) -> list[Any]:
    try:
        # an mmap offers all decode_batch uses of a buffer (indexing, slicing, memoryview)
        return decode_batch(data, batch.position).records  # type: ignore[arg-type]
    except (CorruptRecord, UnsupportedCompression) as exc:
        raise DumpError(f"cannot read the records of the batch at position {batch.position}: {exc}") from exc


# --- .log ---------------------------------------------------------------------------------------


def _optional_long(value: int | None) -> str:
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _batch_event(batch: _Batch, display: str, data: bytes | mmap.mmap) -> dict[str, Any]:
    codec = _COMPRESSION.get(batch.attributes & 0x07)
    if codec is None:
        raise DumpError(f"Unknown compression type id: {batch.attributes & 0x07} (batch at position "
                        f"{batch.position})")
    crc_view = memoryview(data)[batch.position + _CRC_START : batch.position + batch.size]
    try:
        valid = crc32c(crc_view) == batch.crc
    finally:
        crc_view.release()
    return {
        "type": "batch", "file": display,
        "baseOffset": batch.base_offset, "lastOffset": batch.last_offset, "count": batch.records_count,
        "baseSequence": batch.base_sequence,
        "lastSequence": -1 if batch.base_sequence == -1 else _increment_sequence(batch.base_sequence,
                                                                                 batch.last_offset_delta),
        "producerId": batch.producer_id, "producerEpoch": batch.producer_epoch,
        "partitionLeaderEpoch": batch.partition_leader_epoch,
        "isTransactional": bool(batch.attributes & TRANSACTIONAL_FLAG), "isControl": batch.is_control,
        "deleteHorizonMs": batch.base_timestamp if batch.attributes & _DELETE_HORIZON_FLAG else None,
        "position": None,  # the caller's running byte count, as Kafka's
        "timestampType": batch.timestamp_type, "maxTimestamp": batch.max_timestamp,
        "size": batch.size, "magic": batch.magic, "compresscodec": codec, "crc": batch.crc, "isvalid": valid,
    }


def _batch_text(e: dict[str, Any]) -> str:
    return (f"baseOffset: {e['baseOffset']} lastOffset: {e['lastOffset']} count: {e['count']} "
            f"baseSequence: {e['baseSequence']} lastSequence: {e['lastSequence']} producerId: {e['producerId']} "
            f"producerEpoch: {e['producerEpoch']} partitionLeaderEpoch: {e['partitionLeaderEpoch']} "
            f"isTransactional: {_bool(e['isTransactional'])} isControl: {_bool(e['isControl'])} "
            f"deleteHorizonMs: {_optional_long(e['deleteHorizonMs'])} position: {e['position']} "
            f"{e['timestampType']}: {e['maxTimestamp']} size: {e['size']} magic: {e['magic']} "
            f"compresscodec: {e['compresscodec']} crc: {e['crc']} isvalid: {_bool(e['isvalid'])}")


def _control_fields(record: Any) -> dict[str, Any]:
    """Kafka's ControlRecordType.parseTypeId + EndTransactionMarker.deserialize."""
    key = record.key or b""
    if len(key) < 4:
        raise DumpError(f"Invalid value size found for end control record key at offset {record.offset}. "
                        f"Must have at least 4 bytes, but found only {len(key)}")
    version, type_id = struct.unpack_from(">hh", key)
    if version < 0:
        raise DumpError(f"Invalid version found for control record: {version}. May indicate data corruption")
    name = _CONTROL_TYPES.get(type_id, "UNKNOWN")
    if type_id not in (0, 1):
        return {"controlType": name, "controlTypeId": type_id}
    value = record.value or b""
    if len(value) < 6:
        raise DumpError(f"Invalid value size found for end transaction marker at offset {record.offset}. "
                        f"Must have at least 6 bytes, but found only {len(value)}")
    marker_version, coordinator_epoch = struct.unpack_from(">hi", value)
    if marker_version < 0:
        raise DumpError(f"Invalid version found for end transaction marker: {marker_version}. "
                        "May indicate data corruption")
    return {"endTxnMarker": name, "coordinatorEpoch": coordinator_epoch}


def _printed_text(value: Printed) -> str:
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return str(value)


def _printed_json(value: Printed) -> Any:
    return None if isinstance(value, Tombstone) else value


def _record_line(event: dict[str, Any], contents: tuple[Printed, Printed] | None, skip_metadata: bool) -> str:
    text = ""
    prefix = "| "
    if not skip_metadata:
        text = (f"| offset: {event['offset']} {event['timestampType']}: {event['timestamp']} "
                f"keySize: {event['keySize']} valueSize: {event['valueSize']} sequence: {event['sequence']} "
                f"headerKeys: [{','.join(event['headerKeys'])}]")
        if "endTxnMarker" in event:
            text += f" endTxnMarker: {event['endTxnMarker']} coordinatorEpoch: {event['coordinatorEpoch']}"
        elif "controlType" in event:
            text += f" controlType: {event['controlType']}({event['controlTypeId']})"
        prefix = " "
    if contents is not None:
        key, payload = contents
        if key is not None:
            text += f"{prefix}key: {_printed_text(key)}"
            prefix = " "
        if payload is not None:
            text += f"{prefix}payload: {_printed_text(payload)}"
    return text


def _dump_records(data: bytes | mmap.mmap, batch: _Batch, display: str, opts: Options, parser: MessageParser,
                  out: _Output, problems: _Problems, last_offset: int) -> int:
    print_contents = opts.print_data_log and not batch.is_control
    for record in _decoded_records(data, batch):
        if record.offset != last_offset + 1:
            problems.non_consecutive.setdefault(_absolute(display), {})[last_offset] = record.offset
        last_offset = record.offset
        event: dict[str, Any] = {
            "type": "record", "file": display, "offset": record.offset, "timestampType": batch.timestamp_type,
            "timestamp": record.timestamp, "keySize": -1 if record.key is None else len(record.key),
            "valueSize": -1 if record.value is None else len(record.value),
            "sequence": -1 if batch.base_sequence == -1 else _increment_sequence(
                batch.base_sequence, record.offset - batch.base_offset),
            "headerKeys": [name for name, _value in record.headers],
        }
        if batch.is_control and (opts.json or not opts.skip_record_metadata):
            event.update(_control_fields(record))
        contents = None
        if print_contents:
            try:
                contents = parser.parse(record)
            except MissingKey as exc:
                raise DumpError(str(exc)) from exc
            event["key"], event["payload"] = _printed_json(contents[0]), _printed_json(contents[1])
        out.emit(event, "" if out.as_json else _record_line(event, contents, opts.skip_record_metadata))
    return last_offset


def dump_log(path: Path, display: str, opts: Options, parser: MessageParser, out: _Output,
             problems: _Problems) -> None:
    if path.name.endswith(".log"):
        start = _base_offset(path)
        out.emit({"type": "logStartOffset", "file": display, "offset": start}, f"Log starting offset: {start}")
    elif path.name == _BOOTSTRAP_CHECKPOINT:
        out.emit({"type": "snapshotId", "file": display, "bootstrap": True}, "KRaft bootstrap snapshot")
    else:
        match = _CHECKPOINT_NAME.match(path.name)
        if match is None:
            raise DumpError("not a KRaft snapshot name (<20-digit offset>-<10-digit epoch>.checkpoint)")
        offset, epoch = int(match.group(1)), int(match.group(2))
        out.emit({"type": "snapshotId", "file": display, "endOffset": offset, "epoch": epoch},
                 f"Snapshot end offset: {offset}, epoch: {epoch}")
    with _Mapped(path) as data:
        end = min(len(data), opts.max_bytes)
        valid_bytes = 0
        last_offset = -1
        deep = opts.deep_iteration or opts.print_data_log
        for batch in _batches(data, 0, end, display):
            event = _batch_event(batch, display, data)
            event["position"] = valid_bytes
            out.emit(event, "" if out.as_json else _batch_text(event))
            if not event["isvalid"]:
                out.failed = True
            if deep:
                last_offset = _dump_records(data, batch, display, opts, parser, out, problems, last_offset)
            valid_bytes += batch.size
        trailing = end - valid_bytes
        if trailing > 0 and opts.max_bytes == INT32_MAX:
            out.failed = True
            out.emit({"type": "invalidBytes", "file": display, "bytes": trailing},
                     f"Found {trailing} invalid bytes at the end of {path.name}")


# --- .index and .timeindex ----------------------------------------------------------------------


def _sibling(path: Path, suffix: str) -> Path:
    return path.parent / (path.name.split(".")[0] + suffix)


def _first_batch_last_offset(log: bytes | mmap.mmap, position: int, limit: int, display: str) -> int | None:
    if position > len(log):
        return None
    for batch in _batches(log, position, min(len(log), position + limit), display):
        return batch.last_offset
    return None


def dump_index(path: Path, display: str, opts: Options, out: _Output, problems: _Problems) -> None:
    base = _base_offset(path)
    log_path = _sibling(path, ".log")
    data = _read_small(path)
    entries = parse_offset_index(data)
    with _Mapped(log_path) as log:
        if not entries:
            out.emit({"type": "status", "file": display, "message": f"{display} is empty."}, f"{display} is empty.")
            if len(data) % OFFSET_ENTRY_SIZE:
                out.error(display, _index_size_message(path, len(data)))
            return
        if opts.index_sanity_only:
            last = base + entries[-1][0]
            if last < base:
                out.error(display, f"Corrupt index found, index file {path.absolute()} has non-zero size but the "
                                   f"last offset is {last} which is less than the base offset {base}")
            elif len(data) % OFFSET_ENTRY_SIZE:
                out.error(display, _index_size_message(path, len(data)))
            else:
                out.emit({"type": "status", "file": display, "message": f"{display} passed sanity check."},
                         f"{display} passed sanity check.")
            return
        for index, (relative, position) in enumerate(entries):
            offset = base + relative
            if offset == base and index > 0:  # zeroes of a preallocated file that was never trimmed
                break
            found = _first_batch_last_offset(log, position, opts.max_message_size, display)
            if found is None:
                out.error(display, f"the entry offset: {offset} position: {position} points to no whole batch "
                                   f"in {log_path.name} ({len(log)} bytes)")
            elif found != offset:
                problems.index_mismatches.setdefault(_absolute(display), {})[offset] = found
            if not opts.verify_only:
                out.emit({"type": "indexEntry", "file": display, "offset": offset, "position": position},
                         f"offset: {offset} position: {position}")
    if len(data) % OFFSET_ENTRY_SIZE:
        out.error(display, _index_size_message(path, len(data)))


def _index_size_message(path: Path, size: int) -> str:
    return (f"Index file {path.absolute()} is corrupt, found {size} bytes which is neither positive nor a "
            f"multiple of {OFFSET_ENTRY_SIZE}")


def _time_index_sanity(path: Path, base: int, entries: list[tuple[int, int]], size: int) -> str | None:
    if entries and entries[-1][0] < entries[0][0]:
        return (f"Corrupt time index found, time index file ({path.absolute()}) has non-zero size but the last "
                f"timestamp is {entries[-1][0]} which is less than the first timestamp {entries[0][0]}")
    if entries and base + entries[-1][1] < base:
        return (f"Corrupt time index found, time index file ({path.absolute()}) has non-zero size but the last "
                f"offset is {base + entries[-1][1]} which is less than the first offset {base}")
    if size % TIME_ENTRY_SIZE:
        return (f"Time index file {path.absolute()} is corrupt, found {size} bytes which is neither positive "
                f"nor a multiple of {TIME_ENTRY_SIZE}")
    return None


def _offset_lookup(index_entries: list[tuple[int, int]], base: int, target: int) -> int:
    """Kafka's OffsetIndex.lookup: the position of the last entry at or below `target`, else 0."""
    low, high, found = 0, len(index_entries) - 1, -1
    while low <= high:  # entries are sorted in a sane index; a binary search, as Kafka's
        middle = (low + high) // 2
        if base + index_entries[middle][0] <= target:
            found, low = middle, middle + 1
        else:
            high = middle - 1
    return index_entries[found][1] if found >= 0 else 0


def dump_time_index(path: Path, display: str, opts: Options, out: _Output, problems: _Problems) -> None:
    base = _base_offset(path)
    log_path = _sibling(path, ".log")
    data = _read_small(path)
    entries = parse_time_index(data)
    index_path = _sibling(path, ".index")
    index_entries = parse_offset_index(_read_small(index_path)) if index_path.exists() else []
    with _Mapped(log_path) as log:
        if opts.index_sanity_only:
            problem = _time_index_sanity(path, base, entries, len(data))
            if problem is not None:
                out.error(display, problem)
            else:
                out.emit({"type": "status", "file": display, "message": f"{display} passed sanity check."},
                         f"{display} passed sanity check.")
            return
        absolute = _absolute(display)
        previous = NO_TIMESTAMP
        for index, (timestamp, relative) in enumerate(entries):
            offset = base + relative
            if offset == base and index > 0:
                break
            position = _offset_lookup(index_entries, base, offset)
            match = next((b for b in _batches(log, min(position, len(log)), len(log), display)
                          if b.last_offset >= offset), None)
            if match is None:
                problems.offsets_not_found.setdefault(absolute, []).append((offset, -1))
            elif match.last_offset != offset:
                problems.offsets_not_found.setdefault(absolute, []).append((offset, match.last_offset))
            else:
                max_timestamp = max((r.timestamp for r in _decoded_records(log, match)), default=NO_TIMESTAMP)
                if max_timestamp != timestamp:
                    problems.time_mismatches.setdefault(absolute, []).append((timestamp, max_timestamp))
                if previous >= timestamp:
                    problems.out_of_order.setdefault(absolute, []).append((timestamp, previous))
            if not opts.verify_only:
                out.emit({"type": "timeIndexEntry", "file": display, "timestamp": timestamp, "offset": offset},
                         f"timestamp: {timestamp} offset: {offset}")
            previous = timestamp
    if len(data) % TIME_ENTRY_SIZE:
        out.error(display, _time_index_sanity(path, base, [], len(data)) or "")


# --- .snapshot and .txnindex --------------------------------------------------------------------


def dump_producer_snapshot(path: Path, display: str, out: _Output) -> None:
    try:
        entries = parse_snapshot(_read_small(path))
    except CorruptSnapshot as exc:
        out.error(display, str(exc))
        return
    for entry in entries:
        txn_first = entry.current_txn_first_offset if entry.current_txn_first_offset >= 0 else None
        event: dict[str, Any] = {
            "type": "producerSnapshotEntry", "file": display, "producerId": entry.producer_id,
            "producerEpoch": entry.producer_epoch, "coordinatorEpoch": entry.coordinator_epoch,
            "currentTxnFirstOffset": txn_first, "lastTimestamp": entry.timestamp,
        }
        text = (f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
                f"coordinatorEpoch: {entry.coordinator_epoch} currentTxnFirstOffset: {_optional_long(txn_first)} "
                f"lastTimestamp: {entry.timestamp}")
        if entry.last_offset >= 0:  # Kafka keeps batch metadata only for a producer that wrote data
            event.update(firstSequence=entry.first_sequence, lastSequence=entry.last_sequence,
                         lastOffset=entry.last_offset, offsetDelta=entry.offset_delta, timestamp=entry.timestamp)
            text += (f" firstSequence: {entry.first_sequence} lastSequence: {entry.last_sequence} "
                     f"lastOffset: {entry.last_offset} offsetDelta: {entry.offset_delta} timestamp: {entry.timestamp}")
        out.emit(event, text)


def dump_txn_index(path: Path, display: str, out: _Output) -> None:
    data = _read_small(path)
    for version, txn in parse_txn_index(data):
        if version > 0:
            out.error(display, f"Unexpected aborted transaction version {version} in transaction index "
                               f"{path.absolute()}, current version is 0")
            return
        out.emit({"type": "abortedTxn", "file": display, "version": version, "producerId": txn.producer_id,
                  "firstOffset": txn.first_offset, "lastOffset": txn.last_offset,
                  "lastStableOffset": txn.last_stable_offset},
                 f"version: {version} producerId: {txn.producer_id} firstOffset: {txn.first_offset} "
                 f"lastOffset: {txn.last_offset} lastStableOffset: {txn.last_stable_offset}")
    if len(data) % ABORTED_TXN_SIZE:
        out.error(display, f"{len(data) % ABORTED_TXN_SIZE} bytes after the last whole entry "
                           f"(entries are {ABORTED_TXN_SIZE} bytes)")


# --- after all files ----------------------------------------------------------------------------


def _report_problems(problems: _Problems, out: _Output) -> None:
    if problems.index_mismatches or problems.time_mismatches or problems.out_of_order or problems.offsets_not_found:
        out.failed = True
    for name, mismatches in problems.index_mismatches.items():
        out.report({"type": "status", "file": name, "message": f"Mismatches in :{name}"}, f"Mismatches in :{name}")
        for index_offset in sorted(mismatches, reverse=True):
            out.report({"type": "indexMismatch", "file": name, "indexOffset": index_offset,
                        "logOffset": mismatches[index_offset]},
                       f"  Index offset: {index_offset}, log offset: {mismatches[index_offset]}")
    for name, pairs in problems.time_mismatches.items():
        out.report({"type": "status", "file": name, "message": f"Found timestamp mismatch in :{name}"},
                   f"Found timestamp mismatch in :{name}")
        for indexed, logged in pairs:
            out.report({"type": "timeIndexMismatch", "file": name, "indexTimestamp": indexed, "logTimestamp": logged},
                       f"  Index timestamp: {indexed}, log timestamp: {logged}")
    for name, pairs in problems.out_of_order.items():
        out.report({"type": "status", "file": name, "message": f"Found out of order timestamp in :{name}"},
                   f"Found out of order timestamp in :{name}")
        for indexed, previous in pairs:
            out.report({"type": "timeIndexOutOfOrder", "file": name, "indexTimestamp": indexed,
                        "previousTimestamp": previous},
                       f"  Index timestamp: {indexed}, Previously indexed timestamp: {previous}")
    for name, pairs in problems.offsets_not_found.items():
        out.report({"type": "status", "file": name, "message": "The following indexed offsets are not found in "
                                                                "the log."},
                   "The following indexed offsets are not found in the log.")
        for indexed, logged in pairs:
            out.report({"type": "timeIndexOffsetNotFound", "file": name, "indexOffset": indexed, "logOffset": logged},
                       f"Indexed offset: {indexed}, found log offset: {logged}")
    for name, follows in problems.non_consecutive.items():
        out.report({"type": "status", "file": name, "message": f"Non-consecutive offsets in {name}"},
                   f"Non-consecutive offsets in {name}")
        for offset in sorted(follows):
            out.report({"type": "nonConsecutiveOffsets", "file": name, "offset": offset,
                        "followedBy": follows[offset]},
                       f"  {offset} is followed by {follows[offset]}")


# --- command line -------------------------------------------------------------------------------


def build_parser(prog: str = "minikafka dump-log") -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(
        prog=prog, description="This tool helps to parse a log file and dump its contents to the console, useful "
                               "for debugging a seemingly corrupt log segment. (Kafka's kafka-dump-log.sh)")
    parser.add_argument("--files", required=True, metavar="file1, file2, ...",
                        help="REQUIRED: The comma separated list of data and index log files to be dumped.")
    parser.add_argument("--print-data-log", action="store_true",
                        help="If set, printing the messages content when dumping data logs. Automatically set if "
                             "any decoder option is specified.")
    parser.add_argument("--verify-index-only", action="store_true",
                        help="If set, just verify the index log without printing its content.")
    parser.add_argument("--index-sanity-check", action="store_true",
                        help="If set, just checks the index sanity without printing its content. This is the same "
                             "check that is executed on broker startup to determine if an index needs rebuilding "
                             "or not.")
    parser.add_argument("--max-message-size", type=int, default=DEFAULT_MAX_MESSAGE_SIZE, metavar="size",
                        help="Size of largest message. (default: 5242880)")
    parser.add_argument("--max-bytes", type=int, default=INT32_MAX, metavar="size",
                        help="Limit the amount of total batches read in bytes avoiding reading the whole .log "
                             "file(s). (default: 2147483647)")
    parser.add_argument("--deep-iteration", action="store_true",
                        help="If set, uses deep instead of shallow iteration. Automatically set if print-data-log "
                             "is enabled.")
    parser.add_argument("--value-decoder-class", nargs="?", const=_STRING_DECODER, metavar="CLASS",
                        help=f"Only {_STRING_DECODER} (UTF-8) is available.")
    parser.add_argument("--key-decoder-class", nargs="?", const=_STRING_DECODER, metavar="CLASS",
                        help=f"Only {_STRING_DECODER} (UTF-8) is available.")
    parser.add_argument("--offsets-decoder", action="store_true",
                        help="If set, log data will be parsed as offset data from the __consumer_offsets topic.")
    parser.add_argument("--transaction-log-decoder", action="store_true",
                        help="If set, log data will be parsed as transaction metadata from the __transaction_state "
                             "topic.")
    for name in _UNSUPPORTED_DECODERS:
        parser.add_argument("--" + name.replace("_", "-"), action="store_true", help="Not supported by minikafka.")
    parser.add_argument("--skip-record-metadata", action="store_true",
                        help="Skip metadata when printing records. This flag also skips control records.")
    parser.add_argument("--json", action="store_true",
                        help="minikafka: one JSON object per batch, record or entry instead of Kafka's text")
    return parser


def options_from(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Options:
    for name, what in _UNSUPPORTED_DECODERS.items():
        if getattr(args, name):
            parser.error(f"{what} is not supported")
    for decoder in (args.key_decoder_class, args.value_decoder_class):
        if decoder is not None and decoder not in STRING_DECODERS:
            parser.error(f"Failed to load decoder class {decoder}: only {_STRING_DECODER} is available")
    files = args.files.split(",")
    while files and not files[-1]:  # Java's String.split drops trailing empty strings
        files.pop()
    printing = (args.print_data_log or args.offsets_decoder or args.transaction_log_decoder
                or args.key_decoder_class is not None or args.value_decoder_class is not None)
    return Options(
        files=files, print_data_log=printing, deep_iteration=args.deep_iteration or printing,
        verify_only=args.verify_index_only, index_sanity_only=args.index_sanity_check,
        max_message_size=args.max_message_size, max_bytes=args.max_bytes,
        skip_record_metadata=args.skip_record_metadata, offsets_decoder=args.offsets_decoder,
        transaction_log_decoder=args.transaction_log_decoder, json=args.json,
    )


def dump(opts: Options, out: TextIO, err: TextIO) -> int:
    """Dump every file of `opts`; returns the exit status (0, or 1 if anything was wrong)."""
    output = _Output(out, err, opts.json)
    problems = _Problems()
    parser = parser_for(opts.offsets_decoder, opts.transaction_log_decoder)
    for display in opts.files:
        path = Path(display)
        output.emit({"type": "dumping", "file": display}, f"Dumping {display}")
        suffix = path.suffix
        try:
            if suffix in (".log", ".checkpoint"):
                dump_log(path, display, opts, parser, output, problems)
            elif suffix == ".index":
                dump_index(path, display, opts, output, problems)
            elif suffix == ".timeindex":
                dump_time_index(path, display, opts, output, problems)
            elif suffix == ".snapshot":
                dump_producer_snapshot(path, display, output)
            elif suffix == ".txnindex":
                dump_txn_index(path, display, output)
            else:
                output.report({"type": "ignored", "file": display}, f"Ignoring unknown file {display}")
        except DumpError as exc:
            output.error(display, str(exc))
    _report_problems(problems, output)
    out.flush()
    return 1 if output.failed else 0


def main(argv: list[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    parser = build_parser()
    opts = options_from(parser.parse_args(argv), parser)
    stdout = out if out is not None else sys.stdout
    try:
        return dump(opts, stdout, err if err is not None else sys.stderr)
    except BrokenPipeError:
        # `dump-log ... | head`: stop quietly, and keep the interpreter's final flush from failing again.
        if out is None:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
