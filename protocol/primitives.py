"""Kafka's primitive types, big-endian, read from and written to bytes outside kio's schemas.

For the formats kio does not cover (`__consumer_offsets` and `__transaction_state` records, the
embedded consumer protocol, producer snapshots, records inside a batch) and for the tools that take
frames apart. The varints are Kafka's `ByteUtils`:

- uvarint: an unsigned 32-bit value, 7 bits a byte, low bits first, at most 5 bytes
  (`readUnsignedVarint`); what the lengths of the flexible versions use (length + 1, 0 = null);
- varint: a signed 32-bit value, zigzag-mapped (0, -1, 1, -2 ... -> 0, 1, 2, 3 ...) then a uvarint;
- uvarlong / varlong: the same over 64 bits, at most 10 bytes.

`Reader` raises one error for every malformed input (running past the end, an overlong varint, a
string that is not UTF-8, a null where none is allowed): `Truncated`, a `CorruptRecord`, unless the
caller names its own (callers whose callers catch a domain exception today). The module-level
functions are the same varints for hot loops that keep a position of their own (records.py,
encoder.py).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Mapping

from minikafka.protocol.errors import CorruptRecord

__all__ = [
    "Reader",
    "Truncated",
    "Writer",
    "read_uvarint",
    "read_uvarlong",
    "read_varint",
    "read_varlong",
    "write_uvarint",
    "write_uvarlong",
    "write_varint",
    "write_varlong",
]

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")

_MAX_VARINT_BYTES = 5
_MAX_VARLONG_BYTES = 10
_U32_MASK = 0xFFFFFFFF
_U64_MASK = 0xFFFFFFFFFFFFFFFF
_INT16_MAX = 0x7FFF
_INT32_MAX = 0x7FFFFFFF


class Truncated(CorruptRecord):
    """Bytes that are not the Kafka types read from them; mostly input that ends too soon."""


# --- varints at a position (hot paths) -----------------------------------------------------------


def write_uvarint(out: bytearray, value: int) -> None:
    """Kafka's writeUnsignedVarint (and writeUnsignedVarlong: the loop is the same); `value` >= 0."""
    if value < 0x80:  # nearly every length: one byte without the loop
        out.append(value)
        return
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


write_uvarlong = write_uvarint


def write_varint(out: bytearray, value: int) -> None:
    """Kafka's writeVarint: `value` zigzag-mapped over 32 bits."""
    write_uvarint(out, ((value << 1) ^ (value >> 31)) & _U32_MASK)


def write_varlong(out: bytearray, value: int) -> None:
    """Kafka's writeVarlong: `value` zigzag-mapped over 64 bits."""
    value = (value << 1) ^ (value >> 63)
    if 0 <= value < 0x80:  # -64..63: the deltas, lengths and -1 nulls of records, nearly every call
        out.append(value)
        return
    value &= _U64_MASK
    while value >= 0x80:  # the loop again rather than a call: records.py writes every field through here
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _read_unsigned(buf: bytes | bytearray | memoryview, pos: int, max_bytes: int) -> tuple[int, int]:
    """(value, position after it) of an unsigned varint of at most `max_bytes` bytes at `pos`."""
    value = shift = 0
    end = min(len(buf), pos + max_bytes)
    while pos < end:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    if pos >= len(buf):
        raise Truncated("varint runs past the end of the input")
    raise Truncated(f"varint longer than {max_bytes} bytes")


def read_uvarint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Kafka's readUnsignedVarint: (value as an unsigned 32-bit int, position after it)."""
    try:
        first = buf[pos]
        if first < 0x80:  # nearly every length and count
            return first, pos + 1
    except IndexError:
        raise Truncated("varint runs past the end of the input") from None
    value, pos = _read_unsigned(buf, pos, _MAX_VARINT_BYTES)
    return value & _U32_MASK, pos


