"""Responses Kafka sends that kio 0.6.5 cannot read, rewritten before decoding (tools and tests only)."""

from __future__ import annotations

import struct


def _uvarint(frame: bytes | bytearray, offset: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = frame[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, offset
        shift += 7


def _skip_compact(frame: bytes | bytearray, offset: int) -> int:
    length, offset = _uvarint(frame, offset)
    return offset + max(length - 1, 0)


def _skip_tags(frame: bytes | bytearray, offset: int) -> int:
    count, offset = _uvarint(frame, offset)
    for _ in range(count):
        _tag, offset = _uvarint(frame, offset)
        size, offset = _uvarint(frame, offset)
        offset += size
    return offset


_NO_TIME = struct.pack(">q", -1)


def describe_transactions_without_negative_times(frame: bytes) -> bytes:
    """DescribeTransactions v0 with TransactionStartTimeMs -1 (none: an Empty or unknown id) set to 0.

    kio types the field as a non-nullable timestamp and refuses -1 (Kafka sends it), so the value is
    rewritten before decoding; 0 reads back as "no start time", as no transaction starts in 1970.
    """
    patched = bytearray(frame)
    offset = 4 + 1 + 4  # correlation id, response header tags, throttle time
    states, offset = _uvarint(patched, offset)
    for _ in range(max(states - 1, 0)):
        offset += 2  # error code
        offset = _skip_compact(patched, offset)  # transactional id
        offset = _skip_compact(patched, offset)  # state
        offset += 4  # timeout
        if patched[offset:offset + 8] == _NO_TIME:
            patched[offset:offset + 8] = bytes(8)
        offset += 8 + 8 + 2  # start time, producer id, producer epoch
        topics, offset = _uvarint(patched, offset)
        for _ in range(max(topics - 1, 0)):
            offset = _skip_compact(patched, offset)  # topic name
            partitions, offset = _uvarint(patched, offset)
            offset += 4 * max(partitions - 1, 0)
            offset = _skip_tags(patched, offset)
        offset = _skip_tags(patched, offset)
    return bytes(patched)
