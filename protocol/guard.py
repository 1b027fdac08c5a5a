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

The checkers are generated once per schema class, as straight-line Python source, from the same
dataclass metadata kio's writer uses (`kafka_type`, `tag`, optionality), so they cannot drift from
the schemas kio decodes with. Generated code costs about a third of a closure per field, which
matters: this runs on every request. Everything else (UTF-8, booleans, unknown tags) is left to kio,
whose errors the codec wraps.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable
from dataclasses import dataclass, fields
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
from minikafka.protocol.errors import InvalidRequest

# (frame, position, end of the region the value must lie in, elements seen so far in this request)
# -> position after the value. The count is a one-item list each request brings, not shared state: the
# in-process brokers of `minikafka.testing` may decode on several threads at once.
Checker = Callable[[bytes | bytearray, int, int, list[int]], int]

# Array elements a whole request may announce. Each costs a Python object once kio decodes it (50-100
# bytes), so without a cap a 100 MiB frame of empty Metadata topic names would take gigabytes. Real
# requests stay far below: a consumer fetching 10,000 partitions sends about 10,000 elements.
MAX_ARRAY_ELEMENTS_PER_REQUEST = 1_000_000

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")

_FIXED_SIZES = {
    "int8": 1, "uint8": 1, "bool": 1,
    "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}
_MAX_VARINT_BYTES = 5


def check_request(frame: bytes | bytearray, header_cls: type, body_cls: type) -> int:
    """Check a whole request frame (header then body); return the number of bytes they take."""
    end = len(frame)
    elements = [0]
    position = _entity(header_cls).check(frame, 0, end, elements)
    return _entity(body_cls).check(frame, position, end, elements)


def prepare(entity_type: type) -> None:
    """Compile the checker of a schema class (and of the entities nested in it) now rather than on first use."""
    _entity(entity_type)


def _fail(what: str, position: int) -> InvalidRequest:
    return InvalidRequest(f"{what} at byte {position}")


def _read_uvarint(frame: bytes | bytearray, position: int, end: int) -> tuple[int, int]:
    if end - position >= 3:
        # Two and three bytes (lengths up to 2 MiB: a producer's record sets) without the loop's checks.
        first, second = frame[position], frame[position + 1]
        if first < 0x80:
            return first, position + 1
        if second < 0x80:
            return (first & 0x7F) | (second << 7), position + 2
        third = frame[position + 2]
        if third < 0x80:
            return (first & 0x7F) | ((second & 0x7F) << 7) | (third << 14), position + 3
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


def _check_tagged_fields(frame: bytes | bytearray, position: int, end: int, elements: list[int],
                         known: dict[int, Checker]) -> int:
    count, position = _read_uvarint(frame, position, end)
    if count > (end - position) // 2:  # a tag and its size take at least a byte each
        raise _fail(f"{count} tagged fields cannot fit in {end - position} bytes", position)
    for _ in range(count):
        tag, position = _read_uvarint(frame, position, end)
        size, position = _read_uvarint(frame, position, end)
        if size > end - position:
            raise _fail(f"tagged field {tag} of {size} bytes runs past the end ({end - position} left)", position)
        value_end = position + size
        value_checker = known.get(tag)
        if value_checker is not None and value_checker(frame, position, value_end, elements) != value_end:
            raise _fail(f"tagged field {tag} does not fill its {size} bytes", position)
        position = value_end
    return position


# ------------------------------------------------------------------------------------ code generation
# Generated checkers see `frame`, the position `p` and the region's `end`, and these helpers:
_NAMESPACE: dict[str, Any] = {
    "_fail": _fail, "_uvarint": _read_uvarint, "_tags": _check_tagged_fields,
    "_i16": _INT16.unpack_from, "_i32": _INT32.unpack_from, "_MAX_ELEMENTS": MAX_ARRAY_ELEMENTS_PER_REQUEST,
}


_REFERENCE_NUMBERS = itertools.count()


def _bind(value: Any) -> str:
    """Name under which generated code reaches `value` (a sub-checker or a tag table)."""
    name = f"_ref{next(_REFERENCE_NUMBERS)}"
    _NAMESPACE[name] = value
    return name


def _compile(name: str, lines: list[str]) -> Checker:
    source = "\n".join([f"def {name}(frame, p, end, seen):", *(f"    {line}" for line in lines), "    return p"])
    exec(compile(source, f"<guard {name}>", "exec"), _NAMESPACE)  # our own source, built from kio's schema metadata
    checker: Checker = _NAMESPACE.pop(name)
    return checker


def _fixed_lines(size: int) -> list[str]:
    return [f"if p + {size} > end: raise _fail('{size} bytes of values run past the end', p)",
            f"p += {size}"]


def _length_lines(variable: str, flexible: bool, nullable: bool, width: int, what: str) -> list[str]:
    """Read a length into `variable`, -1 for null; reject a null or negative length the schema forbids."""
    if flexible:
        lines = ["if p < end and frame[p] < 128:",
                 f"    {variable} = frame[p] - 1",
                 "    p += 1",
                 "else:",
                 f"    {variable}, p = _uvarint(frame, p, end)",
                 f"    {variable} -= 1"]
    else:
        unpack = "_i16" if width == 2 else "_i32"
        lines = [f"if p + {width} > end: raise _fail('truncated {what} length', p)",
                 f"{variable} = {unpack}(frame, p)[0]",
                 f"p += {width}"]
    lowest = -1 if nullable else 0
    lines.append(f"if {variable} < {lowest}: "
                 f"raise _fail(f'{what} length {{{variable}}} where the schema forbids it', p)")
    return lines


def _sized_lines(flexible: bool, nullable: bool, width: int, what: str) -> list[str]:
    """Strings, bytes and records: a length, then that many bytes."""
    return [*_length_lines("n", flexible, nullable, width, what),
            f"if n > end - p: raise _fail(f'{what} of {{n}} bytes runs past the end ({{end - p}} left)', p)",
            "if n > 0: p += n"]


@dataclass(frozen=True, slots=True)
class _Plan:
    """How one field or entity is checked: generated lines, smallest size, and its size if fixed."""

    lines: list[str]
    min_size: int
    fixed_size: int | None = None


def _primitive(kafka_type: str, flexible: bool, nullable: bool) -> _Plan:
    size = _FIXED_SIZES.get(kafka_type)
    if size is not None:
        return _Plan(_fixed_lines(size), size, size)
    if kafka_type == "string":
        return _Plan(_sized_lines(flexible, nullable, 2, "string"), 1 if flexible else 2)
    if kafka_type in ("bytes", "records"):
        return _Plan(_sized_lines(flexible, nullable, 4, kafka_type), 1 if flexible else 4)
    raise TypeError(f"kio schema type {kafka_type!r} has no bounds checker")


def _array(element: _Plan, element_checker: str, flexible: bool, nullable: bool) -> _Plan:
    smallest = max(1, element.min_size)
    lines = [*_length_lines("c", flexible, nullable, 4, "array"),
             f"if c > (end - p) // {smallest}: "
             "raise _fail(f'array of {c} elements cannot fit in {end - p} bytes', p)",
             "if c > 0:",
             "    seen[0] += c",
             "    if seen[0] > _MAX_ELEMENTS: "
             "raise _fail(f'more than {_MAX_ELEMENTS} array elements in one request', p)"]
    if element.fixed_size is not None:
        lines.append(f"if c > 0: p += c * {element.fixed_size}")
    else:
        lines.append(f"for _ in range(c): p = {element_checker}(frame, p, end, seen)")
    return _Plan(lines, 1 if flexible else 4)


def _field(field: Any, flexible: bool, is_request_header: bool, is_tag: bool) -> _Plan:
    """The plan of one field, following kio's reader choice for it."""
    if is_request_header and field.name == "client_id":
        # Kafka's RequestHeader keeps client_id a legacy nullable string even in flexible versions.
        return _Plan(_sized_lines(False, True, 2, "client id"), 2)
    # kio reads tagged fields as non-nullable: a tag's presence is what makes it optional.
    nullable = False if is_tag else is_optional(field)
    match classify_field(field):
        case PrimitiveField():
            return _primitive(get_schema_field_type(field), flexible, nullable)
        case PrimitiveTupleField():
            element = _primitive(get_schema_field_type(field), flexible, False)
            name = "" if element.fixed_size is not None else _bind(_compile("element", element.lines))
            return _array(element, name, flexible, nullable)
        case EntityField(entity_type):
            entity = _entity(entity_type)
            if nullable:  # KIP-893 nullable struct: an int8 marker, negative for null
                return _Plan(["if p >= end: raise _fail('truncated struct marker', p)",
                              f"p = p + 1 if frame[p] >= 128 else {_bind(entity.check)}(frame, p + 1, end, seen)"], 1)
            if entity.fixed_size is not None:
                return _Plan(_fixed_lines(entity.fixed_size), entity.min_size, entity.fixed_size)
            return _Plan([f"p = {_bind(entity.check)}(frame, p, end, seen)"], entity.min_size)
        case EntityTupleField(entity_type):
            entity = _entity(entity_type)
            return _array(_Plan([], entity.min_size, entity.fixed_size), _bind(entity.check), flexible, nullable)
    raise TypeError(f"unclassifiable kio field {field.name}")


@dataclass(frozen=True, slots=True)
class _Entity:
    check: Checker
    min_size: int
    fixed_size: int | None


@cache
def _entity(entity_type: type) -> _Entity:
    """The generated checker of one schema class. Runs of fixed-size fields share one bounds check."""
    flexible: bool = entity_type.__flexible__  # type: ignore[attr-defined]
    is_request_header = entity_type.__name__ == "RequestHeader"
    lines: list[str] = []
    tagged: dict[int, Checker] = {}
    min_size = 0
    fixed_run = 0
    all_fixed = not flexible
    for field in fields(entity_type):  # type: ignore[arg-type]
        tag = get_field_tag(field)
        plan = _field(field, flexible, is_request_header, tag is not None)
        if tag is not None:
            tagged[int(tag)] = _compile("tagged", plan.lines)
            continue
        min_size += plan.min_size
        if plan.fixed_size is not None:
            fixed_run += plan.fixed_size
            continue
        all_fixed = False
        if fixed_run:
            lines += _fixed_lines(fixed_run)
            fixed_run = 0
        lines += plan.lines
    if fixed_run:
        lines += _fixed_lines(fixed_run)
    if flexible:
        min_size += 1
        lines += ["if p < end and frame[p] == 0: p += 1",  # nearly every request: no tagged fields
                  f"else: p = _tags(frame, p, end, seen, {_bind(tagged)})"]
    check = _compile(f"check_{entity_type.__name__}", lines)
    return _Entity(check, min_size, min_size if all_fixed else None)
