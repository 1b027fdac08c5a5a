"""`__transaction_state` records against bytes built by hand from Kafka's JSON schemas."""

from __future__ import annotations

import struct

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


names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-._0123456789", min_size=1, max_size=20)


@settings(max_examples=200, deadline=None)
@given(state=st.sampled_from(list(TxnState)), version=st.sampled_from([0, 1]),
       partitions=st.frozensets(st.tuples(names, st.integers(0, 1000)), max_size=8),
       pid=st.integers(0, 2**62), epoch=st.integers(0, 32766), previous=st.integers(-1, 2**40))
def test_round_trip(state: TxnState, version: int, partitions: frozenset, pid: int, epoch: int,
                    previous: int) -> None:
    if state == TxnState.EMPTY:
        partitions = frozenset()
    meta = TxnMetadata("txn", pid, epoch, 60000, state, partitions, txn_start_timestamp=3,
                       txn_last_update_timestamp=4, last_producer_id=previous if version == 1 else -1)
    value = decode_value(encode_value(meta, version))
    assert value is not None
    assert metadata_from("txn", value) == meta
