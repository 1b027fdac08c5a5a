"""Transaction states and metadata, with Kafka's transition rules (TransactionMetadata.scala).

Metadata changes follow Kafka's prepare/complete pattern: a `prepare_*` method returns the metadata
to be written to `__transaction_state` without touching the current one; the caller installs it
once the write succeeded. So a failed write leaves the coordinator's view unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import IntEnum

from minikafka.protocol.errors import ErrorCode, KafkaError

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 32767

TopicPartition = tuple[str, int]


class TxnState(IntEnum):
    """Persisted as TransactionStatus (int8) in TransactionLogValue."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        """The name DescribeTransactions and ListTransactions report (Kafka's TransactionState.name)."""
        return _NAMES[self]


_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
STATE_BY_NAME = {name: state for state, name in _NAMES.items()}

VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset({TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                 TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_ABORT, TxnState.COMPLETE_COMMIT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}


def can_transition(current: TxnState, target: TxnState) -> bool:
    return current in VALID_PREVIOUS[target]


class InvalidTransition(KafkaError):
    """A transition Kafka's state machine does not allow; clients see INVALID_TXN_STATE."""

    error_code = ErrorCode.invalid_txn_state


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    topic_partitions: frozenset[TopicPartition] = field(default_factory=frozenset)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH

    @property
    def is_epoch_exhausted(self) -> bool:
        return self.producer_epoch >= SHORT_MAX - 1

    @property
    def is_expiration_candidate(self) -> bool:
        return self.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def pending_completion(self) -> bool:
        return self.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    def _to(self, target: TxnState, now_ms: int, **changes: object) -> TxnMetadata:
        if not can_transition(self.state, target):
            raise InvalidTransition(f"transactional id {self.transactional_id}: {self.state.display_name} -> "
                                    f"{target.display_name} is not a valid transition")
        return replace(self, state=target, txn_last_update_timestamp=now_ms, **changes)  # type: ignore[arg-type]

    def prepare_incr_producer_epoch(self, timeout_ms: int, now_ms: int) -> TxnMetadata:
        """InitProducerId on an existing id: bump the epoch (fencing older instances), back to Empty."""
        return self._to(TxnState.EMPTY, now_ms, producer_epoch=self.producer_epoch + 1, txn_timeout_ms=timeout_ms,
                        topic_partitions=frozenset(), txn_start_timestamp=-1,
                        last_producer_epoch=self.producer_epoch)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now_ms: int) -> TxnMetadata:
        """Epoch exhausted: continue as a new producer id at epoch 0."""
        return self._to(TxnState.EMPTY, now_ms, producer_id=new_producer_id, producer_epoch=0,
                        txn_timeout_ms=timeout_ms, topic_partitions=frozenset(), txn_start_timestamp=-1,
                        last_producer_id=self.producer_id, last_producer_epoch=self.producer_epoch)

    def prepare_add_partitions(self, partitions: frozenset[TopicPartition], now_ms: int) -> TxnMetadata:
        """AddPartitionsToTxn/AddOffsetsToTxn: Ongoing, starting the transaction's clock if it was idle."""
        starting = self.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
        return self._to(TxnState.ONGOING, now_ms, topic_partitions=self.topic_partitions | partitions,
                        txn_start_timestamp=now_ms if starting else self.txn_start_timestamp)

    def prepare_abort_or_commit(self, commit: bool, now_ms: int) -> TxnMetadata:
        return self._to(TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT, now_ms)

    def prepare_complete(self, now_ms: int) -> TxnMetadata:
        """After every marker is written: CompleteCommit/CompleteAbort, partitions cleared."""
        target = TxnState.COMPLETE_COMMIT if self.state == TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        return self._to(target, now_ms, topic_partitions=frozenset())

    def prepare_fence_producer_epoch(self, now_ms: int) -> TxnMetadata:
        """A timed-out or fenced Ongoing transaction: bump the epoch so the zombie is fenced, then abort."""
        return self._to(TxnState.PREPARE_EPOCH_FENCE, now_ms, producer_epoch=self.producer_epoch + 1,
                        last_producer_epoch=self.producer_epoch)

    def prepare_dead(self, now_ms: int) -> TxnMetadata:
        """transactional.id.expiration.ms passed while idle: the id is removed (a tombstone is written)."""
        return self._to(TxnState.DEAD, now_ms, topic_partitions=frozenset())
