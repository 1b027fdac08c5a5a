"""Compiled writers for kio entities: the same bytes as kio's serializer, at a fraction of its cost.

kio's `entity_writer` walks each entity through one closure per field, writes every value to a BytesIO
through `struct.pack`, and re-validates each length it computes against its phantom integer types; for
a Produce response that is about a third of the request's handling. Here the schema is still kio's:
the same field metadata (`kafka_type`, tags, flexibility, nullability) is read through kio's own
introspection, and from it one Python function per entity class is generated that appends straight
to a bytearray. Nothing of a message's shape is written by hand.

`tests/unit/protocol/test_encoder.py` checks the output byte for byte against kio's writer for every
request and response class of every version kio has, on values Hypothesis draws from kio's types.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable
from dataclasses import MISSING, Field, fields
from functools import cache
from typing import Any

from kio.serial._implicit_defaults import get_tagged_field_default
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
from kio.serial.errors import OutOfBoundValue
from minikafka.protocol.primitives import write_uvarint
from minikafka.protocol.regions import FileRegion

Writer = Callable[[bytearray, Any], None]

# Record sets at least this big are not copied into a frame being built (below: FrameBuffer).
SPILL_MIN_BYTES = 4096
# Encoded bytes of the entities of one class `remember_encoding` keeps, oldest forgotten first.
REMEMBERED_BYTES_PER_CLASS = 4 * 1024 * 1024


class FrameBuffer(bytearray):
    """A frame being encoded whose big record sets stay where they are: each is kept by reference at its
    place in the frame instead of being copied in. A Fetch response is mostly record bytes read from the
    log; copying them into the frame and the frame into a bytes object cost half of a Fetch's CPU.

    Only immutable `bytes` and file regions (protocol/regions.py) are kept aside, so what is sent is what
    was encoded."""

    __slots__ = ("has_regions", "spilled")

    def __init__(self, prefix: bytes = b"") -> None:
        super().__init__(prefix)
        # (position in this buffer, the record set that goes there)
        self.spilled: list[tuple[int, bytes | FileRegion]] = []
        self.has_regions = False

    def spill(self, data: bytes | FileRegion) -> None:
        self.spilled.append((len(self), data))
        if type(data) is FileRegion:
            self.has_regions = True

    @property
    def frame_size(self) -> int:
        """Bytes of the whole frame: this buffer's and those kept aside."""
        if not self.spilled:
            return len(self)  # every answer but a big Fetch's: no generator to set up
        return len(self) + sum(len(data) for _position, data in self.spilled)

    def parts(self) -> list[bytes | memoryview | FileRegion]:
        """The frame as buffers and file regions to send in order (one buffer when nothing was kept aside)."""
        if not self.spilled:
            return [self]  # type: ignore[list-item]  # a bytearray: sent as it is
        view = memoryview(self)
        parts: list[bytes | memoryview | FileRegion] = []
        start = 0
        for position, data in self.spilled:
            if position > start:
                parts.append(view[start:position])
            parts.append(data)
            start = position
        if start < len(self):
            parts.append(view[start:])
        return parts

_INT = {
    "int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q", "uint8": ">B", "uint16": ">H", "uint32": ">I",
    "uint64": ">Q", "float64": ">d", "bool": ">?",
}
_ZERO_UUID = bytes(16)


def _legacy_length16(length: int) -> int:
    if length > 0x7FFF:
        raise OutOfBoundValue(f"String is too long for legacy string format ({length} > 32767)")
    return length


def _legacy_length32(length: int, what: str) -> int:
    if length > 0x7FFFFFFF:
        raise OutOfBoundValue(f"{what} is too long for legacy format ({length} > 2147483647)")
    return length


def _refuse_none() -> None:
    raise TypeError("Unexpectedly received None value")  # kio's message for a null where none is allowed


