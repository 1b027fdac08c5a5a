"""Walk a request frame against its kio schema before kio's native reader sees it.

kio 0.6.5's native reader trusts lengths from the wire: it reserves `Vec::with_capacity(n)` for an
array of `n` elements as read, so one frame announcing 2^31 elements aborts the whole process with
"memory allocation of ... bytes failed", which no Python code can catch. It also returns `None` for
an array the schema says is not nullable. This module checks, field by field, what the reader would
trust:

- every string, bytes and records length fits in the bytes that remain;
- every array announces no more elements than the remaining bytes could hold, counting each element
  at its smallest encoded size, so what the reader reserves is bounded by the frame's own size;
- nulls appear only where the schema allows them, and lengths below -1 not at all;
- varints end within 5 bytes, as Kafka's `ByteUtils.readUnsignedVarint` requires;
- every tagged field lies inside its announced size, and a known one fills it exactly.

The checkers are compiled once per schema class from the same dataclass metadata kio's writer uses
(`kafka_type`, `tag`, optionality), so they cannot drift from the schemas kio decodes with.
Everything else (UTF-8, booleans, unknown tags) is left to kio, whose errors the codec wraps.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import fields
from functools import cache
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from .errors import InvalidRequest

# (frame, position, end of the region the value must lie in) -> position after the value.
Checker = Callable[[bytes, int, int], int]

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT8 = struct.Struct(">b")

_FIXED_SIZES = {
    "int8": 1, "uint8": 1, "bool": 1,
    "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}
_MAX_VARINT_BYTES = 5


def check_request(frame: bytes, header_cls: type, body_cls: type) -> int:
    """Check a whole request frame (header then body); return the number of bytes they take."""
    end = len(frame)
    position = _entity_checker(header_cls)(frame, 0, end)
    return _entity_checker(body_cls)(frame, position, end)


def _fail(what: str, position: int) -> InvalidRequest:
    return InvalidRequest(f"{what} at byte {position}")


def _need(position: int, count: int, end: int, what: str) -> None:
    if count > end - position:
        raise _fail(f"{what} of {count} bytes runs past the end ({end - position} left)", position)


def _read_uvarint(frame: bytes, position: int, end: int) -> tuple[int, int]:
    value = 0
    shift = 0
    for index in range(_MAX_VARINT_BYTES):
        if position + index >= end:
            raise _fail("truncated varint", position)
        byte = frame[position + index]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position + index + 1
        shift += 7
    raise _fail("varint longer than 5 bytes", position)


@cache
def _fixed(size: int) -> Checker:
    def check(frame: bytes, position: int, end: int) -> int:
        if size > end - position:
            raise _fail(f"{size} bytes of values run past the end ({end - position} left)", position)
        return position + size

    return check


_FIXED_CHECKERS = frozenset(_fixed(size) for size in set(_FIXED_SIZES.values()))


def _compact_length(frame: bytes, position: int, end: int, nullable: bool, what: str) -> tuple[int, int]:
    """Length of a compact string/bytes/array (-1 for null) and the position after it."""
    if position < end and frame[position] < 0x80:  # the common one-byte varint, without the loop
        encoded, after = frame[position], position + 1
    else:
        encoded, after = _read_uvarint(frame, position, end)
    if encoded == 0:
        if not nullable:
            raise _fail(f"null {what} where the schema forbids it", position)
        return -1, after
    return encoded - 1, after


def _legacy_length(frame: bytes, position: int, end: int, nullable: bool, what: str, width: struct.Struct
                   ) -> tuple[int, int]:
    _need(position, width.size, end, f"{what} length")
    (length,) = width.unpack_from(frame, position)
    if length < -1 or (length == -1 and not nullable):
        raise _fail(f"{what} length {length} where the schema forbids it", position)
    return length, position + width.size


def _sized(flexible: bool, nullable: bool, legacy_width: struct.Struct, what: str) -> Checker:
    """Strings, bytes and records: a length, then that many bytes."""

    def check(frame: bytes, position: int, end: int) -> int:
        if flexible:
            length, position = _compact_length(frame, position, end, nullable, what)
        else:
            length, position = _legacy_length(frame, position, end, nullable, what, legacy_width)
        if length > end - position:
            raise _fail(f"{what} of {length} bytes runs past the end ({end - position} left)", position)
        return position + length if length > 0 else position

    return check


def _array(element: Checker, element_min_size: int, flexible: bool, nullable: bool, element_fixed: bool = False
           ) -> Checker:
    smallest = max(1, element_min_size)

    def check(frame: bytes, position: int, end: int) -> int:
        if flexible:
            count, position = _compact_length(frame, position, end, nullable, "array")
        else:
            count, position = _legacy_length(frame, position, end, nullable, "array", _INT32)
        if count > (end - position) // smallest:
            raise _fail(f"array of {count} elements cannot fit in {end - position} bytes", position)
        if element_fixed:
            return position + max(count, 0) * smallest
        for _ in range(count):
            position = element(frame, position, end)
        return position

    return check


def _nullable_entity(check_entity: Checker) -> Checker:
    """KIP-893 nullable struct: an int8 marker, negative for null."""

    def check(frame: bytes, position: int, end: int) -> int:
        _need(position, 1, end, "struct marker")
        (marker,) = _INT8.unpack_from(frame, position)
        if marker < 0:
            return position + 1
        return check_entity(frame, position + 1, end)

    return check


def _primitive(kafka_type: str, flexible: bool, nullable: bool) -> tuple[Checker, int]:
    """Checker and smallest encoded size of one primitive value."""
    size = _FIXED_SIZES.get(kafka_type)
    if size is not None:
        return _fixed(size), size
    if kafka_type == "string":
        return _sized(flexible, nullable, _INT16, "string"), 1 if flexible else 2
    if kafka_type in ("bytes", "records"):
        return _sized(flexible, nullable, _INT32, kafka_type), 1 if flexible else 4
    raise TypeError(f"kio schema type {kafka_type!r} has no bounds checker")


def _field_checker(field: Any, flexible: bool, is_request_header: bool, is_tag: bool) -> tuple[Checker, int]:
    """Checker and smallest encoded size of one field, following kio's reader choice for it."""
    if is_request_header and field.name == "client_id":
        # Kafka's RequestHeader keeps client_id a legacy nullable string even in flexible versions.
        return _sized(False, True, _INT16, "client id"), 2
    # kio reads tagged fields as non-nullable: a tag's presence is what makes it optional.
    nullable = False if is_tag else is_optional(field)
    match classify_field(field):
        case PrimitiveField():
            return _primitive(get_schema_field_type(field), flexible, nullable)
        case PrimitiveTupleField():
            element, element_size = _primitive(get_schema_field_type(field), flexible, False)
            array = _array(element, element_size, flexible, nullable, element in _FIXED_CHECKERS)
            return array, 1 if flexible else 4
        case EntityField(entity_type):
            if nullable:
                return _nullable_entity(_entity_checker(entity_type)), 1
            return _entity_checker(entity_type), _entity_min_size(entity_type)
        case EntityTupleField(entity_type):
            _steps, element_size, fixed_size = _entity_parts(entity_type)
            array = _array(_entity_checker(entity_type), element_size, flexible, nullable, fixed_size is not None)
            return array, 1 if flexible else 4
    raise TypeError(f"unclassifiable kio field {field.name}")


