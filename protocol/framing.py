"""Kafka's size-prefixed framing, with the size guard applied before any allocation."""

from __future__ import annotations

import asyncio
import struct

_SIZE = struct.Struct(">i")


class BadFrameSize(Exception):
    """A frame size outside (0, max_bytes]: the connection must be closed."""

    def __init__(self, size: int, max_bytes: int) -> None:
        super().__init__(f"frame size {size} outside (0, {max_bytes}]")
        self.size = size


async def read_frame(reader: asyncio.StreamReader, max_bytes: int) -> bytes | None:
    """Read one frame body; None on a clean EOF between frames."""
    try:
        prefix = await reader.readexactly(4)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise
    (size,) = _SIZE.unpack(prefix)
    if size <= 0 or size > max_bytes:
        raise BadFrameSize(size, max_bytes)
    return await reader.readexactly(size)


def buffered_api_key(reader: asyncio.StreamReader) -> int | None:
    """The API key of a whole request frame already in `reader`'s buffer, or None.

    Reads the StreamReader's buffer (a private attribute, stable since Python 3.4) without consuming it."""
    buffer: bytearray = reader._buffer  # type: ignore[attr-defined]
    if len(buffer) < 6:
        return None
    (size,) = _SIZE.unpack_from(buffer, 0)
    if size < 2 or len(buffer) < 4 + size:
        return None
    return int.from_bytes(buffer[4:6], "big", signed=True)


def encode_frame(body: bytes) -> bytes:
    return _SIZE.pack(len(body)) + body