class _Source:
    """The generated function's text and the names it closes over."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names: dict[str, Any] = {
            "_uvarint": write_uvarint, "_legacy_length16": _legacy_length16, "_legacy_length32": _legacy_length32,
            "_refuse_none": _refuse_none, "_ZERO_UUID": _ZERO_UUID, "_MISSING": MISSING,
            "_FrameBuffer": FrameBuffer, "_SPILL_MIN": SPILL_MIN_BYTES, "_FileRegion": FileRegion,
        }
        self._counter = 0

    def name(self, value: Any, hint: str) -> str:
        self._counter += 1
        name = f"_{hint}_{self._counter}"
        self.names[name] = value
        return name

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)


def _emit_uvarint(src: _Source, indent: int, out: str, expression: str) -> None:
    """Append the code writing an unsigned varint; the one-byte case (nearly every length) without a call."""
    src.emit(indent, f"_n = {expression}")
    src.emit(indent, f"if _n < 128: {out}.append(_n)")
    src.emit(indent, f"else: _uvarint({out}, _n)")


def _emit_primitive(src: _Source, indent: int, out: str, value: str, kafka_type: str, flexible: bool,
                    optional: bool) -> None:
    """Append the code writing one primitive `value` (an expression) to `out`, as kio's get_writer would."""
    pack = _INT.get(kafka_type)
    if pack is not None:
        src.emit(indent, f"{out} += {src.name(struct.Struct(pack).pack, 'pack')}({value})")
        return
    match kafka_type:
        case "error_code":
            # ErrorCode is an IntEnum: packed as the int it is, without the enum's `value` property (two
            # Python calls per error code written).
            src.emit(indent, f"{out} += {src.name(struct.Struct('>h').pack, 'pack')}({value})")
        case "timedelta_i32":
            src.emit(indent, f"{out} += {src.name(struct.Struct('>i').pack, 'pack')}"
                             f"(round({value}.total_seconds() * 1000))")
        case "timedelta_i64":
            src.emit(indent, f"{out} += {src.name(struct.Struct('>q').pack, 'pack')}"
                             f"(round({value}.total_seconds() * 1000))")
        case "datetime_i64":
            pack_q = src.name(struct.Struct(">q").pack, "pack")
            if optional:
                src.emit(indent, f"{out} += {pack_q}(-1 if {value} is None else round({value}.timestamp() * 1000))")
            else:
                src.emit(indent, f"{out} += {pack_q}(round({value}.timestamp() * 1000))")
        case "uuid":
            src.emit(indent, f"{out} += _ZERO_UUID if {value} is None else {value}.bytes")
        case "string" | "bytes" | "records":
            _emit_string(src, indent, out, value, kafka_type, flexible, optional)
        case _:
            raise NotImplementedError(f"no writer for {kafka_type!r} ({flexible=}, {optional=})")


def _emit_string(src: _Source, indent: int, out: str, value: str, kafka_type: str, flexible: bool,
                 optional: bool) -> None:
    data = f"_d{indent}"
    if flexible:
        null = f"{out}.append(0)"
    else:
        pack = src.name(struct.Struct(">h" if kafka_type == "string" else ">i").pack, "pack")
        null = f"{out} += {pack}(-1)"
    if optional:
        src.emit(indent, f"if {value} is None:")
        src.emit(indent + 1, null)
        src.emit(indent, "else:")
        indent += 1
    else:
        src.emit(indent, f"if {value} is None: _refuse_none()")
    if flexible:
        src.emit(indent, f"{data} = {value}.encode() if isinstance({value}, str) else {value}")
        _emit_uvarint(src, indent, out, f"len({data}) + 1")
        _emit_blob(src, indent, out, data, kafka_type)
    elif kafka_type == "string":
        src.emit(indent, f"{data} = {value}.encode()")
        src.emit(indent, f"{out} += {pack}(_legacy_length16(len({data})))")
        src.emit(indent, f"{out} += {data}")
    else:
        src.emit(indent, f"{out} += {pack}(_legacy_length32(len({value}), 'Bytes'))")
        _emit_blob(src, indent, out, value, kafka_type)


def _emit_blob(src: _Source, indent: int, out: str, data: str, kafka_type: str) -> None:
    """Append the code writing a string's or byte field's bytes after its length; big record sets are
    kept aside when `out` is a FrameBuffer."""
    if kafka_type != "records":
        src.emit(indent, f"{out} += {data}")
        return
    src.emit(indent, f"if type({out}) is _FrameBuffer and (type({data}) is bytes and len({data}) >= _SPILL_MIN"
                     f" or type({data}) is _FileRegion):")
    src.emit(indent + 1, f"{out}.spill({data})")
    src.emit(indent, f"elif type({data}) is _FileRegion:")
    src.emit(indent + 1, f"{out} += {data}.read()")
    src.emit(indent, "else:")
    src.emit(indent + 1, f"{out} += {data}")


