"""Record batch v2: header parsing, CRC, offsets patching, encode/decode round trips."""

from __future__ import annotations

import contextlib
import struct

import cramjam
import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from minikafka.protocol.errors import CorruptRecord
from minikafka.protocol.records import (
    HEADER_SIZE,
    BatchHeader,
    Compression,
    ControlType,
    Record,
    build_batch,
    build_control_batch,
    build_one_record_batch,
    compress,
    decode_all,
    decode_batch,
    decompress,
    is_crc_valid,
    iter_batches,
    parse_control_record,
    set_base_offset,
    set_base_sequence,
    set_log_append_time,
    set_partition_leader_epoch,
    valid_prefix_length,
)

blobs = st.one_of(st.none(), st.binary(max_size=64))
headers = st.lists(st.tuples(st.text(max_size=8), blobs), max_size=3)
records = st.lists(
    st.builds(Record, key=blobs, value=blobs, headers=headers.map(tuple),
              timestamp=st.integers(min_value=0, max_value=2**41)),
    min_size=1, max_size=20,
)


@settings(max_examples=150, deadline=None)
@given(records=records, codec=st.sampled_from(list(Compression)), base=st.integers(0, 2**40))
def test_build_decode_round_trip(records: list[Record], codec: Compression, base: int) -> None:
    batch = build_batch(records, base_offset=base, compression=codec)
    decoded = decode_batch(batch)
    assert decoded.header.base_offset == base
    assert decoded.header.records_count == len(records)
    assert decoded.header.compression == codec
    assert decoded.header.max_timestamp == max(r.timestamp for r in records)
    for index, (got, want) in enumerate(zip(decoded.records, records, strict=True)):
        assert (got.key, got.value, tuple(got.headers), got.timestamp) == (
            want.key, want.value, tuple(want.headers), want.timestamp)
        assert got.offset == base + index


@settings(max_examples=300, deadline=None)
@given(key=st.one_of(st.none(), st.binary(max_size=300)), value=st.one_of(st.none(), st.binary(max_size=300)),
       timestamp=st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_one_record_batch_is_build_batch_of_that_record(key: bytes | None, value: bytes | None,
                                                        timestamp: int) -> None:
    """The transaction coordinator's one-record shortcut: the same bytes as the generic builder, and the header
    the append would otherwise parse back from them."""
    batch, header = build_one_record_batch(key, value, timestamp)
    assert batch == build_batch([Record(key, value, (), timestamp)])
    assert header == BatchHeader.parse(batch, 0)
    assert is_crc_valid(batch, 0, header)


def test_header_fields_match_kafka_layout() -> None:
    batch = build_batch([Record(b"k", b"v", (), 1000), Record(None, b"w", (), 1007)], base_offset=42,
                        producer_id=7, producer_epoch=3, base_sequence=11, partition_leader_epoch=5)
    header = BatchHeader.parse(batch)
    assert len(batch) == header.size == header.batch_length + 12
    assert struct.unpack_from(">q", batch, 0)[0] == 42
    assert batch[16] == 2  # magic
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, 11)
    assert (header.base_timestamp, header.max_timestamp) == (1000, 1007)
    assert header.last_offset_delta == 1 and header.last_offset == 43 and header.next_offset == 44
    assert header.last_sequence == 12
    assert header.partition_leader_epoch == 5
    assert is_crc_valid(batch, 0, header)


def test_patching_offset_and_epoch_keeps_crc_valid() -> None:
    batch = bytearray(build_batch([Record(b"k", b"v", (), 1)]))
    set_base_offset(batch, 0, 123456789)
    set_partition_leader_epoch(batch, 0, 9)
    header = BatchHeader.parse(batch)
    assert header.base_offset == 123456789 and header.partition_leader_epoch == 9
    assert is_crc_valid(batch, 0, header)


@settings(max_examples=100, deadline=None)
@given(records=records, codec=st.sampled_from([Compression.NONE, Compression.ZSTD]),
       producer=st.tuples(st.integers(-1, 2**40), st.integers(-1, 32767), st.integers(-1, 2**31 - 1)),
       transactional=st.booleans(), offset=st.integers(0, 2**62), epoch=st.integers(-1, 2**31 - 1))
def test_placed_header_is_the_header_of_the_patched_bytes(
        records: list[Record], codec: Compression, producer: tuple[int, int, int], transactional: bool,
        offset: int, epoch: int) -> None:
    # An append keeps `placed` instead of parsing each header again after patching it: the two must agree.
    producer_id, producer_epoch, base_sequence = producer
    batch = bytearray(build_batch(records, compression=codec, producer_id=producer_id, producer_epoch=producer_epoch,
                                  base_sequence=base_sequence, transactional=transactional))
    original = BatchHeader.parse(batch)
    set_base_offset(batch, 0, offset)
    set_partition_leader_epoch(batch, 0, epoch)
    assert original.placed(offset, epoch) == BatchHeader.parse(batch)
    assert original.base_offset == 0 and original.partition_leader_epoch == -1  # the original is left as it was


def test_log_append_time_rewrites_crc_and_record_timestamps() -> None:
    batch = bytearray(build_batch([Record(b"k", b"v", (), 1), Record(b"k", b"v", (), 5)]))
    set_log_append_time(batch, 0, BatchHeader.parse(batch), 99999)
    header = BatchHeader.parse(batch)
    assert header.log_append_time and header.max_timestamp == 99999
    assert is_crc_valid(batch, 0, header)
    assert [r.timestamp for r in decode_batch(batch).records] == [99999, 99999]


