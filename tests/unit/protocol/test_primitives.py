"""protocol/primitives.py: Kafka's encodings byte for byte, round trips of every type, and truncation."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from minikafka.protocol.errors import CorruptRecord
from minikafka.protocol.primitives import (
    Reader,
    Truncated,
    Writer,
    read_uvarint,
    read_uvarlong,
    read_varint,
    read_varlong,
    write_uvarint,
    write_varint,
    write_varlong,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


def written(method: str, value: Any) -> bytes:
    writer = Writer()
    getattr(writer, method)(value)
    return writer.value()


# --- golden bytes (ByteUtils and the Kafka protocol guide) ---------------------------------------


@pytest.mark.parametrize(("value", "encoded"), [
    (0, "00"), (-1, "01"), (1, "02"), (-2, "03"), (63, "7e"), (-64, "7f"), (64, "8001"), (300, "d804"),
    (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f"),
])
def test_varint_golden_bytes(value: int, encoded: str) -> None:
    assert written("varint", value).hex() == encoded
    assert Reader(bytes.fromhex(encoded)).varint() == value
    assert read_varint(bytes.fromhex(encoded), 0) == (value, len(encoded) // 2)


@pytest.mark.parametrize(("value", "encoded"), [
    (0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"), (16384, "808001"), (2**32 - 1, "ffffffff0f"),
])
def test_uvarint_golden_bytes(value: int, encoded: str) -> None:
    assert written("uvarint", value).hex() == encoded
    assert Reader(bytes.fromhex(encoded)).uvarint() == value


@pytest.mark.parametrize(("value", "encoded"), [
    (0, "00"), (-1, "01"), (1, "02"), (300, "d804"),
    (2**63 - 1, "feffffffffffffffff01"), (-(2**63), "ffffffffffffffffff01"),
])
def test_varlong_golden_bytes(value: int, encoded: str) -> None:
    assert written("varlong", value).hex() == encoded
    assert Reader(bytes.fromhex(encoded)).varlong() == value


@pytest.mark.parametrize(("method", "value", "encoded"), [
    ("int8", -1, "ff"), ("int8", 127, "7f"),
    ("int16", -2, "fffe"), ("int16", 0x1234, "1234"),
    ("int32", 1, "00000001"), ("int32", -(2**31), "80000000"),
    ("int64", 2**63 - 1, "7fffffffffffffff"), ("int64", -(2**63), "8000000000000000"),
    ("uint32", 2**32 - 1, "ffffffff"),
    ("string", "", "0000"), ("string", "héllo", "0006" + "héllo".encode().hex()),
    ("nullable_string", None, "ffff"),
    ("compact_string", "abc", "04616263"), ("compact_nullable_string", None, "00"),
    ("bytes_", b"\x01\x02", "000000020102"), ("nullable_bytes", None, "ffffffff"),
    ("compact_bytes", b"", "01"), ("compact_nullable_bytes", None, "00"),
    ("array_length", 3, "00000003"), ("array_length", None, "ffffffff"),
    ("compact_array_length", 3, "04"), ("compact_array_length", None, "00"),
    ("uuid", uuid.UUID("00112233-4455-6677-8899-aabbccddeeff"), "00112233445566778899aabbccddeeff"),
    ("tagged_fields", {}, "00"), ("tagged_fields", {2: b"\x07", 0: b""}, "020000020107"),
])
def test_fixed_and_length_prefixed_golden_bytes(method: str, value: Any, encoded: str) -> None:
    assert written(method, value).hex() == encoded


def test_int64_extremes_read_back() -> None:
    reader = Reader(bytes.fromhex("7fffffffffffffff8000000000000000"))
    assert (reader.int64(), reader.int64(), reader.remaining) == (2**63 - 1, -(2**63), 0)


def test_the_position_functions_match_the_writer() -> None:
    out = bytearray()
    write_uvarint(out, 300)
    write_varint(out, -1)
    write_varlong(out, -(2**63))
    assert read_uvarint(out, 0) == (300, 2)
    assert read_varint(out, 2) == (-1, 3)
    assert read_varlong(out, 3) == (-(2**63), len(out))


def test_the_last_byte_of_a_uvarint_keeps_32_bits_as_kafka_does() -> None:
    assert read_uvarint(bytes.fromhex("ffffffff7f"), 0) == (2**32 - 1, 5)
    assert read_uvarlong(bytes.fromhex("ffffffffffffffffff7f"), 0) == (2**64 - 1, 10)


# --- round trips ---------------------------------------------------------------------------------

texts = st.text(max_size=40)
blobs = st.binary(max_size=40)
ROUND_TRIPS: list[tuple[str, st.SearchStrategy[Any]]] = [
    ("int8", st.integers(-128, 127)),
    ("int16", st.integers(-(2**15), 2**15 - 1)),
    ("int32", INT32),
    ("int64", INT64),
    ("uint32", st.integers(0, 2**32 - 1)),
    ("uvarint", st.integers(0, 2**32 - 1)),
    ("varint", INT32),
    ("uvarlong", st.integers(0, 2**64 - 1)),
    ("varlong", INT64),
    ("string", texts),
    ("nullable_string", st.none() | texts),
    ("compact_string", texts),
    ("compact_nullable_string", st.none() | texts),
    ("bytes_", blobs),
    ("nullable_bytes", st.none() | blobs),
    ("compact_bytes", blobs),
    ("compact_nullable_bytes", st.none() | blobs),
    ("uuid", st.uuids()),
    ("tagged_fields", st.dictionaries(st.integers(0, 2**32 - 1), blobs, max_size=4)),
]
fields = st.lists(st.sampled_from(ROUND_TRIPS).flatmap(lambda kind: st.tuples(st.just(kind[0]), kind[1])),
                  max_size=12)


def _read_back(reader: Reader, method: str) -> Any:
    if method == "array_length":
        count = reader.array_length()
        return None if count < 0 else count
    return getattr(reader, method)()


@given(fields)
def test_every_type_round_trips_in_any_sequence(values: list[tuple[str, Any]]) -> None:
    writer = Writer()
    for method, value in values:
        getattr(writer, method)(value)
    reader = Reader(writer.value())
    assert [(method, _read_back(reader, method)) for method, _value in values] == values
    assert reader.remaining == 0


@given(st.sampled_from(["varint", "uvarint"]), st.integers(0, 2**32 - 1))
def test_the_position_functions_agree_with_the_reader(kind: str, unsigned: int) -> None:
    value = unsigned - 2**31 if kind == "varint" else unsigned
    data = written(kind, value) + b"tail"
    read: Callable[[bytes, int], tuple[int, int]] = read_varint if kind == "varint" else read_uvarint
    assert read(data, 0) == (value, len(data) - 4)


@given(INT64)
def test_the_record_varlong_matches_struct_free_reference(value: int) -> None:
    zigzag = ((value << 1) ^ (value >> 63)) & (2**64 - 1)
    reference = bytearray()
    while True:
        byte, zigzag = zigzag & 0x7F, zigzag >> 7
        reference.append(byte | (0x80 if zigzag else 0))
        if not zigzag:
            break
    assert written("varlong", value) == bytes(reference)


# --- malformed input -----------------------------------------------------------------------------


@given(fields.filter(bool), st.data())
def test_every_truncation_raises_truncated(values: list[tuple[str, Any]], data: st.DataObject) -> None:
    writer = Writer()
    for method, value in values:
        getattr(writer, method)(value)
    whole = writer.value()
    cut = data.draw(st.integers(0, len(whole) - 1))
    reader = Reader(whole[:cut])
    with pytest.raises(Truncated, match="input is truncated"):
        for method, _value in values:
            _read_back(reader, method)


@given(st.binary(max_size=30), st.lists(st.sampled_from([method for method, _values in ROUND_TRIPS]), max_size=8))
def test_any_bytes_read_as_values_or_raise_truncated_only(data: bytes, methods: list[str]) -> None:
    reader = Reader(data)
    try:
        for method in methods:
            getattr(reader, method)()
    except Truncated:
        return
    assert 0 <= reader.pos <= len(data)


@pytest.mark.parametrize("method", ["int8", "int16", "int32", "int64", "uint32", "uvarint", "varint", "varlong",
                                    "uuid", "string", "compact_string", "bytes_", "compact_bytes",
                                    "tagged_fields"])
def test_empty_input_is_truncated(method: str) -> None:
    with pytest.raises(Truncated):
        getattr(Reader(b""), method)()


def test_a_length_past_the_end_is_truncated_and_the_position_stays() -> None:
    reader = Reader(struct.pack(">h", 5) + b"abc")
    with pytest.raises(Truncated):
        reader.string()
    assert reader.pos == 2


@pytest.mark.parametrize(("method", "data"), [("uvarint", "ffffffff80"), ("varint", "8080808080"),
                                              ("varlong", "ff" * 10 + "01")])
def test_an_overlong_varint_is_refused(method: str, data: str) -> None:
    with pytest.raises(Truncated, match="longer than"):
        getattr(Reader(bytes.fromhex(data)), method)()


@pytest.mark.parametrize(("method", "data"), [("string", "ffff"), ("compact_string", "00"),
                                              ("bytes_", "ffffffff"), ("compact_bytes", "00")])
def test_a_null_where_none_is_allowed_is_refused(method: str, data: str) -> None:
    with pytest.raises(Truncated, match="null"):
        getattr(Reader(bytes.fromhex(data)), method)()


def test_invalid_utf8_is_refused() -> None:
    with pytest.raises(Truncated, match="UTF-8"):
        Reader(struct.pack(">h", 2) + b"\xff\xfe").string()


def test_the_error_is_a_corrupt_record_or_the_callers_own() -> None:
    assert issubclass(Truncated, CorruptRecord)

    class Mine(ValueError):
        pass

    with pytest.raises(Mine, match=r"^the record is truncated$"):
        Reader(b"\x00", what="the record", error=Mine).int32()


@pytest.mark.parametrize(("method", "value"), [("uvarint", -1), ("uvarint", 2**32), ("varint", 2**31),
                                               ("varlong", 2**63), ("string", "x" * 32768)])
def test_values_out_of_range_are_refused_when_written(method: str, value: Any) -> None:
    with pytest.raises(ValueError):
        written(method, value)