def _emit_field(src: _Source, indent: int, out: str, value: str, field: Field[Any], flexible: bool,
                is_tag: bool) -> None:
    """Append the code writing one field's `value`, as kio's get_field_writer would."""
    optional = False if is_tag else is_optional(field)
    field_class = classify_field(field)
    item = f"_i{indent}"
    if field_class.is_array:
        if flexible:
            src.emit(indent, f"if {value} is None:")
            src.emit(indent + 1, f"{out}.append(0)")
            src.emit(indent, "else:")
            _emit_uvarint(src, indent + 1, out, f"len({value}) + 1")
        else:
            pack_i = src.name(struct.Struct(">i").pack, "pack")
            src.emit(indent, f"if {value} is None:")
            src.emit(indent + 1, f"{out} += {pack_i}(-1)")
            src.emit(indent, "else:")
            src.emit(indent + 1, f"{out} += {pack_i}(_legacy_length32(len({value}), 'Sequence'))")
        src.emit(indent + 1, f"for {item} in {value}:")
        match field_class:
            case PrimitiveTupleField():
                _emit_primitive(src, indent + 2, out, item, get_schema_field_type(field), flexible, False)
            case EntityTupleField(entity_type):
                src.emit(indent + 2, f"{src.name(writer_for(entity_type), 'write')}({out}, {item})")
        return
    match field_class:
        case PrimitiveField():
            _emit_primitive(src, indent, out, value, get_schema_field_type(field), flexible, optional)
        case EntityField(entity_type):
            write = src.name(writer_for(entity_type), "write")
            if optional:
                # KIP-893 nullable structs: an int8 marker, -1 for null, 1 before a value.
                src.emit(indent, f"if {value} is None:")
                src.emit(indent + 1, f"{out} += b'\\xff'")
                src.emit(indent, "else:")
                src.emit(indent + 1, f"{out} += b'\\x01'")
                src.emit(indent + 1, f"{write}({out}, {value})")
            else:
                src.emit(indent, f"{write}({out}, {value})")


class _Remembered:
    """Entities of one class written from the encoding they had when remembered, by identity. Each is kept
    alive here with its bytes, so its id cannot be reused by another object while it is remembered."""

    def __init__(self) -> None:
        self.by_id: dict[int, tuple[Any, bytes]] = {}
        self.size = 0


# One per entity class, made with its writer, which reads it: a class never remembered pays one truth test.
_remembered: dict[type, _Remembered] = {}
# The in-process brokers of `minikafka.testing` may encode on several threads at once.
_remembering = threading.Lock()


def _remembered_of(entity_type: Any) -> _Remembered:
    with _remembering:
        return _remembered.setdefault(entity_type, _Remembered())


def remember_encoding(entity: Any) -> Any:
    """Write `entity` from now on from the bytes it encodes to now; returns `entity`. For immutable
    entities answered again and again (an ApiVersions answer, a Metadata topic entry), where encoding
    them each time is most of the answer's cost. At most REMEMBERED_BYTES_PER_CLASS per class."""
    entity_type: Any = type(entity)
    kept = _remembered_of(entity_type)
    if id(entity) in kept.by_id:
        return entity
    out = bytearray()
    writer_for(entity_type)(out, entity)
    encoded = bytes(out)
    with _remembering:
        if id(entity) not in kept.by_id:
            while kept.by_id and kept.size + len(encoded) > REMEMBERED_BYTES_PER_CLASS:
                _oldest, oldest_bytes = kept.by_id.pop(next(iter(kept.by_id)))
                kept.size -= len(oldest_bytes)
            kept.by_id[id(entity)] = (entity, encoded)
            kept.size += len(encoded)
    return entity


def forget_encoding(entity: Any) -> None:
    """Encode `entity` again from now on, and let go of it (a remembered one that is no longer answered)."""
    kept = _remembered.get(type(entity))
    if kept is None:
        return
    with _remembering:
        forgotten = kept.by_id.get(id(entity))
        if forgotten is not None and forgotten[0] is entity:
            del kept.by_id[id(entity)]
            kept.size -= len(forgotten[1])