def test_base_sequence_rewrites_crc_and_leaves_the_records() -> None:
    batch = bytearray(build_batch([Record(b"k", b"v", (), 1)] * 3, producer_id=7, producer_epoch=2, base_sequence=0))
    set_base_sequence(batch, 0, BatchHeader.parse(batch), 30)
    header = BatchHeader.parse(batch)
    assert (header.base_sequence, header.last_sequence, header.producer_id) == (30, 32, 7)
    assert is_crc_valid(batch, 0, header)
    assert [r.value for r in decode_batch(batch).records] == [b"v"] * 3


def test_crc_mismatch_is_detected() -> None:
    batch = bytearray(build_batch([Record(b"k", b"value", (), 1)]))
    batch[-1] ^= 0xFF
    with pytest.raises(CorruptRecord):
        list(iter_batches(batch))


@pytest.mark.parametrize("magic", [0, 1, 3])
def test_other_magic_is_rejected(magic: int) -> None:
    batch = bytearray(build_batch([Record(b"k", b"v", (), 1)]))
    batch[16] = magic
    with pytest.raises(CorruptRecord, match="magic"):
        BatchHeader.parse(batch)


@settings(max_examples=100, deadline=None)
@given(count=st.integers(1, 6), cut=st.integers(0, 10_000))
def test_valid_prefix_stops_at_the_last_whole_batch(count: int, cut: int) -> None:
    batches = [build_batch([Record(b"k", b"v" * i, (), i)], base_offset=i) for i in range(count)]
    blob = b"".join(batches)
    cut = min(cut, len(blob))
    ends = [sum(len(b) for b in batches[: i + 1]) for i in range(count)]
    expected = max([0] + [end for end in ends if end <= cut])
    assert valid_prefix_length(blob[:cut]) == expected


def test_control_batch_layout() -> None:
    batch = build_control_batch(producer_id=5, producer_epoch=2, control_type=ControlType.COMMIT,
                                coordinator_epoch=7, timestamp=1234)
    decoded = decode_batch(batch)
    assert decoded.header.is_control and decoded.header.is_transactional
    record = decoded.records[0]
    assert record.key == b"\x00\x00\x00\x01"
    assert record.value == b"\x00\x00\x00\x00\x00\x07"
    assert parse_control_record(record) == (ControlType.COMMIT, 7)


def test_truncated_header_is_corrupt() -> None:
    batch = build_batch([Record(b"k", b"v", (), 1)])
    with pytest.raises(CorruptRecord):
        BatchHeader.parse(batch[: HEADER_SIZE - 1])
    with pytest.raises(CorruptRecord):
        BatchHeader.parse(batch[:-1])


def test_decode_all_reads_consecutive_batches() -> None:
    blob = build_batch([Record(b"a", b"1", (), 1)], base_offset=0) + build_batch(
        [Record(b"b", b"2", (), 2), Record(b"c", b"3", (), 3)], base_offset=1)
    values = [r.value for batch in decode_all(blob) for r in batch.records]
    assert values == [b"1", b"2", b"3"]


BOMB = b"\0" * (8 * 1024 * 1024)


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD])
def test_decompression_over_the_limit_is_refused(codec: Compression) -> None:
    compressed = compress(codec, BOMB)
    assert len(compressed) < len(BOMB) // 20  # a bomb: the claim is about output, not input size
    with pytest.raises(CorruptRecord, match="decompress to more than"):
        decompress(codec, compressed, limit=len(BOMB) - 1)
    assert decompress(codec, compressed, limit=len(BOMB)) == BOMB


def test_xerial_snappy_chunks_count_towards_the_limit() -> None:
    chunk = cramjam.snappy.compress_raw(b"a" * 1000)
    framed = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + (struct.pack(">i", len(chunk)) + bytes(chunk)) * 3
    assert decompress(Compression.SNAPPY, framed) == b"a" * 3000
    with pytest.raises(CorruptRecord, match="decompress to more than"):
        decompress(Compression.SNAPPY, framed, limit=2999)


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD])
@settings(max_examples=150, deadline=None)
@given(cut=st.integers(0, 200), garbage=st.binary(max_size=40))
def test_damaged_compressed_records_are_corrupt_not_a_crash(codec: Compression, cut: int, garbage: bytes) -> None:
    compressed = compress(codec, bytes(range(256)) * 8)
    with contextlib.suppress(CorruptRecord):
        decompress(codec, compressed[:cut] + garbage)


@settings(max_examples=1500, deadline=None)
@given(records=records, codec=st.sampled_from(list(Compression)),
       edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4))
def test_a_batch_with_damaged_records_but_a_valid_crc_decodes_or_is_corrupt(
        records: list[Record], codec: Compression, edits: list[tuple[int, int]]) -> None:
    # A crafted batch passes the CRC check; decoding it must still end only in CorruptRecord.
    batch = bytearray(build_batch(records, compression=codec))
    for position, value in edits:
        batch[HEADER_SIZE - 4 + position % (len(batch) - HEADER_SIZE + 4)] = value  # records count onwards
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    with contextlib.suppress(CorruptRecord):
        decode_batch(bytes(batch))
