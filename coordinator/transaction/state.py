"""Transaction states and metadata, with Kafka's transition rules (TransactionMetadata.scala).

The table of valid previous states is Kafka's for transaction.version 0/1 (the Oct-2024 trunk);
Kafka 4.0 also lets Empty/CompleteCommit/CompleteAbort go to PrepareAbort, for transaction.version
2 clients aborting without a partition (apache/kafka PR #17698): that extra edge is allowed only by
`prepare_abort_or_commit` with client_transaction_version 2 (Kafka's allowedEmptyAbort).

Transaction version 2 (KIP-890): every EndTxn bumps the epoch in Prepare* (the markers carry the
bumped epoch, so a late produce of the old epoch is refused at the partition); when the epoch is
exhausted, Prepare* carries the next producer id, which Complete* switches to at epoch 0.

Metadata changes follow Kafka's prepare/complete pattern: a `prepare_*` method returns the metadata
to be written to `__transaction_state` without touching the current one; the caller installs it
once the write succeeded. So a failed write leaves the coordinator's view unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

SHORT_MAX = 32767
TV2 = 2  # the first client transaction version whose EndTxn bumps the epoch (supportsEpochBump)

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


class ProducerFenced(KafkaError):
    """InitProducerId from an instance whose expected epoch is neither the current nor the last one."""

    error_code = ErrorCode.producer_fenced


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    """One transactional id. Field order is positional API (the coordinator builds it positionally)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    # frozen so that a prepared metadata can never alias the installed one's partitions
    topic_partitions: frozenset[TopicPartition] = field(default_factory=frozenset)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    # Kafka's previousProducerId: the producer id the last written transition started from
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    next_producer_id: int = NO_PRODUCER_ID  # only set by transaction.version 2 epoch overflow
    client_transaction_version: int = 0
    # set on the installed metadata while its prepared successor is being written
    pending_state: TxnState | None = None

    @property
    def is_epoch_exhausted(self) -> bool:
        # Short.MaxValue itself is kept back so the coordinator can always fence (bump) once more
        return self.producer_epoch >= SHORT_MAX - 1

    @property
    def is_expiration_candidate(self) -> bool:
        return self.state in _EXPIRABLE

    @property
    def is_expired_candidate(self) -> bool:
        """Alias of is_expiration_candidate (Kafka's TransactionState.isExpirationAllowed)."""
        return self.is_expiration_candidate

    @property
    def is_open(self) -> bool:
        """Begun and not completed: Ongoing, its markers pending (Prepare*), or being fenced."""
        return self.state in _OPEN

    @property
    def pending_completion(self) -> bool:
        return self.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    # --- prepare / complete ------------------------------------------------------------------

    def _to(self, target: TxnState, *, empty_abort: bool = False, **changes: object) -> TxnMetadata:
        """Kafka's prepareTransitionTo: validate and build the successor; `self` is left as is.

        `empty_abort` admits the TV2 edge Empty/CompleteCommit/CompleteAbort -> PrepareAbort."""
        if self.pending_state is not None:
            raise InvalidTransition(f"transactional id {self.transactional_id}: preparing "
                                    f"{target.display_name} while {self.pending_state.display_name} is pending")
        tv2_edge = empty_abort and target == TxnState.PREPARE_ABORT and self.state in _EXPIRABLE
        if not (tv2_edge or can_transition(self.state, target)):
            raise InvalidTransition(f"transactional id {self.transactional_id}: {self.state.display_name} -> "
                                    f"{target.display_name} is not a valid transition")
        # Kafka's TxnTransitMetadata always records the producer id the transition starts from, and
        # clears nextProducerId unless the transition sets it.
        changes.setdefault("last_producer_id", self.producer_id)
        changes.setdefault("next_producer_id", NO_PRODUCER_ID)
        changes["state"] = target
        changes["pending_state"] = None
        new = self._with(changes)
        if new.producer_id < 0:
            raise ValueError(f"illegal producer id {new.producer_id}")
        if target != TxnState.DEAD and new.producer_epoch < 0:
            raise ValueError(f"illegal producer epoch {new.producer_epoch}")
        return new

    def _with(self, changes: dict[str, Any]) -> TxnMetadata:
        """dataclasses.replace at a quarter of its cost: each state change of a transaction makes a few."""
        if not changes.keys() <= _FIELD_NAMES:
            raise TypeError(f"TxnMetadata has no field {sorted(changes.keys() - _FIELD_NAMES)}")
        return _copy_with(self, changes)

    def with_pending(self, new: TxnMetadata) -> TxnMetadata:
        """The installed metadata while `new` is being written: a second prepare is refused meanwhile."""
        return self._with({"pending_state": new.state})

    def complete_transition(self, new: TxnMetadata) -> TxnMetadata:
        """Kafka's completeTransitionTo: `new` once its write succeeded, if it is the pending one."""
        if self.pending_state is not None and self.pending_state != new.state:
            raise InvalidTransition(f"transactional id {self.transactional_id}: completing "
                                    f"{new.state.display_name} while {self.pending_state.display_name} is pending")
        # a prepared metadata has no pending state of its own: install it as it is (frozen, not shared)
        return new if new.pending_state is None else new._with({"pending_state": None})

    def prepare_incr_producer_epoch(self, timeout_ms: int, now_ms: int,
                                    expected_epoch: int | None = None) -> TxnMetadata:
        """InitProducerId on an existing id: bump the epoch (fencing older instances), back to Empty.

        `expected_epoch` is KIP-360's (InitProducerId v3+ with a producer id): the current epoch
        bumps and remembers it, the last epoch is a retry answered with the current epoch, anything
        else is fenced.
        """
        if self.is_epoch_exhausted:
            raise InvalidTransition(f"no producer epoch left for producer id {self.producer_id}")
        epoch, last_epoch = self.producer_epoch + 1, NO_PRODUCER_EPOCH
        if expected_epoch is not None:
            if self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
                last_epoch = self.producer_epoch
            elif expected_epoch == self.last_producer_epoch:
                epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
            else:
                raise ProducerFenced(f"expected epoch {expected_epoch} is neither the current "
                                     f"{self.producer_epoch} nor the last {self.last_producer_epoch}")
        return self._to(TxnState.EMPTY, producer_epoch=epoch, last_producer_epoch=last_epoch,
                        txn_timeout_ms=timeout_ms, topic_partitions=frozenset(), txn_start_timestamp=-1,
                        txn_last_update_timestamp=now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool = False) -> TxnMetadata:
        """Epoch exhausted: continue as a new producer id at epoch 0.

        Kafka keeps the old epoch as the last one only for a KIP-360 caller (record_last_epoch).
        """
        return self._to(TxnState.EMPTY, producer_id=new_producer_id, producer_epoch=0,
                        last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                        txn_timeout_ms=timeout_ms, topic_partitions=frozenset(), txn_start_timestamp=-1,
                        txn_last_update_timestamp=now_ms)

    def prepare_add_partitions(self, partitions: Iterable[TopicPartition], now_ms: int,
                               client_transaction_version: int | None = None) -> TxnMetadata:
        """AddPartitionsToTxn/AddOffsetsToTxn (or a TV2 implicit add): Ongoing, starting the
        transaction's clock if it was idle. The transaction takes the client's version when given."""
        starting = self.state in _EXPIRABLE
        version = self.client_transaction_version if client_transaction_version is None else client_transaction_version
        return self._to(TxnState.ONGOING, topic_partitions=self.topic_partitions | frozenset(partitions),
                        txn_start_timestamp=now_ms if starting else self.txn_start_timestamp,
                        txn_last_update_timestamp=now_ms, client_transaction_version=version)

    def prepare_abort_or_commit(self, commit: bool, now_ms: int, client_transaction_version: int | None = None,
                                next_producer_id: int = NO_PRODUCER_ID) -> TxnMetadata:
        """EndTxn: PrepareCommit/PrepareAbort with the same partitions.

        Below transaction version 2 the epoch stays. From version 2 it bumps (the last epoch keeps
        the old one, so a retried EndTxn is recognised), `next_producer_id` is the id Complete*
        switches to when the epoch is exhausted, and an abort may start from Empty/Complete*
        (no partition added): its start time is then now (Kafka's noPartitionAdded).
        """
        target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        version = self.client_transaction_version if client_transaction_version is None else client_transaction_version
        if version < TV2:
            return self._to(target, txn_last_update_timestamp=now_ms, client_transaction_version=version)
        no_partition_added = self.state in _EXPIRABLE
        # Short.MaxValue is reached only by a fenced exhausted epoch; `next_producer_id` then
        # takes over at completion, so the epoch stays instead of overflowing int16.
        return self._to(target, empty_abort=True, producer_epoch=min(self.producer_epoch + 1, SHORT_MAX),
                        last_producer_epoch=self.producer_epoch, next_producer_id=next_producer_id,
                        txn_start_timestamp=now_ms if no_partition_added else self.txn_start_timestamp,
                        txn_last_update_timestamp=now_ms, client_transaction_version=version)

    def prepare_complete(self, now_ms: int) -> TxnMetadata:
        """After every marker is written: CompleteCommit/CompleteAbort, partitions cleared. A TV2
        transaction whose epoch ran out continues as its next producer id at epoch 0."""
        target = TxnState.COMPLETE_COMMIT if self.state == TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        if self.client_transaction_version >= TV2 and self.next_producer_id != NO_PRODUCER_ID:
            return self._to(target, producer_id=self.next_producer_id, producer_epoch=0, topic_partitions=frozenset(),
                            txn_last_update_timestamp=now_ms)
        return self._to(target, topic_partitions=frozenset(), txn_last_update_timestamp=now_ms)

    def prepare_fence_producer_epoch(self, now_ms: int | None = None) -> TxnMetadata:
        """A timed-out or fenced Ongoing transaction: bump the epoch so the zombie is fenced, then abort.

        Kafka leaves the last update timestamp alone here (the PrepareAbort that follows sets it),
        so `now_ms` is accepted for callers' convenience and unused. Kafka's hasFailedEpochFence
        is not needed: a failed write leaves the installed metadata at the old epoch.
        """
        del now_ms
        if self.producer_epoch >= SHORT_MAX:
            raise InvalidTransition(f"cannot fence producer id {self.producer_id} at epoch {SHORT_MAX}")
        return self._to(TxnState.PREPARE_EPOCH_FENCE, producer_epoch=self.producer_epoch + 1,
                        last_producer_epoch=NO_PRODUCER_EPOCH)

    def prepare_dead(self, now_ms: int | None = None) -> TxnMetadata:
        """transactional.id.expiration.ms passed while idle: the id is removed (a tombstone is written).

        Like Kafka, the timestamps are kept; `now_ms` is accepted and unused.
        """
        del now_ms
        return self._to(TxnState.DEAD, topic_partitions=frozenset())


_EXPIRABLE = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})
_OPEN = frozenset({TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE})
_FIELD_NAMES = frozenset(TxnMetadata.__dataclass_fields__)


def _compile_copy_with() -> Callable[[TxnMetadata, dict[str, Any]], TxnMetadata]:
    """A copy of a metadata with `changes` applied, each field set through its slot: the frozen class's own
    __init__ sets each through object.__setattr__, at twice the cost (as protocol/build.py does for kio's)."""
    names: dict[str, Any] = {"_new": object.__new__, "_cls": TxnMetadata}
    lines = ["def copy_with(self, changes):", "    get = changes.get", "    new = _new(_cls)"]
    for index, name in enumerate(TxnMetadata.__dataclass_fields__):
        names[f"_set{index}"] = TxnMetadata.__dict__[name].__set__
        lines.append(f"    _set{index}(new, get({name!r}, self.{name}))")
    lines.append("    return new")
    exec(compile("\n".join(lines), "<TxnMetadata copy>", "exec"), names)  # our own source, from the fields
    copy_with: Callable[[TxnMetadata, dict[str, Any]], TxnMetadata] = names["copy_with"]
    return copy_with


_copy_with = _compile_copy_with()