@cache
def writer_for(entity_type: Any) -> Writer:
    """The compiled writer of one kio entity class (not nullable: nullable fields are handled by their parent)."""
    if entity_type.__name__ == "RequestHeader":
        raise ValueError("request headers have kio's client_id exception; encode them with kio")
    src = _Source()
    flexible = bool(entity_type.__flexible__)
    src.emit(0, "def write(out, entity):")
    remembered = src.name(_remembered_of(entity_type).by_id, "remembered")
    src.emit(1, f"if {remembered}:")
    src.emit(2, f"_kept = {remembered}.get(id(entity))")
    src.emit(2, "if _kept is not None and _kept[0] is entity:")
    src.emit(3, "out += _kept[1]")
    src.emit(3, "return")
    tagged: list[tuple[Any, Field[Any]]] = []
    run: list[tuple[str, str]] = []  # consecutive fixed-size fields: written with one struct
    for field in fields(entity_type):
        tag = get_field_tag(field)
        if tag is not None:
            tagged.append((tag, field))
            continue
        fixed = _fixed_size(field)
        if fixed is not None:
            form, template = fixed
            if template.count("{v}") == 1:
                run.append((form, template.format(v=f"entity.{field.name}")))
            else:
                held = f"_a{len(run)}"
                src.emit(1, f"{held} = entity.{field.name}")
                run.append((form, template.format(v=held)))
            continue
        _emit_fixed_run(src, run)
        src.emit(1, f"_v = entity.{field.name}")
        _emit_field(src, 1, "out", "_v", field, flexible, is_tag=False)
    _emit_fixed_run(src, run)
    if flexible:
        if not tagged:
            src.emit(1, "out.append(0)")
        else:
            _emit_tagged_fields(src, sorted(tagged, key=lambda pair: pair[0]), flexible)
    namespace = dict(src.names)
    exec(compile("\n".join(src.lines), f"<minikafka writer {entity_type.__module__}.{entity_type.__qualname__}>",
                 "exec"), namespace)
    write: Writer = namespace["write"]
    return write


def _fixed_size(field: Field[Any]) -> tuple[str, str] | None:
    """(struct format, value expression around `{v}`) of a field of fixed size, or None: such fields in a
    row are written with one `struct.pack`, which costs about what one field's did."""
    field_class = classify_field(field)
    if field_class.is_array or not isinstance(field_class, PrimitiveField):
        return None
    kafka_type = get_schema_field_type(field)
    pack = _INT.get(kafka_type)
    if pack is not None:
        return pack[1:], "{v}"
    match kafka_type:
        case "error_code":
            return "h", "{v}"  # an IntEnum, packed as the int it is
        case "timedelta_i32":
            return "i", "round({v}.total_seconds() * 1000)"
        case "timedelta_i64":
            return "q", "round({v}.total_seconds() * 1000)"
        case "datetime_i64":
            if is_optional(field):
                return "q", "-1 if {v} is None else round({v}.timestamp() * 1000)"
            return "q", "round({v}.timestamp() * 1000)"
        case "uuid":
            return "16s", "_ZERO_UUID if {v} is None else {v}.bytes"
    return None


def _emit_fixed_run(src: _Source, run: list[tuple[str, str]]) -> None:
    """Write the fixed-size fields gathered in `run` with one pack, and empty it."""
    if not run:
        return
    pack = src.name(struct.Struct(">" + "".join(form for form, _value in run)).pack, "pack")
    src.emit(1, f"out += {pack}({', '.join(value for _form, value in run)})")
    run.clear()


def _emit_tagged_fields(src: _Source, tagged: list[tuple[Any, Field[Any]]], flexible: bool) -> None:
    """As kio: a tagged field equal to its default (or, with none, its implicit default) is left out. Each
    present one is encoded into a buffer of its own, since its size comes before it; when none is (most
    answers), one zero byte."""
    present = []
    for number, (_tag, field) in enumerate(tagged):
        default = field.default
        compared = get_tagged_field_default(field) if default is MISSING else default
        name = src.name(compared, "default")
        # Identity first: a field left at its default holds the very object (not for floats: NaN != NaN).
        same = "" if isinstance(compared, float) else f"_v is {name} or "
        absent = f"{same}_v == _MISSING or _v == {name}" if default is MISSING else f"{same}_v == {name}"
        buffer = f"_t{number}"
        present.append(buffer)
        src.emit(1, f"{buffer} = None")
        src.emit(1, f"_v = entity.{field.name}")
        src.emit(1, f"if not ({absent}):")
        src.emit(2, f"{buffer} = bytearray()")
        _emit_field(src, 2, buffer, "_v", field, flexible, is_tag=True)
    src.emit(1, f"if {' and '.join(f'{buffer} is None' for buffer in present)}:")
    src.emit(2, "out.append(0)")
    src.emit(1, "else:")
    src.emit(2, f"_uvarint(out, {' + '.join(f'({buffer} is not None)' for buffer in present)})")
    for (tag, _field), buffer in zip(tagged, present, strict=True):
        src.emit(2, f"if {buffer} is not None:")
        src.emit(3, f"_uvarint(out, {tag})")
        src.emit(3, f"_uvarint(out, len({buffer}))")
        src.emit(3, f"out += {buffer}")


def encode_entity(entity: Any) -> bytes:
    out = bytearray()
    entity_type: Any = type(entity)
    writer_for(entity_type)(out, entity)
    return bytes(out)
