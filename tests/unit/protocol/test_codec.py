"""The kio boundary: requests decode, every failure becomes InvalidRequest, responses frame right."""

from __future__ import annotations

import contextlib
import gc
import io
import os
import struct
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.serial import entity_writer
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.build import build, nested
from minikafka.protocol.codec import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    peek_header,
    response_class,
    response_frame,
)
from minikafka.protocol.encoder import SPILL_MIN_BYTES, FrameBuffer
from minikafka.protocol.errors import InvalidRequest
from minikafka.protocol.records import Record, build_batch
from minikafka.protocol.regions import FileRegion, materialized
from minikafka.protocol.render import MAX_BATCHES_SUMMARISED, Batches, Walk, render_batches, render_records


def _body(frame: bytes) -> bytes:
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    return frame[4:]


def test_request_round_trip_flexible() -> None:
    request = MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name="orders"),),
                              allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    frame = _body(encode_request(17, request, client_id="me"))
    peeked = peek_header(frame)
    assert (peeked.api_key, peeked.api_version, peeked.correlation_id) == (3, 12, 17)
    decoded = decode_request(frame, 3, 12)
    assert decoded.client_id == "me"
    assert decoded.body == request


def test_trailing_bytes_are_counted_not_rejected() -> None:
    # librdkafka 2.16 sends exactly this Metadata v12 request (all topics) with 3 extra bytes.
    frame = bytes.fromhex("0003000c00000004000772646b61666b610000000000010000")
    decoded = decode_request(frame, 3, 12)
    assert decoded.body.topics is None
    assert decoded.trailing_bytes == 3
    request = ApiVersionsRequest(client_software_name="x", client_software_version="1")
    assert decode_request(_body(encode_request(1, request)) + b"\x00", 18, 3).trailing_bytes == 1


def test_api_versions_response_uses_header_v0_and_omits_default_tags() -> None:
    body = build(ApiVersionsResponse, api_keys=[{"api_key": 18, "min_version": 0, "max_version": 4}])
    frame = _body(encode_response(9, body))
    # correlation id, then immediately the error code: no tagged-field byte of header v1
    assert frame[:4] == struct.pack(">i", 9)
    assert frame[4:6] == b"\x00\x00"
    # the body ends with an empty tagged-field section: FinalizedFeaturesEpoch=-1 is not written
    assert frame[-1:] == b"\x00"
    assert decode_response(frame, 18, 3)[1] == body


def test_flexible_response_has_header_v1() -> None:
    body = build(MetadataResponse, cluster_id="c", controller_id=1,
                 brokers=[{"node_id": 1, "host": "127.0.0.1", "port": 9092}])
    frame = _body(encode_response(5, body))
    assert frame[4] == 0  # empty tagged fields of response header v1
    assert decode_response(frame, 3, 12) == (5, body)


def test_nested_lookup() -> None:
    assert nested(MetadataResponse, "brokers").__name__ == "MetadataResponseBroker"


@settings(max_examples=400, deadline=None)
@given(data=st.binary(max_size=200), key=st.sampled_from([0, 1, 3, 18, 19]), version=st.integers(0, 12))
def test_garbage_never_escapes_as_anything_but_invalid_request(data: bytes, key: int, version: int) -> None:
    frame = struct.pack(">hhi", key, version, 1) + data
    with contextlib.suppress(InvalidRequest):
        decode_request(frame, key, version)


@settings(max_examples=300, deadline=None)
@given(position=st.integers(0, 200), value=st.integers(0, 255))
def test_mutated_valid_request_never_escapes(position: int, value: int) -> None:
    request = MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name="orders"),),
                              allow_auto_topic_creation=True, include_topic_authorized_operations=False)
    frame = bytearray(_body(encode_request(3, request)))
    frame[position % len(frame)] = value
    with contextlib.suppress(InvalidRequest):
        decode_request(bytes(frame), 3, 12)


