"""`__transaction_state` records against bytes built by hand from Kafka's JSON schemas."""

from __future__ import annotations

import contextlib
import struct
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from minikafka.coordinator.transaction.log import (
    CorruptTxnRecord,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    metadata_from,
)
from minikafka.coordinator.transaction.state import TxnMetadata, TxnState
from minikafka.protocol.errors import CorruptRecord


def test_key_v0() -> None:
    assert encode_key("my-txn") == struct.pack(">hh", 0, 6) + b"my-txn"
    assert decode_key(encode_key("my-txn")) == "my-txn"


def test_value_v0_ongoing_by_hand() -> None:
    meta = TxnMetadata("tx", 1234, 7, 60000, TxnState.ONGOING, frozenset({("orders", 1), ("orders", 0)}),
                       txn_start_timestamp=1_700_000_000_000, txn_last_update_timestamp=1_700_000_000_500)
    expected = (
        struct.pack(">hqhib", 0, 1234, 7, 60000, 1)
        + struct.pack(">i", 1) + struct.pack(">h", 6) + b"orders" + struct.pack(">iii", 2, 0, 1)
        + struct.pack(">qq", 1_700_000_000_500, 1_700_000_000_000)
    )
    assert encode_value(meta) == expected
    value = decode_value(expected)
    assert value is not None and value.state == TxnState.ONGOING
    assert value.partitions == frozenset({("orders", 0), ("orders", 1)})


def test_value_v0_empty_has_null_partitions() -> None:
    meta = TxnMetadata("tx", 9, 0, 1000, TxnState.EMPTY, txn_last_update_timestamp=5)
    expected = struct.pack(">hqhib", 0, 9, 0, 1000, 0) + struct.pack(">i", -1) + struct.pack(">qq", 5, -1)
    assert encode_value(meta) == expected
    assert decode_value(expected).partitions is None  # type: ignore[union-attr]


def test_value_v1_flexible_by_hand() -> None:
    meta = TxnMetadata("tx", 5, 1, 2000, TxnState.PREPARE_COMMIT, frozenset({("a", 3)}),
                       txn_start_timestamp=10, txn_last_update_timestamp=20)
    expected = (
        struct.pack(">hqhib", 1, 5, 1, 2000, 2)
        + bytes([2]) + bytes([2]) + b"a" + bytes([2]) + struct.pack(">i", 3) + b"\x00"
        + struct.pack(">qq", 20, 10) + b"\x00"
    )
    assert encode_value(meta, version=1) == expected
    with_previous = TxnMetadata("tx", 5, 0, 2000, TxnState.EMPTY, last_producer_id=4, txn_last_update_timestamp=1)
    raw = encode_value(with_previous, version=1)
    assert raw.endswith(b"\x01\x00\x08" + struct.pack(">q", 4))  # one tag: 0 = PreviousProducerId
    assert decode_value(raw).previous_producer_id == 4  # type: ignore[union-attr]


def test_tombstone() -> None:
    assert decode_value(None) is None


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x02" + b"\x00" * 30, b"\x00\x00" + b"\xff" * 8,
                                  struct.pack(">hqhib", 0, 1, 1, 1, 9) + b"\x00" * 20])
def test_garbage_raises_corrupt_record(data: bytes) -> None:
    with pytest.raises(CorruptTxnRecord):
        decode_value(data)


def test_value_v0_ongoing_two_topics_by_hand() -> None:
    meta = TxnMetadata("tx", 1, 2, 3, TxnState.PREPARE_ABORT, frozenset({("b", 0), ("a", 5)}),
                       txn_start_timestamp=7, txn_last_update_timestamp=8)
    expected = (
        struct.pack(">hqhib", 0, 1, 2, 3, 3) + struct.pack(">i", 2)
        + struct.pack(">h", 1) + b"a" + struct.pack(">ii", 1, 5)
        + struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 0)
        + struct.pack(">qq", 8, 7)
    )
    assert encode_value(meta) == expected


def test_value_v1_empty_without_tags_by_hand() -> None:
    meta = TxnMetadata("tx", 9, 0, 1000, TxnState.EMPTY, txn_last_update_timestamp=5)
    # compact nullable array: 0 = null; then the struct's empty tagged-field section
    expected = struct.pack(">hqhib", 1, 9, 0, 1000, 0) + b"\x00" + struct.pack(">qq", 5, -1) + b"\x00"
    assert encode_value(meta, version=1) == expected
    value = decode_value(expected)
    assert value is not None and value.version == 1 and value.partitions is None
    assert (value.previous_producer_id, value.next_producer_id, value.client_transaction_version) == (-1, -1, 0)


def test_value_v1_all_tags_by_hand() -> None:
    meta = TxnMetadata("tx", 5, 1, 2000, TxnState.COMPLETE_COMMIT, txn_start_timestamp=10,
                       txn_last_update_timestamp=20, last_producer_id=4, next_producer_id=6,
                       client_transaction_version=2)
    expected = (
        struct.pack(">hqhib", 1, 5, 1, 2000, 4) + b"\x01"  # empty (not null) compact array
        + struct.pack(">qq", 20, 10)
        + b"\x03"  # three tagged fields: tag, size, payload each
        + b"\x00\x08" + struct.pack(">q", 4)
        + b"\x01\x08" + struct.pack(">q", 6)
        + b"\x02\x02" + struct.pack(">h", 2)
    )
    assert encode_value(meta, version=1) == expected
    value = decode_value(expected)
    assert value is not None and value.partitions == frozenset()
    assert (value.previous_producer_id, value.next_producer_id, value.client_transaction_version) == (4, 6, 2)
    assert metadata_from("tx", value) == meta


