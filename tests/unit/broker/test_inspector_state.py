"""What the inspector reads from GET /state that is decoded here: a consumer's assignment bytes.

The end-to-end test (tests/e2e/test_inspector.py) reads a real librdkafka assignment; these cover the
versions it does not send and bytes that are not an assignment at all, which must come out as None.
"""

from __future__ import annotations

import struct

import pytest
from minikafka.broker.control.admin_http import consumer_assignment


def _assignment(version: int, topics: dict[str, list[int]], user_data: bytes | None = None) -> bytes:
    out = struct.pack(">hi", version, len(topics))
    for topic, partitions in topics.items():
        name = topic.encode()
        out += struct.pack(">h", len(name)) + name + struct.pack(f">i{len(partitions)}i", len(partitions), *partitions)
    out += struct.pack(">i", -1) if user_data is None else struct.pack(">i", len(user_data)) + user_data
    if version >= 1:
        out += struct.pack(">i", 7)  # v1+ ends with the generation, which the inspector does not show
    return out


@pytest.mark.parametrize("version", [0, 1, 3])
def test_a_consumer_assignment_decodes_to_topics_and_partitions(version: int) -> None:
    data = _assignment(version, {"orders": [0, 2, 5], "<b>élan</b>": []}, user_data=b"sticky")
    assert consumer_assignment(data) == {"orders": [0, 2, 5], "<b>élan</b>": []}


@pytest.mark.parametrize("data", [
    b"",
    b"\x00",
    struct.pack(">hi", -1, 0),  # a negative version is no consumer assignment
    struct.pack(">hi", 0, 1),  # one topic announced, none there
    struct.pack(">hih", 0, 1, 10) + b"short",  # a topic name cut off
    struct.pack(">hih", 0, 1, 1) + b"t" + struct.pack(">i", 1_000_000),  # more partitions than bytes
    struct.pack(">hi", 0, 2**31 - 1),  # a count no buffer can hold
    struct.pack(">hih", 0, 1, 2) + b"\xff\xfe" + struct.pack(">i", 0),  # a name that is not UTF-8
])
def test_bytes_that_are_not_an_assignment_decode_to_none(data: bytes) -> None:
    assert consumer_assignment(data) is None