def test_a_remembered_body_is_answered_from_its_encoding_and_no_other() -> None:
    from kio.index import load_response_schema
    from minikafka.protocol import codec
    from minikafka.protocol.api_keys import ApiKey
    from minikafka.protocol.build import build
    from minikafka.protocol.encoder import remember_encoding

    cls = load_response_schema(ApiKey.API_VERSIONS, 3)
    kept = remember_encoding(build(cls, api_keys=[{"api_key": 0, "min_version": 0, "max_version": 13}]))
    other = build(cls, api_keys=[{"api_key": 1, "min_version": 4, "max_version": 17}])
    assert codec.encode_response(7, kept) == codec.encode_response(7, kept)
    assert codec.decode_response(codec.encode_response(7, kept)[4:], ApiKey.API_VERSIONS, 3)[1] == kept
    assert codec.decode_response(codec.encode_response(9, other)[4:], ApiKey.API_VERSIONS, 3) == (9, other)
    assert codec.encode_response(9, other) == codec.encode_response(9, build(
        cls, api_keys=[{"api_key": 1, "min_version": 4, "max_version": 17}]))


# --- response frames: big record sets are sent from where they are --------------------------------------


def _kio_bytes(entity: object) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def _fetch_response(version: int, record_sets: list[bytes | bytearray]) -> object:
    return build(response_class(ApiKey.FETCH, version), responses=[{
        "topic": "orders", "topic_id": uuid.UUID(int=7),
        "partitions": [{"partition_index": index, "records": records, "high_watermark": 10}
                       for index, records in enumerate(record_sets)]}])


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_a_fetch_frame_sends_big_record_sets_by_reference_and_the_same_bytes_as_kio(version: int) -> None:
    big, other_big = bytes(range(256)) * 64, b"b" * SPILL_MIN_BYTES
    small, mutable = b"s" * (SPILL_MIN_BYTES - 1), bytearray(b"m" * SPILL_MIN_BYTES * 2)
    body = _fetch_response(version, [big, small, other_big, mutable, b""])
    frame = response_frame(41, body)
    parts = frame.parts()
    wire = b"".join(parts)
    header_size = 9 if version >= 12 else 8  # response header v1 from Fetch v12: its empty tagged fields
    assert struct.unpack_from(">ii", wire) == (len(wire) - 4, 41)
    assert wire[header_size:] == _kio_bytes(body)
    assert frame.frame_size == len(wire)
    # Immutable record sets of SPILL_MIN_BYTES or more are parts of their own; the rest was copied in.
    assert [part for part in parts if part is big or part is other_big] == [big, other_big]
    assert not any(part is small or part is mutable for part in parts)
    assert decode_response(wire[4:], ApiKey.FETCH, version)[1] == body
    assert encode_response(41, body) == wire


def test_a_frame_with_nothing_kept_aside_is_one_buffer() -> None:
    body = _fetch_response(12, [b"x" * 10])
    parts = response_frame(3, body).parts()
    assert len(parts) == 1 and bytes(parts[0])[9:] == _kio_bytes(body)


def test_a_frame_buffer_ends_with_a_record_set_or_starts_with_one() -> None:
    ending, starting = FrameBuffer(b"head"), FrameBuffer()
    records = b"r" * SPILL_MIN_BYTES
    ending.spill(records)
    starting.spill(records)
    starting += b"tail"
    assert [bytes(part) for part in ending.parts()] == [b"head", records]
    assert [bytes(part) for part in starting.parts()] == [records, b"tail"]
    assert (ending.frame_size, starting.frame_size) == (4 + len(records), len(records) + 4)


# --- file regions: record sets left in the log file, sent with sendfile --------------------------------


def _region_of(tmp_path: Path, data: bytes, lead: bytes = b"lead") -> tuple[FileRegion, list[int]]:
    """A region over `data` in a file that has other bytes before it; the list counts its releases."""
    path = tmp_path / "segment.log"
    path.write_bytes(lead + data + b"trail")
    fd = os.open(path, os.O_RDONLY)
    released: list[int] = []

    def ended() -> None:
        released.append(fd)
        os.close(fd)

    return FileRegion(fd, len(lead), len(data), ended), released