def test_v1_decoder_skips_unknown_tags_and_element_tags() -> None:
    raw = (
        struct.pack(">hqhib", 1, 5, 1, 2000, 1)
        + b"\x02" + b"\x02a" + b"\x02" + struct.pack(">i", 0) + b"\x01\x09\x01\xff"  # element with tag 9
        + struct.pack(">qq", 20, 10) + b"\x01\x07\x00"  # struct with an empty unknown tag 7
    )
    value = decode_value(raw)
    assert value is not None and value.partitions == frozenset({("a", 0)})


def test_v0_ignores_tag_only_fields() -> None:
    meta = TxnMetadata("tx", 5, 0, 1, TxnState.EMPTY, last_producer_id=4, next_producer_id=6,
                       client_transaction_version=2)
    assert len(encode_value(meta, version=0)) == 2 + 8 + 2 + 4 + 1 + 4 + 16


def test_encoder_refuses_what_kafka_refuses() -> None:
    with pytest.raises(ValueError):
        encode_value(TxnMetadata("tx", 1, 0, 1, TxnState.EMPTY, frozenset({("t", 0)})))
    with pytest.raises(ValueError):
        encode_value(TxnMetadata("tx", 1, 0, 1, TxnState.EMPTY), version=2)
    with pytest.raises(ValueError):
        encode_value(TxnMetadata("tx", 1, 40000, 1, TxnState.EMPTY))
    with pytest.raises(ValueError):
        encode_key("x" * 40000)


@pytest.mark.parametrize("data", [
    b"", b"\x00", b"\x00\x01", b"\x00\x01\x00\x06tx",  # key version 1, key truncated
    struct.pack(">hh", 0, 5) + b"ab",
    struct.pack(">hh", 0, -1),
    struct.pack(">hh", 0, 2) + b"\xff\xfe",
    struct.pack(">hh", 0, 1) + b"ab",  # trailing byte
])
def test_garbage_key_raises(data: bytes) -> None:
    with pytest.raises(CorruptTxnRecord):
        decode_key(data)


def test_null_partition_ids_and_topic_are_corrupt() -> None:
    head = struct.pack(">hqhib", 0, 1, 1, 1, 1) + struct.pack(">i", 1)
    with pytest.raises(CorruptTxnRecord, match="PartitionIds"):
        decode_value(head + struct.pack(">h", 1) + b"t" + struct.pack(">i", -1) + struct.pack(">qq", 0, 0))
    with pytest.raises(CorruptTxnRecord, match="null"):
        decode_value(head + struct.pack(">h", -1) + struct.pack(">i", 0) + struct.pack(">qq", 0, 0))


def test_corrupt_record_is_the_protocol_error_too() -> None:
    with pytest.raises(CorruptRecord):
        decode_value(b"\x00")


names = st.text(min_size=1, max_size=20)
metadata = st.builds(
    TxnMetadata,
    transactional_id=st.just("txn"),
    producer_id=st.integers(0, 2**63 - 1),
    producer_epoch=st.integers(-1, 32767),
    txn_timeout_ms=st.integers(1, 2**31 - 1),
    state=st.sampled_from(list(TxnState)),
    topic_partitions=st.frozensets(st.tuples(names, st.integers(0, 2**31 - 1)), max_size=8),
    txn_start_timestamp=st.integers(-1, 2**62),
    txn_last_update_timestamp=st.integers(-1, 2**62),
    last_producer_id=st.integers(-1, 2**62),
    next_producer_id=st.integers(-1, 2**62),
    client_transaction_version=st.integers(0, 2),
)


def _storable(meta: TxnMetadata, version: int) -> TxnMetadata:
    """What a record of `version` can carry: no partitions when Empty, no tags before v1."""
    if meta.state == TxnState.EMPTY:
        meta = replace(meta, topic_partitions=frozenset())
    if version == 0:
        meta = replace(meta, last_producer_id=-1, next_producer_id=-1, client_transaction_version=0)
    return meta


@settings(max_examples=300, deadline=None)
@given(meta=metadata, version=st.sampled_from([0, 1]))
def test_round_trip(meta: TxnMetadata, version: int) -> None:
    meta = _storable(meta, version)
    value = decode_value(encode_value(meta, version))
    assert value is not None and value.version == version
    assert value.partitions == (None if meta.state == TxnState.EMPTY else meta.topic_partitions)
    assert metadata_from("txn", value) == meta


@settings(max_examples=200, deadline=None)
@given(meta=metadata, version=st.sampled_from([0, 1]), data=st.data())
def test_every_truncation_is_corrupt(meta: TxnMetadata, version: int, data: st.DataObject) -> None:
    raw = encode_value(_storable(meta, version), version)
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(CorruptTxnRecord):
        decode_value(raw[:cut])


@settings(max_examples=500, deadline=None)
@given(raw=st.binary(max_size=80) | st.builds(lambda v, b: struct.pack(">h", v) + b, st.sampled_from([0, 1]),
                                               st.binary(max_size=80)))
def test_random_bytes_decode_or_raise_corrupt(raw: bytes) -> None:
    with contextlib.suppress(CorruptTxnRecord):
        decode_value(raw)
    with contextlib.suppress(CorruptTxnRecord):
        decode_key(raw)


@given(txn_id=st.text(max_size=50))
def test_key_round_trip(txn_id: str) -> None:
    raw = encode_key(txn_id)
    assert struct.unpack_from(">hh", raw) == (0, len(txn_id.encode()))
    assert decode_key(raw) == txn_id
