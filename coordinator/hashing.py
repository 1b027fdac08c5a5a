"""Kafka's placement of a group id or transactional id onto an internal topic partition.

`Utils.abs(key.hashCode()) % partitions`, with Java's String.hashCode over UTF-16 code units
(so a non-BMP character counts as two surrogates) and Kafka's Utils.abs, which maps
Integer.MIN_VALUE to 0 where Math.abs would return it unchanged.
"""

from __future__ import annotations

import functools

_INT_MIN = -(2**31)


# Cached: every transactional request and every group request places its id, and the hash is a Python
# loop over the id's UTF-16 code units (1-2% of a transaction's broker CPU before).
@functools.lru_cache(maxsize=4096)
def java_string_hash(text: str) -> int:
    """java.lang.String.hashCode: h = 31*h + c over UTF-16 code units, int32 wrap-around."""
    h = 0
    encoded = text.encode("utf-16-be", "surrogatepass")
    for index in range(0, len(encoded), 2):
        h = (31 * h + ((encoded[index] << 8) | encoded[index + 1])) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


def kafka_abs(value: int) -> int:
    """org.apache.kafka.common.utils.Utils.abs."""
    return 0 if value == _INT_MIN else abs(value)


def partition_for(key: str, partitions: int) -> int:
    if partitions <= 0:
        raise ValueError("partitions must be positive")
    return kafka_abs(java_string_hash(key)) % partitions
