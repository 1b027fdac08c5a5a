"""The share-partition state machine (coordinator/share/partition.py) and its `__share_group_state`
records (state_log.py), without a broker."""

from __future__ import annotations

import uuid

import pytest
from minikafka.coordinator.errors import InvalidRecordState
from minikafka.coordinator.share.group import simple_assign
from minikafka.coordinator.share.partition import AckType, Acquired, RecordState, SharePartition, StateBatch, ranges
from minikafka.coordinator.share.state_log import (
    SNAPSHOT,
    UPDATE,
    ShareKey,
    ShareStateValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

LOCK = 30_000


def _acquire(sp: SharePartition, member: str, offsets: range, now: int = 0) -> list[int | None]:
    return [sp.acquire(o, member, now + LOCK) for o in offsets]


def test_acquired_records_are_not_acquired_again() -> None:
    sp = SharePartition(0, delivery_count_limit=5, max_in_flight=100)
    assert _acquire(sp, "a", range(3)) == [1, 1, 1]
    assert _acquire(sp, "b", range(3)) == [None, None, None]
    assert sp.next_fetch_offset() == 3


def test_accept_completes_and_moves_the_start_offset() -> None:
    sp = SharePartition(0, 5, 100)
    _acquire(sp, "a", range(4))
    sp.acknowledge("a", 0, 1, [AckType.ACCEPT], 0, LOCK)
    sp.advance_start()
    assert sp.start_offset == 2
    sp.acknowledge("a", 3, 3, [AckType.ACCEPT], 0, LOCK)
    sp.advance_start()
    assert sp.start_offset == 2  # offset 2 is still acquired
    sp.acknowledge("a", 2, 2, [AckType.REJECT], 0, LOCK)
    sp.advance_start()
    assert sp.start_offset == 4 and sp.in_flight_count() == 0


def test_release_redelivers_with_a_higher_delivery_count() -> None:
    sp = SharePartition(0, 5, 100)
    _acquire(sp, "a", range(2))
    sp.acknowledge("a", 0, 1, [AckType.RELEASE], 0, LOCK)
    assert sp.next_fetch_offset() == 0
    assert _acquire(sp, "b", range(2)) == [2, 2]


def test_per_offset_types_and_validation_is_all_or_nothing() -> None:
    sp = SharePartition(0, 5, 100)
    _acquire(sp, "a", range(3))
    with pytest.raises(InvalidRecordState):
        sp.acknowledge("b", 0, 2, [AckType.ACCEPT], 0, LOCK)
    with pytest.raises(InvalidRecordState):
        sp.acknowledge("a", 0, 3, [AckType.ACCEPT], 0, LOCK)  # offset 3 was never acquired
    assert sp.state_of(0).state == RecordState.ACQUIRED  # type: ignore[union-attr]
    sp.acknowledge("a", 0, 2, [AckType.ACCEPT, AckType.RELEASE, AckType.REJECT], 0, LOCK)
    assert [sp.records[o].state for o in range(3)] == [RecordState.ACKNOWLEDGED, RecordState.AVAILABLE,
                                                         RecordState.ARCHIVED]


def test_the_delivery_limit_archives_instead_of_releasing() -> None:
    sp = SharePartition(0, delivery_count_limit=2, max_in_flight=100)
    for _ in range(2):
        assert sp.acquire(0, "a", LOCK) is not None
        sp.acknowledge("a", 0, 0, [AckType.RELEASE], 0, LOCK)
    assert sp.records[0].state == RecordState.ARCHIVED
    sp.advance_start()
    assert sp.start_offset == 1


def test_expired_locks_and_a_leaving_member_release_records() -> None:
    sp = SharePartition(0, 5, 100)
    sp.acquire(0, "a", 100)
    sp.acquire(1, "a", 200)
    sp.acquire(2, "b", 300)
    assert sp.earliest_lock_deadline() == 100
    assert sp.release_expired(150) == [0]
    assert sp.release_member("b") == [2]
    assert sp.records[1].state == RecordState.ACQUIRED
    assert list(sp.available_offsets()) == [0, 2]


def test_renew_extends_the_lock() -> None:
    sp = SharePartition(0, 5, 100)
    sp.acquire(0, "a", 100)
    sp.acknowledge("a", 0, 0, [AckType.RENEW], 90, LOCK)
    assert sp.release_expired(150) == []
    assert sp.records[0].lock_deadline_ms == 90 + LOCK


def test_the_in_flight_bound_stops_new_acquisitions() -> None:
    sp = SharePartition(10, 5, max_in_flight=3)
    assert _acquire(sp, "a", range(10, 14)) == [1, 1, 1, None]
    sp.acknowledge("a", 10, 10, [AckType.ACCEPT], 0, LOCK)
    sp.advance_start()
    assert sp.acquire(13, "a", LOCK) == 1


def test_log_start_moving_past_in_flight_records_drops_them() -> None:
    sp = SharePartition(0, 5, 100)
    _acquire(sp, "a", range(5))
    assert sp.move_start_to(3)
    assert sp.start_offset == 3 and sorted(sp.records) == [3, 4]


def test_gaps_and_archived_offsets() -> None:
    sp = SharePartition(0, 5, 100)
    sp.archive(0)  # a control record
    assert sp.acquire(3, "a", LOCK) == 1  # offsets 1-2 are not in the log (compacted)
    sp.advance_start()
    assert sp.start_offset == 3


def test_state_batches_round_trip_through_restore() -> None:
    sp = SharePartition(0, 5, 100)
    _acquire(sp, "a", range(6))
    sp.acknowledge("a", 0, 1, [AckType.RELEASE], 0, LOCK)
    sp.acknowledge("a", 2, 3, [AckType.ACCEPT], 0, LOCK)
    batches = sp.state_batches()
    # an acquisition is never written: acquired records are stored as last written (never: count 0)
    assert batches == [StateBatch(0, 1, RecordState.AVAILABLE, 1), StateBatch(2, 3, RecordState.ACKNOWLEDGED, 1),
                       StateBatch(4, 5, RecordState.AVAILABLE, 0)]
    sp.mark_stored(batches)
    sp.acquire(0, "b", LOCK)
    assert sp.state_batches([0]) == [StateBatch(0, 0, RecordState.AVAILABLE, 1)]
    restored = SharePartition(0, 5, 100)
    restored.restore(batches)
    assert list(restored.available_offsets()) == [0, 1, 4, 5]
    assert restored.end_offset == 6


def test_ranges_merge_consecutive_offsets_with_one_count() -> None:
    assert ranges([(0, 1), (1, 1), (2, 2), (4, 2)]) == [Acquired(0, 1, 1), Acquired(2, 2, 2), Acquired(4, 4, 2)]


def test_share_group_state_records_round_trip() -> None:
    key = ShareKey("g", uuid.uuid4(), 3)
    for kind in (SNAPSHOT, UPDATE):
        raw = encode_key(kind, key)
        assert raw[:2] == kind.to_bytes(2, "big")
        assert decode_key(raw) == (kind, key)
    batches = (StateBatch(5, 9, RecordState.ACKNOWLEDGED, 2),)
    snapshot = ShareStateValue(0, 0, 5, batches, state_epoch=1, create_ms=7, write_ms=8, delivery_complete_count=5)
    assert decode_value(SNAPSHOT, encode_value(SNAPSHOT, snapshot)) == snapshot
    update = ShareStateValue(0, 0, -1, batches)
    assert decode_value(UPDATE, encode_value(UPDATE, update)) == update


def test_simple_assignor_assigns_every_partition_and_shares_when_members_outnumber_them() -> None:
    one = simple_assign({"a": ("t",), "b": ("t",), "c": ("t",)}, {"t": 1})
    assert all(assignment == {"t": frozenset({0})} for assignment in one.values())
    spread = simple_assign({"a": ("t",), "b": ("t",)}, {"t": 4})
    assert spread["a"]["t"] | spread["b"]["t"] == frozenset(range(4))
    assert not spread["a"]["t"] & spread["b"]["t"]
