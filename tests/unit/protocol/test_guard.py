"""The bounds check in front of kio's native reader.

Valid requests of every API and version the broker serves must pass it unchanged and consume
exactly what kio consumes; any other bytes must end as InvalidRequest, never as an abort of the
process (what kio's reader does with a huge array length), a hang or another exception.
"""

from __future__ import annotations

import contextlib
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import UnknownEntity, load_request_schema
from kio.schema.list_offsets.v8.request import ListOffsetsRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.static.primitive import Records
from minikafka.broker.handlers import all_handler_modules
from minikafka.broker.wire.registry import Registry
from minikafka.protocol.codec import decode_request, encode_request
from minikafka.protocol.errors import InvalidRequest
from minikafka.protocol.guard import MAX_ARRAY_ELEMENTS_PER_REQUEST, _read_uvarint, check_request

st.register_type_strategy(Records, st.binary(max_size=64).map(Records))



def _has_schema(key: int, version: int) -> bool:
    try:
        load_request_schema(key, version)
    except UnknownEntity:
        return False  # advertised for old clients' sake (Produce 0-2) but closed at the dispatcher
    return True


SERVED = sorted(
    (key, version)
    for key, low, high in Registry.from_modules(all_handler_modules()).api_versions()
    for version in range(low, high + 1)
    if _has_schema(key, version)
)
EXTREME_INT16 = [0x7FFF, 0x8000, 0xFFFE, 0xFFFF]
EXTREME_INT32 = [0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF, 0x10000000]
EXTREME_VARINTS = [b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\x07", b"\x80\x80\x80\x80\x80\x01", b"\xfe\xff\xff\x7f"]


def _body(frame: bytes) -> bytes:
    return frame[4:]


def _request_frame(key: int, version: int, data: st.DataObject) -> tuple[Any, bytes]:
    schema = load_request_schema(key, version)
    request = data.draw(st.from_type(schema))
    return request, _body(encode_request(7, request, client_id=data.draw(st.none() | st.text(max_size=8))))


def _decodes_or_is_invalid(frame: bytes, key: int, version: int) -> None:
    with contextlib.suppress(InvalidRequest):
        decode_request(frame, key, version)


@pytest.mark.parametrize(("key", "version"), SERVED)
def test_a_checker_compiles_for_every_served_schema(key: int, version: int) -> None:
    schema = load_request_schema(key, version)
    request = st.from_type(schema)  # compiles lazily; the guard must not raise TypeError on any field
    assert request is not None
    header_cls = schema.__header_schema__
    with pytest.raises(InvalidRequest):
        check_request(b"", header_cls, schema)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(pair=st.sampled_from(SERVED), data=st.data())
def test_valid_requests_pass_and_consume_what_kio_consumes(pair: tuple[int, int], data: st.DataObject) -> None:
    key, version = pair
    request, frame = _request_frame(key, version, data)
    schema = load_request_schema(key, version)
    assert check_request(frame, schema.__header_schema__, schema) == len(frame)
    try:
        decoded = decode_request(frame, key, version)
    except InvalidRequest as exc:
        # kio cannot read back some values its writer takes (an int64 timedelta past Python's
        # range): that is kio's reader failing after the guard passed the frame, never the guard.
        assert "undecodable" in str(exc), exc
        return
    assert decoded.body == request
    assert decoded.trailing_bytes == 0


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(pair=st.sampled_from(SERVED), data=st.data())
def test_mutated_requests_end_as_invalid_request_or_decode(pair: tuple[int, int], data: st.DataObject) -> None:
    key, version = pair
    _request, original = _request_frame(key, version, data)
    frame = bytearray(original)
    position = data.draw(st.integers(0, len(frame)))
    mutation = data.draw(st.sampled_from(["int16", "int32", "varint", "byte", "truncate", "extend"]))
    if mutation == "int16":
        frame[position:position + 2] = struct.pack(">H", data.draw(st.sampled_from(EXTREME_INT16)))
    elif mutation == "int32":
        frame[position:position + 4] = struct.pack(">I", data.draw(st.sampled_from(EXTREME_INT32)))
    elif mutation == "varint":
        varint = data.draw(st.sampled_from(EXTREME_VARINTS))
        frame[position:position + len(varint)] = varint
    elif mutation == "byte":
        frame[position:position + 1] = bytes([data.draw(st.integers(0, 255))])
    elif mutation == "truncate":
        del frame[position:]
    else:
        frame[position:position] = data.draw(st.binary(min_size=1, max_size=16))
    _decodes_or_is_invalid(bytes(frame), key, version)


@settings(max_examples=2000, deadline=None)
@given(pair=st.sampled_from(SERVED), data=st.binary(max_size=300))
def test_any_bytes_after_a_header_end_as_invalid_request_or_decode(pair: tuple[int, int], data: bytes) -> None:
    key, version = pair
    _decodes_or_is_invalid(struct.pack(">hhi", key, version, 1) + data, key, version)


def _metadata_v12_prefix() -> bytes:
    return struct.pack(">hhih", 3, 12, 1, 1) + b"x" + b"\x00"


@pytest.mark.parametrize("count", [b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x08", b"\xe5\x8e\x26"])
def test_an_array_longer_than_the_frame_is_rejected_before_kio_reserves_it(count: bytes) -> None:
    # Unguarded, kio 0.6.5 reserves Vec::with_capacity(count) and the process aborts.
    with pytest.raises(InvalidRequest, match="cannot fit"):
        decode_request(_metadata_v12_prefix() + count + b"\x00" * 10, 3, 12)


def test_a_varint_longer_than_five_bytes_is_rejected() -> None:
    with pytest.raises(InvalidRequest, match="varint"):
        decode_request(_metadata_v12_prefix() + b"\x80" * 6 + b"\x01", 3, 12)


def _uvarint_reference(frame: bytes, position: int, end: int) -> tuple[int, int] | None:
    """Kafka's ByteUtils.readUnsignedVarint within [position, end); None where it fails."""
    value = 0
    for index in range(5):
        if position + index >= end:
            return None
        value |= (frame[position + index] & 0x7F) << (7 * index)
        if frame[position + index] < 0x80:
            return value, position + index + 1
    return None


@settings(max_examples=2000, deadline=None)
@given(data=st.data())
def test_unsigned_varints_read_as_kafka_reads_them(data: st.DataObject) -> None:
    """Lengths of two and three bytes take a shortcut; it must read what the loop reads, and never a
    byte at or past `end`."""
    frame = data.draw(st.lists(st.one_of(st.integers(0, 0x7F), st.integers(0x80, 0xFF)), max_size=8).map(bytes))
    position = data.draw(st.integers(0, len(frame)))
    end = data.draw(st.integers(position, len(frame)))
    expected = _uvarint_reference(frame, position, end)
    if expected is None:
        with pytest.raises(InvalidRequest, match="varint"):
            _read_uvarint(frame, position, end)
    else:
        assert _read_uvarint(frame, position, end) == expected


def test_null_where_the_schema_forbids_it_is_an_invalid_request() -> None:
    # ListOffsets v8 `topics` is not nullable; kio would hand the handler None.
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=())
    frame = bytearray(_body(encode_request(1, request)))
    assert frame[-2:] == b"\x01\x00"  # empty compact array, then the empty tagged-field section
    frame[-2] = 0  # compact null
    with pytest.raises(InvalidRequest, match="array length -1 where the schema forbids it"):
        decode_request(bytes(frame), 2, 8)


def test_legacy_null_array_where_forbidden_and_allowed() -> None:
    # AddPartitionsToTxn v0: `topics` not nullable (legacy int32 length -1).
    frame = struct.pack(">hhih", 24, 0, 1, -1) + struct.pack(">h", 1) + b"t" + struct.pack(">qhi", 1, 0, -1)
    with pytest.raises(InvalidRequest, match="length -1"):
        decode_request(frame, 24, 0)
    # Metadata v4 `topics` is nullable: null means all topics.
    metadata = struct.pack(">hhih", 3, 4, 1, -1) + struct.pack(">ib", -1, 1)
    assert decode_request(metadata, 3, 4).body.topics is None


def test_a_tagged_field_must_fill_its_announced_size() -> None:
    request = MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name="a"),),
                              allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    frame = _body(encode_request(1, request))
    # Replace the empty top-level tag section with one tag of 200 bytes that are not there.
    with pytest.raises(InvalidRequest, match="tagged field"):
        decode_request(frame[:-1] + b"\x01\x00\x81\x01", 3, 12)


def _metadata_v4(names: int) -> bytes:
    # Metadata v4 (legacy encoding): `names` empty topic names, then allow_auto_topic_creation.
    return struct.pack(">hhih", 3, 4, 1, -1) + struct.pack(">i", names) + b"\x00\x00" * names + b"\x00"


def test_a_request_may_announce_at_most_the_element_budget() -> None:
    # Each element decodes to a Python object: a 10 MiB frame of 5M empty names once took 1.4 GB.
    assert len(decode_request(_metadata_v4(MAX_ARRAY_ELEMENTS_PER_REQUEST), 3, 4).body.topics) \
        == MAX_ARRAY_ELEMENTS_PER_REQUEST
    with pytest.raises(InvalidRequest, match="array elements in one request"):
        decode_request(_metadata_v4(MAX_ARRAY_ELEMENTS_PER_REQUEST + 1), 3, 4)
