"""The transaction state machine, against Kafka's table of valid previous states."""

from __future__ import annotations

import itertools

import pytest
from minikafka.coordinator.transaction.state import (
    SHORT_MAX,
    STATE_BY_NAME,
    VALID_PREVIOUS,
    InvalidTransition,
    TxnMetadata,
    TxnState,
    can_transition,
)

# Kafka's TransactionMetadata.scala: target <- allowed previous states
KAFKA_TABLE = {
    "Empty": {"Empty", "CompleteCommit", "CompleteAbort"},
    "Ongoing": {"Ongoing", "Empty", "CompleteCommit", "CompleteAbort"},
    "PrepareCommit": {"Ongoing"},
    "PrepareAbort": {"Ongoing", "PrepareEpochFence"},
    "CompleteCommit": {"PrepareCommit"},
    "CompleteAbort": {"PrepareAbort"},
    "Dead": {"Empty", "CompleteAbort", "CompleteCommit"},
    "PrepareEpochFence": {"Ongoing"},
}


@pytest.mark.parametrize(("current", "target"), list(itertools.product(TxnState, TxnState)))
def test_every_transition_matches_kafka(current: TxnState, target: TxnState) -> None:
    assert can_transition(current, target) == (current.display_name in KAFKA_TABLE[target.display_name])


def test_ids_and_names() -> None:
    assert [s.value for s in TxnState] == list(range(8))
    assert STATE_BY_NAME["PrepareEpochFence"] is TxnState.PREPARE_EPOCH_FENCE
    assert set(VALID_PREVIOUS) == set(TxnState)


def meta(state: TxnState = TxnState.EMPTY, epoch: int = 0) -> TxnMetadata:
    return TxnMetadata("tx", 100, epoch, 60_000, state, txn_last_update_timestamp=1)


def test_a_transaction_round_trip() -> None:
    empty = meta()
    ongoing = empty.prepare_add_partitions(frozenset({("t", 0)}), now_ms=10)
    assert (ongoing.state, ongoing.txn_start_timestamp, ongoing.topic_partitions) == (
        TxnState.ONGOING, 10, frozenset({("t", 0)}))
    more = ongoing.prepare_add_partitions(frozenset({("t", 1)}), now_ms=20)
    assert more.txn_start_timestamp == 10 and len(more.topic_partitions) == 2
    prepared = more.prepare_abort_or_commit(commit=True, now_ms=30)
    assert prepared.state == TxnState.PREPARE_COMMIT and prepared.pending_completion
    done = prepared.prepare_complete(now_ms=40)
    assert (done.state, done.topic_partitions, done.txn_last_update_timestamp) == (
        TxnState.COMPLETE_COMMIT, frozenset(), 40)
    assert empty.state == TxnState.EMPTY, "prepare_* never changes the current metadata"


def test_invalid_transitions_raise() -> None:
    with pytest.raises(InvalidTransition):
        meta(TxnState.EMPTY).prepare_abort_or_commit(commit=True, now_ms=1)
    with pytest.raises(InvalidTransition):
        meta(TxnState.PREPARE_COMMIT).prepare_add_partitions(frozenset({("t", 0)}), now_ms=1)
    with pytest.raises(InvalidTransition):
        meta(TxnState.ONGOING).prepare_dead(now_ms=1)


def test_epoch_bump_fence_and_exhaustion() -> None:
    bumped = meta(TxnState.COMPLETE_ABORT, epoch=4).prepare_incr_producer_epoch(30_000, now_ms=5)
    assert (bumped.state, bumped.producer_epoch, bumped.last_producer_epoch, bumped.txn_timeout_ms) == (
        TxnState.EMPTY, 5, 4, 30_000)
    fenced = meta(TxnState.ONGOING, epoch=2).prepare_fence_producer_epoch(now_ms=5)
    assert (fenced.state, fenced.producer_epoch) == (TxnState.PREPARE_EPOCH_FENCE, 3)
    assert fenced.prepare_abort_or_commit(commit=False, now_ms=6).state == TxnState.PREPARE_ABORT
    assert meta(epoch=SHORT_MAX - 1).is_epoch_exhausted and not meta(epoch=SHORT_MAX - 2).is_epoch_exhausted
    rotated = meta(epoch=SHORT_MAX - 1).prepare_producer_id_rotation(200, 1000, now_ms=7)
    assert (rotated.producer_id, rotated.producer_epoch, rotated.last_producer_id) == (200, 0, 100)


def test_expiration_candidates() -> None:
    assert {s for s in TxnState if meta(s).is_expiration_candidate} == {
        TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}