def read_uvarlong(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Kafka's readUnsignedVarlong: (value as an unsigned 64-bit int, position after it)."""
    value, pos = _read_unsigned(buf, pos, _MAX_VARLONG_BYTES)
    return value & _U64_MASK, pos


def read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Kafka's readVarint: (a signed 32-bit value, position after it)."""
    raw, pos = read_uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Kafka's readVarlong: (a signed 64-bit value, position after it)."""
    try:
        first = buf[pos]
        if first < 0x80:  # one and two bytes (every length and delta of a record under 8 KiB) inline
            return (first >> 1) ^ -(first & 1), pos + 1
        second = buf[pos + 1]
        if second < 0x80:
            raw = (first & 0x7F) | (second << 7)
            return (raw >> 1) ^ -(raw & 1), pos + 2
    except IndexError:
        raise Truncated("varint runs past the end of the input") from None
    raw, pos = _read_unsigned(buf, pos, _MAX_VARLONG_BYTES)
    raw &= _U64_MASK
    return (raw >> 1) ^ -(raw & 1), pos


# --- Reader --------------------------------------------------------------------------------------


class Reader:
    """Kafka types read one after another from `data`, starting at `pos`.

    Every malformed input raises `error("<what> ...")`: `Truncated` unless the caller names its own
    exception; `what` names the input in the messages ("__consumer_offsets record is truncated").
    """

    __slots__ = ("_error", "_size", "data", "pos", "what")

    def __init__(self, data: bytes, pos: int = 0, *, what: str = "input",
                 error: Callable[[str], Exception] = Truncated) -> None:
        self.data = data
        self.pos = pos
        self.what = what
        self._size = len(data)
        self._error = error

    @property
    def remaining(self) -> int:
        return self._size - self.pos

    def malformed(self, why: str) -> Exception:
        """The error this reader raises, for a caller's own checks (raise it)."""
        return self._error(f"{self.what} {why}")

    def _fixed(self, form: struct.Struct) -> int:
        pos = self.pos
        end = pos + form.size
        if end > self._size:
            raise self.malformed("is truncated")
        self.pos = end
        return int(form.unpack_from(self.data, pos)[0])

    def int8(self) -> int:
        return self._fixed(_I8)

    def int16(self) -> int:
        return self._fixed(_I16)

    def int32(self) -> int:
        return self._fixed(_I32)

    def int64(self) -> int:
        return self._fixed(_I64)

    def uint32(self) -> int:
        return self._fixed(_U32)

    def _varying(self, read: Callable[[bytes, int], tuple[int, int]], max_bytes: int) -> int:
        try:
            value, self.pos = read(self.data, self.pos)
        except Truncated:
            # Every byte left had its continuation bit: the input ended, or the varint is too long.
            raise self.malformed("is truncated" if self.remaining < max_bytes
                                 else f"has a varint longer than {max_bytes} bytes") from None
        return value

    def uvarint(self) -> int:
        return self._varying(read_uvarint, _MAX_VARINT_BYTES)

    def varint(self) -> int:
        return self._varying(read_varint, _MAX_VARINT_BYTES)

    def uvarlong(self) -> int:
        return self._varying(read_uvarlong, _MAX_VARLONG_BYTES)

    def varlong(self) -> int:
        return self._varying(read_varlong, _MAX_VARLONG_BYTES)

    def raw(self, size: int) -> bytes:
        """The next `size` bytes."""
        pos = self.pos
        if size < 0 or size > self._size - pos:
            raise self.malformed("is truncated")
        self.pos = pos + size
        return self.data[pos : pos + size]

    def skip(self, size: int) -> None:
        self.raw(size)

    def _text(self, size: int) -> str | None:
        if size < 0:
            return None
        try:
            return self.raw(size).decode()
        except UnicodeDecodeError:
            raise self.malformed("has a string that is not UTF-8") from None

    def _not_null(self, value: str | None) -> str:
        if value is None:
            raise self.malformed("has a null string in a non-nullable field")
        return value

    def nullable_string(self) -> str | None:
        """int16 length (-1 = null), UTF-8."""
        return self._text(self.int16())

    def string(self) -> str:
        return self._not_null(self.nullable_string())

    def compact_nullable_string(self) -> str | None:
        """uvarint length + 1 (0 = null), UTF-8."""
        return self._text(self.uvarint() - 1)

    def compact_string(self) -> str:
        return self._not_null(self.compact_nullable_string())

    def nullable_bytes(self) -> bytes | None:
        """int32 length (-1 = null)."""
        size = self.int32()
        return None if size < 0 else self.raw(size)

    def bytes_(self) -> bytes:
        value = self.nullable_bytes()
        if value is None:
            raise self.malformed("has null bytes in a non-nullable field")
        return value

    def compact_nullable_bytes(self) -> bytes | None:
        """uvarint length + 1 (0 = null)."""
        size = self.uvarint() - 1
        return None if size < 0 else self.raw(size)

    def compact_bytes(self) -> bytes:
        value = self.compact_nullable_bytes()
        if value is None:
            raise self.malformed("has null bytes in a non-nullable field")
        return value

    def array_length(self) -> int:
        """An int32 element count; -1 is a null array."""
        return self.int32()

    def compact_array_length(self) -> int:
        """A uvarint element count + 1; -1 (a 0 on the wire) is a null array."""
        return self.uvarint() - 1

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.raw(16))

    def tagged_fields(self) -> dict[int, bytes]:
        """A flexible struct's tagged-field section: each tag's raw bytes."""
        found = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            found[tag] = self.raw(self.uvarint())
        return found


