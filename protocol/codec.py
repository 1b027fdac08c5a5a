"""The one boundary between Kafka bytes and kio entities.

Every decode failure, whatever kio raised (its own errors, KeyError for unknown tags, ValueError for
bad booleans, ...), leaves this module as `InvalidRequest`. Frames are bounds-checked by `guard` first:
kio's native reader would otherwise size allocations from lengths on the wire and abort the process.
Bytes left after a decoded request are counted (kio does not report them) but tolerated, as Kafka
tolerates them.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import UnknownAPIKey, UnknownEntity, load_request_schema, load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32
from minikafka.protocol import build, guard
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.encoder import FrameBuffer, writer_for
from minikafka.protocol.errors import InvalidRequest
from minikafka.protocol.guard import check_request
from minikafka.protocol.kio_fixups import describe_transactions_without_negative_times
from minikafka.protocol.regions import materialized

_PEEK = struct.Struct(">hhi")
_CORRELATION = struct.Struct(">i")
_SIZE_AND_CORRELATION = struct.Struct(">ii")
# A response frame's first bytes before its size and correlation id are known: size, correlation id and,
# for response header v1, its empty tagged fields (a zero byte).
_HEADER_V0_PLACE = bytes(_SIZE_AND_CORRELATION.size)
_HEADER_V1_PLACE = bytes(_SIZE_AND_CORRELATION.size + 1)


# Not frozen: a frozen dataclass's __init__ sets each field through object.__setattr__ (see records.BatchHeader)
@dataclass(slots=True)
class PeekedHeader:
    api_key: int
    api_version: int
    correlation_id: int


# Not frozen: a frozen dataclass's __init__ sets each field through object.__setattr__ (see records.BatchHeader)
@dataclass(slots=True)
class Decoded:
    client_id: str | None
    body: Any
    # Bytes after the decoded body. Kafka ignores them, and librdkafka 2.16 sends 3 of them after a
    # Metadata v12 request for all topics, so they are reported, not rejected.
    trailing_bytes: int = 0


def peek_header(frame: bytes | bytearray) -> PeekedHeader:
    """Read key, version and correlation id: enough to route or reject without decoding."""
    if len(frame) < _PEEK.size:
        raise InvalidRequest(f"frame of {len(frame)} bytes is shorter than a request header")
    return PeekedHeader(*_PEEK.unpack_from(frame, 0))


@cache
def _request_schemas(api_key: int, version: int) -> tuple[type, type]:
    schema = load_request_schema(api_key, version)
    return (RequestHeaderV2 if schema.__flexible__ else RequestHeaderV1), schema


@cache
def _request_reader(api_key: int, version: int) -> tuple[Any, Any]:
    header, schema = _request_schemas(api_key, version)
    return entity_reader(header), entity_reader(schema)


def request_schema(api_key: int, version: int) -> type:
    return load_request_schema(api_key, version)


def decode_request(frame: bytes | bytearray, api_key: int, version: int) -> Decoded:
    """Decode header and body of a request frame; raise InvalidRequest on any failure."""
    try:
        header_cls, body_cls = _request_schemas(api_key, version)
        check_request(frame, header_cls, body_cls)
        read_header, read_body = _request_reader(api_key, version)
        view = memoryview(frame).toreadonly()  # a big frame arrives in a bytearray; kio wants read-only
        header, header_size = read_header(view, 0)
        body, body_size = read_body(view, header_size)
    except (UnknownAPIKey, UnknownEntity) as exc:
        raise InvalidRequest(f"no schema for api {api_key} v{version}") from exc
    except InvalidRequest as exc:
        raise InvalidRequest(f"malformed api {api_key} v{version}: {exc}") from None
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # kio raises a mix of its own and built-in exceptions, and a Rust panic
        # surfaces as pyo3's PanicException, which derives from BaseException, not Exception.
        raise InvalidRequest(f"undecodable api {api_key} v{version}: {exc!r}") from exc
    return Decoded(header.client_id, body, len(frame) - header_size - body_size)


def prepare(api_key: int, version: int) -> None:
    """Do now what the first request of `api_key` at `version` would: load its schemas and compile their
    checker, reader, answer maker and answer writer. For a process that forks brokers (the testing kit's
    fork server): its children find the work done. Raises InvalidRequest for a pair kio has no schema for."""
    try:
        header_cls, body_cls = _request_schemas(api_key, version)
    except (UnknownAPIKey, UnknownEntity) as exc:
        raise InvalidRequest(f"no schema for api {api_key} v{version}") from exc
    guard.prepare(header_cls)
    guard.prepare(body_cls)
    _request_reader(api_key, version)
    answer_cls = response_class(api_key, version)
    writer_for(answer_cls)
    build.prepare(answer_cls)


@cache
def response_class(api_key: int, version: int) -> type:
    return load_response_schema(api_key, version)


@cache
def _writer(cls: type) -> Any:
    return entity_writer(cls)


def encode_body(body: Any) -> bytes:
    """A body's bytes, through the compiled writer (protocol/encoder.py); request headers through kio."""
    cls: Any = type(body)
    if cls.__name__ == "RequestHeader":
        buffer = io.BytesIO()
        _writer(cls)(buffer, body)
        return buffer.getvalue()
    out = bytearray()
    writer_for(cls)(out, body)
    return bytes(out)


def response_frame(correlation_id: int, body: Any) -> FrameBuffer:
    """A whole response frame: size, response header, body. Big record sets are not copied into it: send
    `frame.parts()` (protocol/encoder.py FrameBuffer).

    ApiVersions always uses response header v0 (KIP-511), whatever its version, so a client that
    does not know our flexible versions can still read the error code.
    """
    flexible_header = body.__flexible__ and body.__api_key__ != ApiKey.API_VERSIONS
    # The body is written after room for the header, which is filled in once the size is known: building
    # the header and body apart and joining them copied every frame once more.
    frame = FrameBuffer(_HEADER_V1_PLACE if flexible_header else _HEADER_V0_PLACE)
    cls: Any = type(body)
    writer_for(cls)(frame, body)
    _SIZE_AND_CORRELATION.pack_into(frame, 0, frame.frame_size - 4, correlation_id)
    return frame


def encode_response(correlation_id: int, body: Any) -> bytes:
    """A whole response frame in one piece; for tools and tests."""
    return b"".join(materialized(response_frame(correlation_id, body).parts()))


def encode_request(correlation_id: int, body: Any, client_id: str | None = "minikafka") -> bytes:
    """Encode a request frame; used by tools and tests that speak to a broker directly."""
    header_cls = RequestHeaderV2 if body.__flexible__ else RequestHeaderV1
    header = header_cls(
        request_api_key=body.__api_key__,
        request_api_version=body.__version__,
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    payload = encode_body(header) + encode_body(body)
    return _CORRELATION.pack(len(payload)) + payload


def decode_response(frame: bytes, api_key: int, version: int) -> tuple[int, Any]:
    """Decode a response frame body (without its size prefix); for tools and tests."""
    cls = load_response_schema(api_key, version)
    if api_key == ApiKey.DESCRIBE_TRANSACTIONS and version == 0:
        frame = describe_transactions_without_negative_times(frame)
    (correlation_id,) = _CORRELATION.unpack_from(frame, 0)
    offset = 4
    if cls.__flexible__ and api_key != ApiKey.API_VERSIONS:
        offset += 1  # empty tagged fields of response header v1
    body, _size = entity_reader(cls)(memoryview(frame), offset)
    return correlation_id, body
