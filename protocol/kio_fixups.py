"""Responses Kafka sends that kio 0.6.5 cannot read, rewritten before decoding (tools and tests only)."""

from __future__ import annotations

from minikafka.protocol.primitives import Reader

_NO_TIME = -1


def describe_transactions_without_negative_times(frame: bytes) -> bytes:
    """DescribeTransactions v0 with TransactionStartTimeMs -1 (none: an Empty or unknown id) set to 0.

    kio types the field as a non-nullable timestamp and refuses -1 (Kafka sends it), so the value is
    rewritten before decoding; 0 reads back as "no start time", as no transaction starts in 1970.
    """
    patched = bytearray(frame)
    reader = Reader(frame, 4 + 1 + 4, what="DescribeTransactions response")  # correlation id, header tags, throttle
    for _ in range(max(reader.compact_array_length(), 0)):
        reader.skip(2)  # error code
        reader.compact_nullable_bytes()  # transactional id
        reader.compact_nullable_bytes()  # state
        reader.skip(4)  # timeout
        if reader.int64() == _NO_TIME:
            patched[reader.pos - 8 : reader.pos] = bytes(8)
        reader.skip(8 + 2)  # producer id, producer epoch
        for _ in range(max(reader.compact_array_length(), 0)):
            reader.compact_nullable_bytes()  # topic name
            reader.skip(4 * max(reader.compact_array_length(), 0))
            reader.tagged_fields()
        reader.tagged_fields()
    return bytes(patched)
