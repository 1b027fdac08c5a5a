"""Record batches v2 as bytes: parse the 61-byte header, check CRC32C, patch offsets.

The broker's hot paths (produce, fetch) never look inside a batch: they validate the header and
CRC and move the bytes. Per-record decoding (`decode_records`) exists for features that need it
(offset-by-timestamp lookups, internal topics, tools, tests).

Layout (Kafka's DefaultRecordBatch):
    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 | crc uint32 |
    attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 | maxTimestamp int64 |
    producerId int64 | producerEpoch int16 | baseSequence int32 | recordsCount int32 | records...
The CRC32C covers everything from attributes to the end of the batch.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, NamedTuple, cast

from minikafka.protocol.errors import CorruptRecord, DecompressedTooLarge, UnsupportedCompression
from minikafka.protocol.primitives import read_varlong, write_varlong

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted in batchLength
MAGIC_V2 = 2
NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
# The header in two parts: up to the CRC, and from the attributes on (what the CRC covers, records follow).
_HEADER_LEAD = struct.Struct(">qiibI")
_HEADER_TAIL = struct.Struct(">hiqqqhii")
_LEAD_COUNTED = 4 + 1 + 4  # leader epoch, magic and CRC: the lead's part of batchLength
_OFFSET = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_CRC_OFFSET = 17
_MAX_TIMESTAMP_OFFSET = 35
_LEADER_EPOCH_OFFSET = 12
_BASE_SEQUENCE_OFFSET = 53
# Where scans that skip most headers read the few fields they need (storage/segment.py).
BATCH_LENGTH_OFFSET = 8
MAGIC_OFFSET = 16
ATTRIBUTES_OFFSET = 21  # also where the CRC's span starts
LAST_OFFSET_DELTA_OFFSET = 23
INT32 = _INT32
INT64 = _INT64

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
# Kafka 3.1+ (KIP-534): the batch's base timestamp is the delete horizon of its tombstones and markers.
DELETE_HORIZON_FLAG = 0x40


def _native_crc32c() -> Callable[[bytes | bytearray | memoryview], int]:
    """The crc32c package's C function, loaded without running the package's `__init__`.

    That `__init__` reads the package's version through importlib.metadata and imports its command line
    (argparse): 20-25 ms of a broker's start for one C function. The extension module alone loads in well
    under 1 ms; where it cannot be found that way (another layout of the package), the package is imported."""
    import importlib.machinery
    import importlib.util

    package = importlib.util.find_spec("crc32c")  # finding a top-level package does not run it
    if package is not None and package.submodule_search_locations:
        finder = importlib.machinery.FileFinder(
            package.submodule_search_locations[0],
            (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES))
        spec = finder.find_spec("crc32c._crc32c")
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return cast(Callable[[bytes | bytearray | memoryview], int], module.crc32c)
    from crc32c import crc32c as packaged

    return packaged


def crc32c(data: bytes | bytearray | memoryview) -> int:  # noqa: F811 - rebinds itself to the native function
    """CRC32C; the native function is loaded on first use, which keeps it off the start-up path. Modules that
    imported this name before the first call keep calling this wrapper, which then only forwards."""
    global crc32c
    if not _CRC32C_NATIVE:
        _CRC32C_NATIVE.append(_native_crc32c())
    crc32c = _CRC32C_NATIVE[0]
    return crc32c(data)


_CRC32C_NATIVE: list[Any] = []  # the C function, once loaded


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class ControlType(IntEnum):
    ABORT = 0
    COMMIT = 1


# Not frozen: a frozen dataclass's __init__ sets each of the 13 fields through object.__setattr__, which made
# building one 2 us against 0.3, and the produce path builds several per batch. Nothing assigns to one.
@dataclass(slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, including the 12-byte log overhead."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    def placed(self, base_offset: int, partition_leader_epoch: int) -> BatchHeader:
        """This header as written at `base_offset` by a leader of `partition_leader_epoch` (the two fields
        an append sets, both outside the CRC)."""
        return BatchHeader(base_offset, self.batch_length, partition_leader_epoch, self.magic, self.crc,
                           self.attributes, self.last_offset_delta, self.base_timestamp, self.max_timestamp,
                           self.producer_id, self.producer_epoch, self.base_sequence, self.records_count)

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """When the log cleaner may drop this batch's tombstones and markers (Kafka's deleteHorizonMs)."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_FLAG else None

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF

    @classmethod
    def parse(cls, buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
        """Parse the header at `pos`; raise CorruptRecord if it cannot be a whole v2 batch."""
        header = cls.parse_header_only(buf, pos)
        available = len(buf) - pos
        if header.size > available:
            raise CorruptRecord(f"batch of {header.size} bytes but only {available} left")
        return header

    @classmethod
    def parse_header_only(cls, buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
        """Parse and sanity-check the 61 header bytes at `pos`, whatever follows them."""
        available = len(buf) - pos
        if available < HEADER_SIZE:
            if available >= 17 and buf[pos + 16] != MAGIC_V2:
                raise CorruptRecord(f"record batch magic {buf[pos + 16]} is not supported (only v2)")
            raise CorruptRecord(f"{available} bytes left, less than a batch header")
        header = cls(*_HEADER.unpack_from(buf, pos))
        if header.magic != MAGIC_V2:
            raise CorruptRecord(f"record batch magic {header.magic} is not supported (only v2)")
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptRecord(f"batch length {header.batch_length} is shorter than a header")
        if header.last_offset_delta < 0 or header.records_count < 0:
            raise CorruptRecord("negative record count or offset delta")
        return header


def crc_of(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> int:
    view = memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + header.size]
    return crc32c(view)


def is_crc_valid(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    return crc_of(buf, pos, header) == header.crc


def iter_batches(buf: bytes | bytearray | memoryview, *, check_crc: bool = True) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each batch in `buf`; raise CorruptRecord on any defect."""
    pos = 0
    end = len(buf)
    while pos < end:
        header = BatchHeader.parse(buf, pos)
        if check_crc and not is_crc_valid(buf, pos, header):
            raise CorruptRecord(f"CRC mismatch in batch at byte {pos}")
        yield pos, header
        pos += header.size


def iter_whole_batches(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, BatchHeader]]:
    """Like iter_batches, but stop quietly at a partial trailing batch, as a fetch slice may end in one
    (Kafka's FileRecords slices do the same; consumers discard the partial batch)."""
    pos = 0
    end = len(buf)
    while end - pos >= HEADER_SIZE:
        header = BatchHeader.parse_header_only(buf, pos)
        if pos + header.size > end:
            return
        if not is_crc_valid(buf, pos, header):
            raise CorruptRecord(f"CRC mismatch in batch at byte {pos}")
        yield pos, header
        pos += header.size


def valid_prefix_length(buf: bytes | bytearray | memoryview) -> int:
    """Length of the longest prefix of `buf` made of whole, CRC-valid batches (crash recovery)."""
    pos = 0
    end = len(buf)
    while pos < end:
        try:
            header = BatchHeader.parse(buf, pos)
        except CorruptRecord:
            break
        if not is_crc_valid(buf, pos, header):
            break
        pos += header.size
    return pos


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    _OFFSET.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    _INT32.pack_into(buf, pos + _LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, header: BatchHeader, timestamp_ms: int) -> None:
    """Switch the batch to LogAppendTime with `timestamp_ms`, recomputing the CRC as Kafka does."""
    struct.pack_into(">h", buf, pos + ATTRIBUTES_OFFSET, header.attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, pos + _MAX_TIMESTAMP_OFFSET, timestamp_ms)
    _restamp_crc(buf, pos, header)


def set_base_sequence(buf: bytearray | memoryview, pos: int, header: BatchHeader, base_sequence: int) -> None:
    """Give the batch `base_sequence`, recomputing the CRC (a client resending one batch as its next one)."""
    _INT32.pack_into(buf, pos + _BASE_SEQUENCE_OFFSET, base_sequence)
    _restamp_crc(buf, pos, header)


def _restamp_crc(buf: bytearray | memoryview, pos: int, header: BatchHeader) -> None:
    struct.pack_into(">I", buf, pos + _CRC_OFFSET, crc_of(buf, pos, header))


# --- per-record encoding (not used on the hot path) -------------------------------------------
# Every varint of a record goes through the 64-bit (varlong) forms: Kafka writes lengths and offset
# deltas as 32-bit varints, whose bytes are the same for every value in their range, and one function
# keeps the one-byte case inline.


@dataclass(frozen=True, slots=True)
class Record:
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp: int = NO_TIMESTAMP
    offset: int = -1
    attributes: int = 0


def _encode_record(out: bytearray, offset_delta: int, timestamp_delta: int, record: Record) -> None:
    _encode_record_fields(out, offset_delta, timestamp_delta, record.key, record.value, record.headers)


def _encode_record_fields(out: bytearray, offset_delta: int, timestamp_delta: int, key: bytes | None,
                          value: bytes | None, headers: Sequence[tuple[str, bytes | None]]) -> None:
    """One record, length-prefixed, from its fields: callers with no Record at hand skip building one (a
    frozen dataclass costs a microsecond)."""
    body = bytearray()
    body.append(0)  # record attributes, unused
    write_varlong(body, timestamp_delta)
    write_varlong(body, offset_delta)
    for blob in (key, value):
        if blob is None:
            write_varlong(body, -1)
        else:
            write_varlong(body, len(blob))
            body += blob
    write_varlong(body, len(headers))
    for name, header_value in headers:
        encoded = name.encode()
        write_varlong(body, len(encoded))
        body += encoded
        if header_value is None:
            write_varlong(body, -1)
        else:
            write_varlong(body, len(header_value))
            body += header_value
    write_varlong(out, len(body))
    out += body


def compress(codec: int, data: bytes) -> bytes:
    if codec == Compression.NONE:
        return data  # before the import: every coordinator record and marker batch comes through here
    import cramjam

    if codec == Compression.GZIP:
        return gzip.compress(data)
    if codec == Compression.SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == Compression.LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise UnsupportedCompression(f"compression codec {codec}")


_XERIAL_MAGIC = b"\x82SNAPPY\x00"


# A batch's records, decompressed, may take at most this many bytes. Compression ratios of real
# batches stay far below it; a crafted batch ("zip bomb") with a valid CRC is refused instead of
# taking the machine's memory when a feature (ListOffsets by timestamp, coordinator loads) reads it.
MAX_DECOMPRESSED_BATCH_BYTES = 64 * 1024 * 1024


def decompress(codec: int, data: bytes | memoryview, limit: int = MAX_DECOMPRESSED_BATCH_BYTES) -> bytes:
    """Decompress a batch's records, refusing output over `limit` bytes without producing it."""
    data = bytes(data)
    if codec == Compression.NONE:
        return data
    try:
        if codec == Compression.GZIP:
            return _gunzip(data, limit)
        if codec == Compression.SNAPPY:
            return _unsnappy(data, limit)
        if codec == Compression.LZ4:
            return _unlz4(data, limit)
        if codec == Compression.ZSTD:
            return _unzstd(data, limit)
    except CorruptRecord:
        raise
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # codec libraries raise their own errors; a Rust panic is a BaseException
        raise CorruptRecord(f"cannot decompress codec {codec}: {exc!r}") from exc
    raise UnsupportedCompression(f"compression codec {codec}")


def _too_large(codec: str, limit: int) -> CorruptRecord:
    return DecompressedTooLarge(f"{codec} records decompress to more than {limit} bytes")


def _gunzip(data: bytes, limit: int) -> bytes:
    out = bytearray()
    while data:  # Java writes one gzip member; others may concatenate several
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out += inflater.decompress(data, limit + 1 - len(out))
        if len(out) > limit:
            raise _too_large("gzip", limit)
        if not inflater.eof:
            raise CorruptRecord("truncated gzip records")
        data = inflater.unused_data
    return bytes(out)


def _unsnappy(data: bytes, limit: int) -> bytes:
    import cramjam

    if not data.startswith(_XERIAL_MAGIC):
        if cramjam.snappy.decompress_raw_len(data) > limit:  # the raw format states its length first
            raise _too_large("snappy", limit)
        return bytes(cramjam.snappy.decompress_raw(data))
    out = bytearray()  # Java clients frame snappy the xerial way: length-prefixed raw chunks
    position = 16
    while position < len(data):
        (length,) = _INT32.unpack_from(data, position)
        chunk = data[position + 4 : position + 4 + length]
        if length < 0 or len(chunk) != length:
            raise CorruptRecord("truncated snappy chunk")
        if len(out) + cramjam.snappy.decompress_raw_len(chunk) > limit:
            raise _too_large("snappy", limit)
        out += bytes(cramjam.snappy.decompress_raw(chunk))
        position += 4 + length
    return bytes(out)


# Streamed codecs are read this much at a time, so a small batch never reserves the whole limit.
_DECOMPRESS_CHUNK = 256 * 1024


def _unlz4(data: bytes, limit: int) -> bytes:
    import lz4.frame

    decompressor = lz4.frame.LZ4FrameDecompressor()
    out = bytearray(decompressor.decompress(data, max_length=_DECOMPRESS_CHUNK))
    while not decompressor.eof and len(out) <= limit:
        chunk = decompressor.decompress(b"", max_length=_DECOMPRESS_CHUNK)
        if not chunk:
            raise CorruptRecord("truncated lz4 records")
        out += chunk
    if len(out) > limit:
        raise _too_large("lz4", limit)
    return bytes(out)


def _unzstd(data: bytes, limit: int) -> bytes:
    import zstandard

    out = bytearray()
    with zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True) as reader:
        while len(out) <= limit:
            chunk = reader.read(_DECOMPRESS_CHUNK)
            if not chunk:
                return bytes(out)
            out += chunk
    raise _too_large("zstd", limit)


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    base_timestamp: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    compression: int = Compression.NONE,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = -1,
    log_append_time: bool = False,
) -> bytes:
    """Encode a v2 record batch; record offsets are their index unless Record.offset says otherwise."""
    if not records:
        raise ValueError("a record batch holds at least one record")
    timestamps = [r.timestamp for r in records]
    first_ts = base_timestamp if base_timestamp is not None else timestamps[0]
    max_ts = max(timestamps)
    body = bytearray()
    last_delta = 0
    for index, record in enumerate(records):
        delta = record.offset - base_offset if record.offset >= 0 else index
        last_delta = max(last_delta, delta)
        _encode_record(body, delta, record.timestamp - first_ts, record)
    payload = compress(compression, bytes(body))
    attributes = (compression & COMPRESSION_MASK) | (TIMESTAMP_TYPE_MASK if log_append_time else 0)
    if transactional:
        attributes |= TRANSACTIONAL_FLAG
    if control:
        attributes |= CONTROL_FLAG
    tail = _HEADER_TAIL.pack(attributes, last_delta, first_ts, max_ts, producer_id, producer_epoch, base_sequence,
                             len(records)) + payload
    return _batch(base_offset, partition_leader_epoch, tail)


def _batch(base_offset: int, partition_leader_epoch: int, tail: bytes) -> bytes:
    """A v2 batch from the header fields the CRC covers and the records after them (`tail`)."""
    return _HEADER_LEAD.pack(base_offset, _LEAD_COUNTED + len(tail), partition_leader_epoch, MAGIC_V2,
                             crc32c(tail)) + tail


def build_one_record_batch(key: bytes | None, value: bytes | None, timestamp: int) -> tuple[bytes, BatchHeader]:
    """`build_batch([Record(key, value, (), timestamp)])`, the same bytes, and their header: a transaction
    coordinator writes three such batches a transaction, so the generic loop and the append's parse of the
    header it was just given are skipped."""
    body = bytearray()
    _encode_record_fields(body, 0, 0, key, value, ())
    tail = _HEADER_TAIL.pack(0, 0, timestamp, timestamp, NO_PRODUCER_ID, -1, NO_SEQUENCE, 1) + body
    crc = crc32c(tail)
    batch_length = _LEAD_COUNTED + len(tail)
    header = BatchHeader(0, batch_length, -1, MAGIC_V2, crc, 0, 0, timestamp, timestamp, NO_PRODUCER_ID, -1,
                         NO_SEQUENCE, 1)
    return _HEADER_LEAD.pack(0, batch_length, -1, MAGIC_V2, crc) + tail, header


def rebuild_batch(original: BatchHeader, records: Sequence[Record], delete_horizon_ms: int | None) -> bytes:
    """The batch `original` holding only `records` (decoded from it), as Kafka's log cleaner rewrites one
    (MemoryRecords.buildRetainedRecordsInto): same base offset, last offset delta, producer fields, flags,
    leader epoch and compression, so offsets and the producer's last sequence survive compaction. With a
    delete horizon the base timestamp becomes it and the records' timestamp deltas are taken from it."""
    if not records:
        raise ValueError("a rewritten batch keeps at least one record")
    attributes = original.attributes & ~DELETE_HORIZON_FLAG
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_FLAG
        base_ts = delete_horizon_ms
    else:
        base_ts = records[0].timestamp
    max_ts = original.max_timestamp if original.log_append_time else max(r.timestamp for r in records)
    body = bytearray()
    for record in records:
        _encode_record(body, record.offset - original.base_offset, record.timestamp - base_ts, record)
    payload = compress(original.compression, bytes(body))
    tail = _HEADER_TAIL.pack(attributes, original.last_offset_delta, base_ts, max_ts, original.producer_id,
                             original.producer_epoch, original.base_sequence, len(records)) + payload
    return _batch(original.base_offset, original.partition_leader_epoch, tail)


def rebuild_batch_raw(original: BatchHeader, records: bytes, count: int, max_timestamp: int) -> bytes:
    """The batch `original` holding `count` of its own records, given as their encoded bytes (cut
    from its decompressed payload, so their offset and timestamp deltas still hold): no record is
    decoded or re-encoded. Base offset and timestamp, last offset delta, producer fields, flags and
    compression are kept, as in `rebuild_batch`."""
    if count <= 0:
        raise ValueError("a rewritten batch keeps at least one record")
    payload = compress(original.compression, records)
    tail = _HEADER_TAIL.pack(original.attributes, original.last_offset_delta, original.base_timestamp,
                             max_timestamp, original.producer_id, original.producer_epoch, original.base_sequence,
                             count) + payload
    return _batch(original.base_offset, original.partition_leader_epoch, tail)


class RawRecord(NamedTuple):
    """Where one record lies in a decompressed batch payload, with what the log cleaner looks at."""

    start: int
    end: int
    timestamp_delta: int
    offset_delta: int
    key: bytes | None
    has_value: bool


def scan_records(payload: bytes, count: int) -> list[RawRecord]:
    """The records of a decompressed payload, located but not decoded (the log cleaner's fast path:
    keys, offsets and whether a value is present; headers and values are skipped)."""
    out: list[RawRecord] = []
    pos = 0
    size = len(payload)
    for _ in range(count):
        length, body = read_varlong(payload, pos)
        end = body + length
        if length < 0 or end > size:
            raise CorruptRecord("record length runs past the end of the batch")
        timestamp_delta, cursor = read_varlong(payload, body + 1)  # after the attributes byte
        offset_delta, cursor = read_varlong(payload, cursor)
        key_length, cursor = read_varlong(payload, cursor)
        if key_length < -1 or cursor + key_length > end:
            raise CorruptRecord(f"record key of {key_length} bytes does not fit in the record")
        key = None if key_length < 0 else payload[cursor : cursor + key_length]
        cursor += max(key_length, 0)
        value_length, _cursor = read_varlong(payload, cursor)
        out.append(RawRecord(pos, end, timestamp_delta, offset_delta, key, value_length >= 0))
        pos = end
    return out


def empty_batch(original: BatchHeader) -> bytes:
    """The header of `original` with no records, as Kafka's cleaner keeps a batch whose records all went
    but whose offsets or producer sequence must stay (DefaultRecordBatch.writeEmptyHeader)."""
    attributes = original.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG | CONTROL_FLAG)
    tail = _HEADER_TAIL.pack(attributes, original.last_offset_delta, original.max_timestamp,
                             original.max_timestamp, original.producer_id, original.producer_epoch,
                             original.base_sequence, 0)
    return _batch(original.base_offset, original.partition_leader_epoch, tail)


def build_control_batch(
    *,
    producer_id: int,
    producer_epoch: int,
    control_type: ControlType,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
) -> bytes:
    """A transaction marker: key = version 0 + type, value = version 0 + coordinator epoch."""
    key = struct.pack(">hh", 0, int(control_type))
    value = struct.pack(">hi", 0, coordinator_epoch)
    return build_batch(
        [Record(key=key, value=value, timestamp=timestamp)],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
    )


@dataclass(slots=True)
class DecodedBatch:
    header: BatchHeader
    records: list[Record] = field(default_factory=list)


def _read_blob(view: memoryview, cursor: int, end: int) -> tuple[bytes | None, int]:
    """A varint-length-prefixed key, value or header inside a record ending at `end`; -1 is null."""
    size, cursor = read_varlong(view, cursor)
    if size < -1 or cursor + size > end:
        raise CorruptRecord(f"record field of {size} bytes does not fit in the record")
    if size < 0:
        return None, cursor
    return bytes(view[cursor : cursor + size]), cursor + size


def decode_batch(buf: bytes | bytearray | memoryview, pos: int = 0) -> DecodedBatch:
    """Decode every record of the batch at `pos` (decompressing if needed)."""
    header = BatchHeader.parse(buf, pos)
    payload = decompress(header.compression, memoryview(buf)[pos + HEADER_SIZE : pos + header.size])
    view = memoryview(payload)
    records: list[Record] = []
    cursor = 0
    for _ in range(header.records_count):
        length, cursor = read_varlong(view, cursor)
        end = cursor + length
        if length < 0 or end > len(view):
            raise CorruptRecord("record length runs past the end of the batch")
        cursor += 1  # attributes
        ts_delta, cursor = read_varlong(view, cursor)
        offset_delta, cursor = read_varlong(view, cursor)
        key, cursor = _read_blob(view, cursor, end)
        value, cursor = _read_blob(view, cursor, end)
        header_count, cursor = read_varlong(view, cursor)
        if not 0 <= header_count <= end - cursor:
            raise CorruptRecord(f"record header count {header_count} does not fit in the record")
        headers: list[tuple[str, bytes | None]] = []
        for _h in range(header_count):
            name, cursor = _read_blob(view, cursor, end)
            if name is None:
                raise CorruptRecord("record header without a key")
            header_value, cursor = _read_blob(view, cursor, end)
            headers.append((name.decode("utf-8", "replace"), header_value))
        if cursor != end:
            raise CorruptRecord("record length does not match its fields")
        timestamp = header.max_timestamp if header.log_append_time else header.base_timestamp + ts_delta
        records.append(Record(key, value, tuple(headers), timestamp, header.base_offset + offset_delta))
    return DecodedBatch(header, records)


def decode_all(buf: bytes | bytearray | memoryview) -> list[DecodedBatch]:
    return [decode_batch(buf, pos) for pos, _ in iter_batches(buf)]


def parse_control_record(record: Record) -> tuple[ControlType, int]:
    """(type, coordinator epoch) of a transaction marker record."""
    if record.key is None or len(record.key) < 4:
        raise CorruptRecord("control record without a key")
    _version, control_type = struct.unpack_from(">hh", record.key)
    coordinator_epoch = -1
    if record.value is not None and len(record.value) >= 6:
        coordinator_epoch = struct.unpack_from(">i", record.value, 2)[0]
    return ControlType(control_type), coordinator_epoch
