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


def encode_frame(body: bytes) -> bytes:
    return _SIZE.pack(len(body)) + body
