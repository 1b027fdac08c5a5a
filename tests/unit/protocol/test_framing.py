"""Framing guards: sizes outside (0, max] are refused before any allocation."""

from __future__ import annotations

import asyncio
import struct

import pytest
from minikafka.protocol.framing import BadFrameSize, encode_frame, read_frame


def _reader(data: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    return reader


async def test_reads_frames_in_order_then_eof() -> None:
    reader = _reader(encode_frame(b"one") + encode_frame(b"two"))
    assert await read_frame(reader, 100) == b"one"
    assert await read_frame(reader, 100) == b"two"
    assert await read_frame(reader, 100) is None


@pytest.mark.parametrize("size", [0, -1, 101, 2**31 - 1])
async def test_bad_sizes_are_refused(size: int) -> None:
    with pytest.raises(BadFrameSize):
        await read_frame(_reader(struct.pack(">i", size) + b"x" * 10), 100)


async def test_torn_frame_raises() -> None:
    with pytest.raises(asyncio.IncompleteReadError):
        await read_frame(_reader(struct.pack(">i", 10) + b"abc"), 100)