# --- Writer --------------------------------------------------------------------------------------


class Writer:
    """Kafka types appended to a buffer; `value()` is what was written. Values out of their type's
    range raise `struct.error` (fixed sizes) or `ValueError` (lengths, varints)."""

    __slots__ = ("out",)

    def __init__(self, initial: bytes = b"") -> None:
        self.out = bytearray(initial)

    def value(self) -> bytes:
        return bytes(self.out)

    def raw(self, data: bytes | bytearray) -> None:
        self.out += data

    def int8(self, value: int) -> None:
        self.out += _I8.pack(value)

    def int16(self, value: int) -> None:
        self.out += _I16.pack(value)

    def int32(self, value: int) -> None:
        self.out += _I32.pack(value)

    def int64(self, value: int) -> None:
        self.out += _I64.pack(value)

    def uint32(self, value: int) -> None:
        self.out += _U32.pack(value)

    def uvarint(self, value: int) -> None:
        if not 0 <= value <= _U32_MASK:
            raise ValueError(f"{value} is not an unsigned 32-bit varint")
        write_uvarint(self.out, value)

    def varint(self, value: int) -> None:
        if not -_INT32_MAX - 1 <= value <= _INT32_MAX:
            raise ValueError(f"{value} is not a signed 32-bit varint")
        write_varint(self.out, value)

    def uvarlong(self, value: int) -> None:
        if not 0 <= value <= _U64_MASK:
            raise ValueError(f"{value} is not an unsigned 64-bit varlong")
        write_uvarint(self.out, value)

    def varlong(self, value: int) -> None:
        if not -(1 << 63) <= value < 1 << 63:
            raise ValueError(f"{value} is not a signed 64-bit varlong")
        write_varlong(self.out, value)

    def nullable_string(self, value: str | None) -> None:
        """int16 length (-1 = null), UTF-8."""
        if value is None:
            self.int16(-1)
            return
        encoded = value.encode()
        if len(encoded) > _INT16_MAX:
            raise ValueError(f"a string of {len(encoded)} bytes does not fit an int16-length string")
        self.int16(len(encoded))
        self.out += encoded

    def string(self, value: str) -> None:
        self.nullable_string(value)

    def compact_nullable_string(self, value: str | None) -> None:
        """uvarint length + 1 (0 = null), UTF-8."""
        if value is None:
            self.out.append(0)
            return
        encoded = value.encode()
        self.uvarint(len(encoded) + 1)
        self.out += encoded

    def compact_string(self, value: str) -> None:
        self.compact_nullable_string(value)

    def nullable_bytes(self, value: bytes | None) -> None:
        """int32 length (-1 = null)."""
        if value is None:
            self.int32(-1)
            return
        self.int32(len(value))
        self.out += value

    def bytes_(self, value: bytes) -> None:
        self.nullable_bytes(value)

    def compact_nullable_bytes(self, value: bytes | None) -> None:
        """uvarint length + 1 (0 = null)."""
        if value is None:
            self.out.append(0)
            return
        self.uvarint(len(value) + 1)
        self.out += value

    def compact_bytes(self, value: bytes) -> None:
        self.compact_nullable_bytes(value)

    def array_length(self, count: int | None) -> None:
        """An int32 element count; None is a null array (-1)."""
        self.int32(-1 if count is None else count)

    def compact_array_length(self, count: int | None) -> None:
        """A uvarint element count + 1; None is a null array (0)."""
        self.uvarint(0 if count is None else count + 1)

    def uuid(self, value: uuid.UUID) -> None:
        self.out += value.bytes

    def tagged_fields(self, tags: Mapping[int, bytes]) -> None:
        """A flexible struct's tagged-field section, in ascending tag order as Kafka requires."""
        self.uvarint(len(tags))
        for tag in sorted(tags):
            self.uvarint(tag)
            self.uvarint(len(tags[tag]))
            self.out += tags[tag]