@pytest.mark.parametrize("version", [4, 12, 16])
def test_a_file_region_is_a_part_of_its_own_and_encodes_as_its_bytes(tmp_path: Path, version: int) -> None:
    records = bytes(range(256)) * 300
    region, released = _region_of(tmp_path, records)
    body = _fetch_response(version, [b"small", region, records])  # type: ignore[list-item]
    frame = response_frame(5, body)
    parts = frame.parts()
    assert frame.has_regions and [part for part in parts if type(part) is FileRegion] == [region]
    wire = b"".join(materialized(parts))
    expected = encode_response(5, _fetch_response(version, [b"small", records, records]))
    assert wire == expected and frame.frame_size == len(wire)
    assert encode_response(5, body) == expected  # tools and tests get the bytes read from the file
    del body, frame, parts, region
    gc.collect()
    assert len(released) == 1  # the last reference gone, the region let go of its file once


def test_a_region_read_from_a_file_cut_short_is_an_error(tmp_path: Path) -> None:
    region, _released = _region_of(tmp_path, b"x" * 100)
    os.truncate(tmp_path / "segment.log", 50)
    with pytest.raises(EOFError, match="ends after 46 bytes"):
        region.read()


def _batches(sizes: list[int]) -> bytes:
    return b"".join(build_batch([Record(None, b"v" * size, (), 1_700_000_000_000 + index)], base_offset=index)
                    for index, size in enumerate(sizes))


@pytest.mark.parametrize("budget", [0, 1, MAX_BATCHES_SUMMARISED])
@pytest.mark.parametrize("sizes", [[10], [8_000], [10, 20]])
@pytest.mark.parametrize("cut", [0, 1])
def test_a_batch_set_of_one_batch_is_summarised_as_any_other(sizes: list[int], budget: int, cut: int) -> None:
    """Batches takes one whole batch in `bytes` (a producer's records for a partition) without its scan: the
    same summary, budget and counts as the scan of the same bytes in a bytearray."""
    records = _batches(sizes)
    records = records[:len(records) - cut]
    shortcut, scanned = Walk(), Walk()
    shortcut.batch_budget = scanned.batch_budget = budget
    short, scan = Batches(records, shortcut), Batches(bytearray(records), scanned)
    assert (short.headers, short.not_shown, short.partial, short.size) == (
        scan.headers, scan.not_shown, scan.partial, scan.size)
    assert all(type(header) is bytes for _position, header in short.headers)
    assert (shortcut.batch_budget, shortcut.records_bytes) == (scanned.batch_budget, scanned.records_bytes)


@pytest.mark.parametrize("sizes", [
    [10, 70_000, 5, 200_000],  # headers in one window and far apart
    [30] * (MAX_BATCHES_SUMMARISED + 40),  # more than are summarised: the rest counted
    [], [8_000],
])
@pytest.mark.parametrize("cut", [0, 1, 70])  # a fetch may end in part of a batch
def test_batch_summaries_from_a_region_are_those_from_its_bytes(tmp_path: Path, sizes: list[int], cut: int) -> None:
    records = _batches(sizes)
    records = records[:len(records) - cut] if cut < len(records) else records
    region, _released = _region_of(tmp_path, records)
    from_bytes, from_region = Walk(), Walk()
    assert render_batches(Batches(region, from_region)) == render_batches(Batches(records, from_bytes))
    assert (from_region.batch_budget, from_region.records_bytes) == (from_bytes.batch_budget, from_bytes.records_bytes)
    assert render_records(region, Walk()) == render_records(records, Walk())
    decoded = render_records(region, Walk(decode_records=True))
    assert decoded == render_records(records, Walk(decode_records=True))
