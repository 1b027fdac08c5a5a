"""Deterministic mutations of recorded request frames: the same --seed gives the same frame sequence.

Every mutant is the exact bytes to write on a socket, size prefix included, so lying prefixes and
garbage are expressible. Length fields are found two ways: a sweep that writes extreme int16, int32
and varint values at every offset of every corpus frame in turn (cheap, complete given enough
frames), and random offsets with random extreme values (reaches combinations the sweep does not).
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from minikafka.protocol.api_keys import ApiKey

from .corpus import CorpusFrame

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEADER_KEY_VERSION = struct.Struct(">hh")
INT16_EXTREMES = (-1, -2, 0, 0x7FFF, -0x8000, 0x7FFE, 0x4000, 0x0100)
INT32_EXTREMES = (-1, -2, 0, 0x7FFFFFFF, -0x80000000, 0x7FFFFFF0, 0x10000000, 0x00FFFFFF, 0x00010000)
# Unsigned varints as compact lengths carry them (length + 1): 0 is null, then huge and overlong ones.
VARINT_EXTREMES = (0, 1, 2**31 - 1, 2**31, 2**32 - 1, 2**35 - 1, 2**63 - 1, 2**64 - 1)
INFLATE_COUNTS = (10_000, 100_000, 1_000_000)
INTERESTING_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF)
SERVED_KEYS = tuple(int(key) for key in ApiKey)
# Kafka's socket.request.max.bytes default (100 MiB): prefixes just under and over it probe the size guard.
REQUEST_MAX_BYTES = 104_857_600


def uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


_VARINT_BYTES = (*(uvarint(v) for v in VARINT_EXTREMES), b"\xff" * 10 + b"\x01")  # the last is 11 bytes: overlong


@dataclass(frozen=True, slots=True)
class Mutant:
    data: bytes  # exactly what goes on the wire
    kind: str  # the mutations applied, e.g. "int32@17=2147483647+bit_flip"
    source: int  # index of the corpus frame it started from, -1 for pure garbage
    # The size prefix promises more bytes than follow: the broker waits for them, so send and hang up.
    hang_up: bool = False


class Mutator:
    def __init__(self, corpus: list[CorpusFrame], seed: int) -> None:
        if not corpus:
            raise ValueError("empty corpus")
        self.corpus = corpus
        self.random = random.Random(seed)
        self._sweep = self._sweep_positions()
        self._operators: list[tuple[int, Callable[[bytearray], str]]] = [
            (3, self._bit_flip), (3, self._byte_set), (2, self._truncate), (2, self._extend),
            (3, self._int16_random), (3, self._int32_random), (3, self._varint_random), (2, self._insert_varint),
            (2, self._header), (2, self._splice),
        ]
        self._weights = [weight for weight, _op in self._operators]

    def _sweep_positions(self) -> Iterator[tuple[int, int, int, int]]:
        """(corpus index, offset, width, variant) over every body offset of every frame, frames in seeded order."""
        order = list(range(len(self.corpus)))
        self.random.shuffle(order)
        variant = 0
        while True:
            for index in order:
                # Offset 8 on: past api key, version and correlation id, which `_header` covers.
                for offset in range(8, len(self.corpus[index].frame)):
                    for width in range(3):
                        yield index, offset, width, variant
                        variant += 1

    def next(self) -> Mutant:
        roll = self.random.random()
        if roll < 0.002:
            return self._inflate()
        if roll < 0.03:
            return self._garbage()
        if roll < 0.30:
            index, offset, width, variant = next(self._sweep)
            body = bytearray(self.corpus[index].frame)
            kind = self._write_extreme(body, offset, width, variant)
            return self._frame(index, body, kind)
        index = self.random.randrange(len(self.corpus))
        body = bytearray(self.corpus[index].frame)
        kinds = []
        for _ in range(self.random.choice((1, 1, 1, 2, 2, 3))):
            operator = self.random.choices(self._operators, self._weights)[0][1]
            kinds.append(operator(body))
        return self._frame(index, body, "+".join(kinds))

    # --- framing --------------------------------------------------------------------------------------------------

    def _frame(self, index: int, body: bytearray, kind: str) -> Mutant:
        if self.random.random() >= 0.06:
            return Mutant(_I32.pack(len(body)) + bytes(body), kind, index)
        choice = self.random.randrange(6)
        if choice == 0:  # bigger than the body: the broker must wait, not allocate or decode early
            size = len(body) + self.random.choice((1, 2, 7, 100, 4096))
        elif choice == 1:  # smaller: the rest of the body becomes the next "frame"
            size = self.random.randrange(0, max(len(body), 1))
        elif choice == 2:
            size = self.random.choice((0, -1, -0x80000000))
        elif choice == 3:
            size = self.random.choice((0x7FFFFFFF, REQUEST_MAX_BYTES + 1, REQUEST_MAX_BYTES))
        elif choice == 4:  # two frames in one write, the second cut short
            cut = self.random.randrange(0, len(body) + 1)
            data = _I32.pack(len(body)) + bytes(body) + _I32.pack(len(body)) + bytes(body[:cut])
            return Mutant(data, kind + "+second_frame_cut", index, hang_up=True)
        else:  # a prefix only, no body at all
            return Mutant(_I32.pack(len(body)), kind + "+prefix_only", index, hang_up=True)
        data = _I32.pack(size) + bytes(body)
        return Mutant(data, f"{kind}+size_prefix={size}/{len(body)}", index, hang_up=size > len(body))

    def _inflate(self) -> Mutant:
        """A count at a random offset, followed by that many elements of zeros: when the offset is an
        array's count, the frame stays well-formed and its array holds up to a million elements, which
        probes what the broker does with a large request rather than a lying one."""
        index = self.random.randrange(len(self.corpus))
        body = bytearray(self.corpus[index].frame)
        offset = self.random.randrange(8, max(len(body) - 3, 9))
        count, width = self.random.choice(INFLATE_COUNTS), self.random.choice((1, 2, 4))
        body[offset:offset + 4] = _I32.pack(count)
        body[offset + 4:offset + 4] = bytes(count * width)
        return self._frame(index, body, f"inflate@{offset}={count}x{width}")

    def _garbage(self) -> Mutant:
        length = self.random.choice((0, 1, 3, 8, 16, 64, 256, 1024))
        body = self.random.randbytes(length)
        if self.random.random() < 0.5:
            return Mutant(_I32.pack(length) + body, f"garbage[{length}]", -1)
        return Mutant(body, f"raw_garbage[{length}]", -1, hang_up=True)

    # --- operators, each mutates `body` in place and names what it did -----------------------------------------

    def _offset(self, body: bytearray, width: int = 1) -> int:
        return self.random.randrange(0, max(len(body) - width + 1, 1))

    def _write_extreme(self, body: bytearray, offset: int, width: int, variant: int) -> str:
        if width == 0:
            value = INT16_EXTREMES[variant % len(INT16_EXTREMES)]
            body[offset:offset + 2] = _I16.pack(value)
            return f"sweep_int16@{offset}={value}"
        if width == 1:
            value = INT32_EXTREMES[variant % len(INT32_EXTREMES)]
            body[offset:offset + 4] = _I32.pack(value)
            return f"sweep_int32@{offset}={value}"
        encoded = _VARINT_BYTES[variant % len(_VARINT_BYTES)]
        body[offset:offset + len(encoded)] = encoded
        return f"sweep_varint@{offset}={encoded.hex()}"

    def _bit_flip(self, body: bytearray) -> str:
        if not body:
            return "bit_flip(empty)"
        flips = self.random.randint(1, 8)
        for _ in range(flips):
            body[self._offset(body)] ^= 1 << self.random.randrange(8)
        return f"bit_flip x{flips}"

    def _byte_set(self, body: bytearray) -> str:
        if not body:
            return "byte_set(empty)"
        count = self.random.randint(1, 4)
        for _ in range(count):
            value = self.random.choice(INTERESTING_BYTES) if self.random.random() < 0.5 else self.random.randrange(256)
            body[self._offset(body)] = value
        return f"byte_set x{count}"

    def _truncate(self, body: bytearray) -> str:
        cut = self.random.randrange(0, max(len(body), 1))
        del body[cut:]
        return f"truncate@{cut}"

    def _extend(self, body: bytearray) -> str:
        count = self.random.choice((1, 2, 4, 16, 64, 512))
        body += self.random.randbytes(count)
        return f"extend+{count}"

    def _int16_random(self, body: bytearray) -> str:
        offset, value = self._offset(body, 2), self.random.choice(INT16_EXTREMES)
        body[offset:offset + 2] = _I16.pack(value)
        return f"int16@{offset}={value}"

    def _int32_random(self, body: bytearray) -> str:
        offset, value = self._offset(body, 4), self.random.choice(INT32_EXTREMES)
        body[offset:offset + 4] = _I32.pack(value)
        return f"int32@{offset}={value}"

    def _varint_random(self, body: bytearray) -> str:
        offset, encoded = self._offset(body), self.random.choice(_VARINT_BYTES)
        body[offset:offset + len(encoded)] = encoded
        return f"varint@{offset}={encoded.hex()}"

    def _insert_varint(self, body: bytearray) -> str:
        offset, encoded = self._offset(body), self.random.choice(_VARINT_BYTES)
        body[offset:offset] = encoded
        return f"insert_varint@{offset}={encoded.hex()}"

    def _header(self, body: bytearray) -> str:
        if len(body) < 4:
            return "header(short)"
        key = self.random.choice(SERVED_KEYS) if self.random.random() < 0.8 else self.random.choice(INT16_EXTREMES)
        version = self.random.randint(-1, 17) if self.random.random() < 0.8 else self.random.choice(INT16_EXTREMES)
        body[0:4] = _HEADER_KEY_VERSION.pack(key, version)
        return f"header={key}v{version}"

    def _splice(self, body: bytearray) -> str:
        donor = self.random.randrange(len(self.corpus))
        other = self.corpus[donor].frame
        cut, start = self.random.randrange(0, len(body) + 1), self.random.randrange(0, len(other) + 1)
        body[cut:] = other[start:]
        return f"splice@{cut}<-{donor}@{start}"
