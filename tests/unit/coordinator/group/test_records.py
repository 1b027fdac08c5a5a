"""__consumer_offsets records against bytes written out by hand from Kafka's message schemas."""

from __future__ import annotations

import pytest
from minikafka.coordinator.group.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    consumer_subscription_topics,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from minikafka.protocol.errors import CorruptRecord


def s(text: str) -> bytes:
    data = text.encode()
    return len(data).to_bytes(2, "big") + data


def i16(v: int) -> bytes:
    return v.to_bytes(2, "big", signed=True)


def i32(v: int) -> bytes:
    return v.to_bytes(4, "big", signed=True)


def i64(v: int) -> bytes:
    return v.to_bytes(8, "big", signed=True)


def test_offset_commit_key_v1() -> None:
    expected = i16(1) + s("grp") + s("topic-a") + i32(7)
    assert encode_offset_key(OffsetKey("grp", "topic-a", 7)) == expected
    assert decode_key(expected) == OffsetKey("grp", "topic-a", 7)


def test_offset_commit_key_v0_decodes() -> None:
    assert decode_key(i16(0) + s("g") + s("t") + i32(0)) == OffsetKey("g", "t", 0)


def test_group_metadata_key_v2() -> None:
    expected = i16(2) + s("grp")
    assert encode_group_key(GroupKey("grp")) == expected
    assert decode_key(expected) == GroupKey("grp")


def test_share_and_streams_group_keys_are_skipped() -> None:
    # 11: ShareGroupMetadataKey, 17: StreamsGroupMetadataKey (not served by this coordinator)
    assert decode_key(i16(11) + s("grp")) is None
    assert decode_key(i16(17) + s("grp")) is None


def test_offset_commit_value_v3() -> None:
    value = OffsetValue(offset=42, leader_epoch=5, metadata="meta", commit_timestamp=1700000000000)
    expected = i16(3) + i64(42) + i32(5) + s("meta") + i64(1700000000000)
    assert encode_offset_value(value) == expected
    assert decode_offset_value(expected) == value


def test_offset_commit_value_v1_when_expire_timestamp_set() -> None:
    value = OffsetValue(offset=1, metadata="", commit_timestamp=10, expire_timestamp=20)
    expected = i16(1) + i64(1) + s("") + i64(10) + i64(20)
    assert encode_offset_value(value) == expected
    assert decode_offset_value(expected) == value


def test_offset_commit_value_v0_and_v2_decode() -> None:
    assert decode_offset_value(i16(0) + i64(9) + s("x") + i64(3)) == OffsetValue(9, -1, "x", 3, -1)
    assert decode_offset_value(i16(2) + i64(9) + s("x") + i64(3)) == OffsetValue(9, -1, "x", 3, -1)


def test_offset_commit_value_v4_flexible_decodes() -> None:
    # offset, leaderEpoch, compact string "ab" (len+1 = 3), commitTimestamp, empty tagged fields
    data = i16(4) + i64(77) + i32(2) + bytes([3]) + b"ab" + i64(5) + bytes([0])
    assert decode_offset_value(data) == OffsetValue(77, 2, "ab", 5, -1)


def test_group_metadata_value_v3() -> None:
    member = MemberValue("m-1", "inst-1", "client", "/127.0.0.1", 30000, 10000, b"\x00\x01sub", b"asg")
    value = GroupValue("consumer", 4, "range", "m-1", 1234, (member,))
    expected = (
        i16(3)
        + s("consumer")
        + i32(4)
        + s("range")
        + s("m-1")
        + i64(1234)
        + i32(1)
        + s("m-1")
        + s("inst-1")
        + s("client")
        + s("/127.0.0.1")
        + i32(30000)
        + i32(10000)
        + i32(5)
        + b"\x00\x01sub"
        + i32(3)
        + b"asg"
    )
    assert encode_group_value(value) == expected
    assert decode_group_value(expected) == value


def test_group_metadata_value_v3_nulls() -> None:
    value = GroupValue("consumer", 1, None, None, 99, (MemberValue("m", None, "c", "h", 1, 2, b"", b""),))
    expected = (
        i16(3)
        + s("consumer")
        + i32(1)
        + i16(-1)
        + i16(-1)
        + i64(99)
        + i32(1)
        + s("m")
        + i16(-1)
        + s("c")
        + s("h")
        + i32(1)
        + i32(2)
        + i32(0)
        + i32(0)
    )
    assert encode_group_value(value) == expected
    assert decode_group_value(expected) == value


def test_group_metadata_value_v0_decodes() -> None:
    data = (
        i16(0)
        + s("consumer")
        + i32(2)
        + s("range")
        + s("m")
        + i32(1)
        + s("m")
        + s("c")
        + s("h")
        + i32(10000)
        + i32(0)
        + i32(0)
    )
    decoded = decode_group_value(data)
    assert decoded.current_state_timestamp == -1
    assert decoded.members == (MemberValue("m", None, "c", "h", 10000, 10000, b"", b""),)


def test_truncated_value_is_corrupt() -> None:
    with pytest.raises(CorruptRecord):
        decode_offset_value(i16(3) + i64(1))


def test_consumer_subscription_topics() -> None:
    metadata = i16(1) + i32(2) + s("a") + s("b") + i32(-1) + i32(0)
    assert consumer_subscription_topics(metadata) == ["a", "b"]
    assert consumer_subscription_topics(b"\x00") == []