def _tagged_fields(known: dict[int, Checker]) -> Checker:
    def check(frame: bytes, position: int, end: int) -> int:
        if position < end and frame[position] == 0:  # nearly every request: no tagged fields
            return position + 1
        count, position = _read_uvarint(frame, position, end)
        if count > (end - position) // 2:  # a tag and its size take at least a byte each
            raise _fail(f"{count} tagged fields cannot fit in {end - position} bytes", position)
        for _ in range(count):
            tag, position = _read_uvarint(frame, position, end)
            size, position = _read_uvarint(frame, position, end)
            _need(position, size, end, f"tagged field {tag}")
            value_end = position + size
            value_checker = known.get(tag)
            if value_checker is not None and value_checker(frame, position, value_end) != value_end:
                raise _fail(f"tagged field {tag} does not fill its {size} bytes", position)
            position = value_end
        return position

    return check


@cache
def _entity_parts(entity_type: type) -> tuple[tuple[Checker, ...], int, int | None]:
    """(checkers of the fields in order, smallest encoded size, size if every value is fixed-size).

    Runs of fixed-size fields are merged into one step: most of a Fetch or Produce request is such
    runs, and one length check per run keeps the guard's cost per request low.
    """
    flexible: bool = entity_type.__flexible__  # type: ignore[attr-defined]
    is_request_header = entity_type.__name__ == "RequestHeader"
    steps: list[Checker] = []
    tagged: dict[int, Checker] = {}
    min_size = 0
    fixed_run = 0
    all_fixed = not flexible
    for field in fields(entity_type):  # type: ignore[arg-type]
        tag = get_field_tag(field)
        checker, size = _field_checker(field, flexible, is_request_header, tag is not None)
        if tag is not None:
            tagged[int(tag)] = checker
            continue
        min_size += size
        if checker in _FIXED_CHECKERS:
            fixed_run += size
            continue
        all_fixed = False
        if fixed_run:
            steps.append(_fixed(fixed_run))
            fixed_run = 0
        steps.append(checker)
    if fixed_run:
        steps.append(_fixed(fixed_run))
    if flexible:
        steps.append(_tagged_fields(tagged))
        min_size += 1
    return tuple(steps), min_size, min_size if all_fixed else None


def _entity_min_size(entity_type: type) -> int:
    return _entity_parts(entity_type)[1]


@cache
def _entity_checker(entity_type: type) -> Checker:
    steps, _min_size, _fixed_size = _entity_parts(entity_type)
    if len(steps) == 1:
        return steps[0]

    def check(frame: bytes, position: int, end: int) -> int:
        for step in steps:
            position = step(frame, position, end)
        return position

    return check
