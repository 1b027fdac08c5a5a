"""The transaction state machine, against Kafka's table of valid previous states."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from minikafka.coordinator.transaction.state import (
    SHORT_MAX,
    STATE_BY_NAME,
    VALID_PREVIOUS,
    InvalidTransition,
    ProducerFenced,
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
    # without a KIP-360 expected epoch Kafka forgets the last epoch (-1)
    assert (bumped.state, bumped.producer_epoch, bumped.last_producer_epoch, bumped.txn_timeout_ms) == (
        TxnState.EMPTY, 5, -1, 30_000)
    fenced = meta(TxnState.ONGOING, epoch=2).prepare_fence_producer_epoch(now_ms=5)
    assert (fenced.state, fenced.producer_epoch, fenced.last_producer_epoch) == (TxnState.PREPARE_EPOCH_FENCE, 3, -1)
    assert fenced.txn_last_update_timestamp == 1, "Kafka's fence keeps the last update timestamp"
    assert fenced.prepare_abort_or_commit(commit=False, now_ms=6).state == TxnState.PREPARE_ABORT
    assert meta(epoch=SHORT_MAX - 1).is_epoch_exhausted and not meta(epoch=SHORT_MAX - 2).is_epoch_exhausted
    rotated = meta(epoch=SHORT_MAX - 1).prepare_producer_id_rotation(200, 1000, now_ms=7)
    assert (rotated.producer_id, rotated.producer_epoch, rotated.last_producer_id) == (200, 0, 100)


def test_expiration_candidates() -> None:
    assert {s for s in TxnState if meta(s).is_expiration_candidate} == {
        TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}


IDLE = [TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT]


@pytest.mark.parametrize("state", IDLE)
def test_add_partitions_from_idle_starts_a_transaction(state: TxnState) -> None:
    started = replace(meta(state), txn_start_timestamp=3).prepare_add_partitions([("t", 0), ("u", 2)], now_ms=50)
    assert (started.state, started.txn_start_timestamp, started.txn_last_update_timestamp) == (
        TxnState.ONGOING, 50, 50)
    assert started.topic_partitions == frozenset({("t", 0), ("u", 2)})


@pytest.mark.parametrize("state", [s for s in TxnState if s not in (*IDLE, TxnState.ONGOING)])
def test_add_partitions_refused_outside_idle_and_ongoing(state: TxnState) -> None:
    with pytest.raises(InvalidTransition):
        meta(state).prepare_add_partitions([("t", 0)], now_ms=1)


def test_abort_from_ongoing_keeps_epoch_partitions_and_start() -> None:
    ongoing = meta().prepare_add_partitions([("t", 0)], now_ms=10)
    aborting = ongoing.prepare_abort_or_commit(commit=False, now_ms=20)
    assert (aborting.state, aborting.producer_epoch, aborting.topic_partitions, aborting.txn_start_timestamp,
            aborting.txn_last_update_timestamp) == (TxnState.PREPARE_ABORT, 0, frozenset({("t", 0)}), 10, 20)
    done = aborting.prepare_complete(now_ms=30)
    assert (done.state, done.topic_partitions, done.txn_start_timestamp) == (TxnState.COMPLETE_ABORT, frozenset(), 10)


@pytest.mark.parametrize("state", [s for s in TxnState if s not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)])
def test_complete_only_from_prepare(state: TxnState) -> None:
    with pytest.raises(InvalidTransition):
        meta(state).prepare_complete(now_ms=1)


def test_fence_only_from_ongoing_and_never_past_short_max() -> None:
    for state in TxnState:
        if state != TxnState.ONGOING:
            with pytest.raises(InvalidTransition):
                meta(state).prepare_fence_producer_epoch()
    assert meta(TxnState.ONGOING, epoch=SHORT_MAX - 1).prepare_fence_producer_epoch().producer_epoch == SHORT_MAX
    with pytest.raises(InvalidTransition):
        meta(TxnState.ONGOING, epoch=SHORT_MAX).prepare_fence_producer_epoch()


def test_incr_epoch_refused_when_exhausted_or_busy() -> None:
    with pytest.raises(InvalidTransition):
        meta(epoch=SHORT_MAX - 1).prepare_incr_producer_epoch(1000, now_ms=1)
    for state in (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.DEAD):
        with pytest.raises(InvalidTransition):
            meta(state).prepare_incr_producer_epoch(1000, now_ms=1)


def test_incr_epoch_with_expected_epoch_kip_360() -> None:
    current = replace(meta(epoch=7), last_producer_epoch=6)
    bumped = current.prepare_incr_producer_epoch(1000, now_ms=2, expected_epoch=7)
    assert (bumped.producer_epoch, bumped.last_producer_epoch) == (8, 7)
    retried = bumped.prepare_incr_producer_epoch(1000, now_ms=3, expected_epoch=7)
    assert (retried.producer_epoch, retried.last_producer_epoch) == (8, 7), "a retry is not bumped again"
    with pytest.raises(ProducerFenced):
        bumped.prepare_incr_producer_epoch(1000, now_ms=4, expected_epoch=5)
    fresh = meta(epoch=-1).prepare_incr_producer_epoch(1000, now_ms=5, expected_epoch=3)
    assert (fresh.producer_epoch, fresh.last_producer_epoch) == (0, -1)


def test_rotation_records_last_epoch_only_when_asked() -> None:
    old = meta(TxnState.COMPLETE_COMMIT, epoch=SHORT_MAX - 1)
    assert old.prepare_producer_id_rotation(200, 1000, now_ms=1).last_producer_epoch == -1
    assert old.prepare_producer_id_rotation(200, 1000, now_ms=1, record_last_epoch=True).last_producer_epoch == (
        SHORT_MAX - 1)
    with pytest.raises(InvalidTransition):
        meta(TxnState.ONGOING).prepare_producer_id_rotation(200, 1000, now_ms=1)


def test_every_transition_records_the_producer_id_it_started_from() -> None:
    # Kafka's TxnTransitMetadata.prevProducerId, written as tag 0 of TransactionLogValue v1
    assert meta().prepare_add_partitions([("t", 0)], now_ms=1).last_producer_id == 100
    assert meta().prepare_producer_id_rotation(200, 1000, now_ms=1).last_producer_id == 100


@pytest.mark.parametrize("state", IDLE)
def test_dead_from_idle_keeps_timestamps(state: TxnState) -> None:
    dead = meta(state).prepare_dead()
    assert (dead.state, dead.topic_partitions, dead.txn_last_update_timestamp) == (TxnState.DEAD, frozenset(), 1)


def test_pending_state_blocks_a_second_prepare() -> None:
    current = meta()
    prepared = current.prepare_add_partitions([("t", 0)], now_ms=5)
    assert current.pending_state is None and prepared.pending_state is None
    busy = current.with_pending(prepared)
    assert busy.pending_state == TxnState.ONGOING and busy.state == TxnState.EMPTY
    with pytest.raises(InvalidTransition):
        busy.prepare_add_partitions([("t", 1)], now_ms=6)
    installed = busy.complete_transition(prepared)
    assert installed == prepared and installed.pending_state is None
    with pytest.raises(InvalidTransition):
        busy.complete_transition(prepared.prepare_abort_or_commit(commit=True, now_ms=7))


def test_names_are_kafkas() -> None:
    assert [s.display_name for s in TxnState] == [
        "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
        "PrepareEpochFence"]
    assert meta().is_expired_candidate and not meta(TxnState.ONGOING).is_expired_candidate


def test_open_means_begun_and_not_completed() -> None:
    assert {state for state in TxnState if meta(state).is_open} == {
        TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE}
