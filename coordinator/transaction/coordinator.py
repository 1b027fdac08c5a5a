"""TransactionCoordinator: transactional ids, their producer ids and epochs, and the two-phase end.

Follows Kafka's TransactionCoordinator (TV1, the client path):
- a transactional id lives on `__transaction_state-{partition_for(id, N)}`; every state change is
  appended there before it is installed in memory (prepare, write, complete);
- EndTxn appends PrepareCommit/PrepareAbort and answers; markers are then written to every
  partition of the transaction (data partitions and `__consumer_offsets` for added groups), and
  finally CompleteCommit/CompleteAbort is appended. A request for the id while markers are pending
  gets CONCURRENT_TRANSACTIONS, which clients retry;
- on load, the topic is replayed; a transaction found in Prepare* is driven to completion.
Single node: the coordinator epoch is the partition's leader epoch, 0.

Every state change goes through Kafka's prepare/complete pair (`TxnMetadata.with_pending` while the
record is appended, `complete_transition` once it is durable); markers go through the one
`MarkerWriter` the WriteTxnMarkers handler uses too.

Transaction version 2 (KIP-890, when `transaction.version` is 2): a client's EndTxn v5 bumps the
epoch at every commit or abort and gets it back (Kafka's endTransaction, with its retry rules);
an abort needs no partition; a transactional Produce v12 / TxnOffsetCommit v5 adds its partition
itself (`add_partitions` with client version 2, Kafka's AddPartitionsToTxn v5 from the broker);
AddPartitionsToTxn v4 `verify_only` is `verify_partitions`. The client version of the transaction
is kept in TransactionLogValue's ClientTransactionVersion tag.

Disk faults (Kafka's TransactionMarkerRequestCompletionHandler and TransactionMarkerChannelManager):
a marker that cannot be written (KAFKA_STORAGE_ERROR) is retried, only for the partitions still
without one, until it is written; Complete* is appended only once every marker is, and a failed
Complete* append is retried the same way. Meanwhile the id stays in Prepare* (its producer gets
CONCURRENT_TRANSACTIONS). Retries back off from retry.backoff.ms to retry.backoff.max.ms (Kafka's
client defaults, 100 ms and 1 s) on the coordinators' timers, which stop with the broker; a restart
re-sends the markers of every Prepare* id. Where Kafka's coordinator would resign on a failed
`__transaction_state` append (NOT_COORDINATOR) and let the next leader finish, a single node has no
other coordinator, so it keeps retrying.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from minikafka.coordinator.hashing import partition_for
from minikafka.coordinator.internal_topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from minikafka.coordinator.ports import LogManager, PartitionLog
from minikafka.coordinator.replay import iter_partition_batches
from minikafka.coordinator.timers import Timers
from minikafka.coordinator.transaction.log import decode_key, decode_value, encode_key, encode_value, metadata_from
from minikafka.coordinator.transaction.markers import MarkerWriter
from minikafka.coordinator.transaction.state import (
    SHORT_MAX,
    TV2,
    TopicPartition,
    TxnMetadata,
    TxnState,
)
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    Record,
    build_one_record_batch,
)
from minikafka.storage.clock import Clock
from minikafka.storage.errors import UnknownTopicOrPartition
from minikafka.storage.origin import AppendOrigin

COORDINATOR_EPOCH = 0
RETRY_BACKOFF_MS = 100
RETRY_BACKOFF_MAX_MS = 1000
# Kafka's TransactionMarkerRequestCompletionHandler retries these marker errors. Any other error
# is logged and the partition given up, as before (Kafka gives up on UNSUPPORTED_VERSION that way
# and treats the errors it does not expect as fatal, which a single node cannot hand to a peer).
_RETRIABLE_MARKER_ERRORS = frozenset({ErrorCode.kafka_storage_error, ErrorCode.not_leader_or_follower,
                                      ErrorCode.not_enough_replicas, ErrorCode.not_enough_replicas_after_append,
                                      ErrorCode.request_timed_out})

_log = logging.getLogger("minikafka.coordinator.transaction")


def _no_crash(_point: str) -> None:
    """The default crash point hook: carry on."""


def _error(code: ErrorCode, message: str) -> KafkaError:
    return KafkaError(message, code=code)


@dataclass(frozen=True, slots=True)
class TxnConfig:
    num_partitions: int = 50
    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 604_800_000
    log_value_version: int = 0  # transaction.version 0: TransactionLogValue v0
    # transaction.version (Kafka's finalized feature): 2 enables KIP-890 for clients that ask for it
    transaction_version: int = 0


@dataclass(slots=True)
class _Completion:
    """In-memory progress of one Prepare* transaction (Kafka's txnMetadata.removePartition): the
    partitions still without a marker, and the current streak of failed attempts."""

    producer_id: int
    producer_epoch: int
    remaining: set[TopicPartition] = field(default_factory=set)
    failures: int = 0


def retry_backoff_ms(failures: int) -> int:
    """Delay before the next attempt after `failures` failed ones in a row: exponential, bounded."""
    return min(RETRY_BACKOFF_MS << min(failures - 1, 16), RETRY_BACKOFF_MAX_MS)


def _is_own_producer_id(meta: TxnMetadata, producer_id: int, producer_epoch: int) -> bool:
    """Kafka's isValidProducerId: the id has no epoch yet, or `producer_id` is its current one, or its
    previous one at an exhausted epoch (the client asks again for the rotation whose answer it lost).
    The epoch itself is checked by the bump (`prepare_incr_producer_epoch`)."""
    return (meta.producer_epoch == NO_PRODUCER_EPOCH or producer_id == meta.producer_id
            or (producer_id == meta.last_producer_id and producer_epoch >= SHORT_MAX - 1))


# Every state ListTransactions and DescribeTransactions may name, for counts that name each one.
TRANSACTION_STATES = tuple(state.display_name for state in TxnState)


class TransactionCoordinator:
    def __init__(self, logs: LogManager, allocate_producer_id: Callable[[], int], clock: Clock, config: TxnConfig,
                 complete_group_transaction: Callable[[int, int, int, bool, int], None],
                 notify: Callable[[TopicPartition], None], schedule: Callable[[Callable[[], None]], None],
                 timers: Timers | None = None) -> None:
        """`schedule` runs a job soon on the event loop (the first attempt at the markers, after the
        EndTxn answer); `timers` run the retries and must be started and stopped by the owner (the
        broker passes the group coordinator's, which live as long as it serves)."""
        self._logs = logs
        self._allocate = allocate_producer_id
        self._clock = clock
        self.config = config
        self.markers = MarkerWriter(logs, complete_group_transaction, notify, clock)
        self._schedule = schedule
        self.timers = timers if timers is not None else Timers(clock)
        self.txns: dict[str, TxnMetadata] = {}
        # per id with a state record: (partition count, its partition, its encoded key); see _placement
        self._placements: dict[str, tuple[int, int, bytes]] = {}
        self._completions: dict[str, _Completion] = {}
        # Called with a name of crash_points.CRASH_POINTS as the flow passes it; the broker's hook may end the process.
        self.crash_point: Callable[[str], None] = _no_crash
        # False until `__transaction_state` is replayed: requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS.
        self.loaded = False

    def reset(self) -> None:
        """A broker reset: every transactional id forgotten, as on a first start with `__transaction_state`
        not yet created. Marker jobs still scheduled find no transaction and end; their retries lived on the
        shared timers, which the group coordinator's reset cleared. Producer ids are not handed out again:
        the allocator keeps counting, so a producer connected across the reset never shares its id with a
        new one."""
        self.txns.clear()
        self._placements.clear()
        self._completions.clear()
        self.loaded = True

    # --- __transaction_state ------------------------------------------------------------

    @property
    def num_partitions(self) -> int:
        meta = self._logs.topic(TRANSACTION_STATE_TOPIC)
        return meta.partitions if meta is not None else self.config.num_partitions

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def _ensure_topic(self) -> None:
        if self._logs.topic(TRANSACTION_STATE_TOPIC) is None:
            self._logs.create_topic(TRANSACTION_STATE_TOPIC, self.config.num_partitions,
                                    {"cleanup.policy": "compact"}, internal=True)

    def _placement(self, transactional_id: str) -> tuple[int, bytes]:
        """The id's `__transaction_state` partition and record key, worked out once per id (the
        Java string hash is a Python loop over the id) for as long as the partition count holds."""
        partitions = self.num_partitions
        known = self._placements.get(transactional_id)
        if known is None or known[0] != partitions:
            known = (partitions, partition_for(transactional_id, partitions), encode_key(transactional_id))
            self._placements[transactional_id] = known
        return known[1], known[2]

    def _state_log(self, partition: int) -> PartitionLog:
        log = self._logs.partition(TRANSACTION_STATE_TOPIC, partition)
        if log is None:
            raise LookupError(f"{TRANSACTION_STATE_TOPIC}-{partition} does not exist")
        return log

    def _write(self, meta: TxnMetadata, transactional_id: str) -> None:
        """Append the new state durably, then install it in memory; Dead (an expired id) is appended as
        a tombstone and removes the id.

        Kafka's prepare/complete: while the record is appended the installed metadata carries the
        pending state (a second prepare is refused); a failed append restores it as it was."""
        self._ensure_topic()
        partition, key = self._placement(transactional_id)
        dead = meta.state == TxnState.DEAD
        value = None if dead else encode_value(meta, self.config.log_value_version)
        current = self.txns.get(transactional_id)
        if current is not None:
            self.txns[transactional_id] = current.with_pending(meta)
        now = self._clock.now_ms()
        batch, header = build_one_record_batch(key, value, now)
        try:
            self._state_log(partition).append(batch, now, [(0, header)], origin=AppendOrigin.COORDINATOR)
        except BaseException:
            if current is not None:
                self.txns[transactional_id] = current
            else:
                self._placements.pop(transactional_id, None)
            raise
        if dead:
            self.txns.pop(transactional_id, None)
            self._placements.pop(transactional_id, None)
        elif current is None:
            self.txns[transactional_id] = meta
        else:
            self.txns[transactional_id] = self.txns[transactional_id].complete_transition(meta)

    def load(self) -> None:
        """Replay `__transaction_state`; finish transactions a crash left in Prepare*."""
        for _batch in self.load_steps():
            pass

    def load_steps(self) -> Iterator[None]:
        """`load`, one step per replayed batch, so a broker can keep serving between steps; `loaded`
        turns True after the last one."""
        if self._logs.topic(TRANSACTION_STATE_TOPIC) is not None:
            for partition in range(self.num_partitions):
                yield from self._replay_partition(partition)
            for transactional_id, meta in list(self.txns.items()):
                if meta.pending_completion:
                    _log.info("completing transaction left in %s: %s", meta.state.display_name, transactional_id)
                    self._write_markers_and_complete(transactional_id)
        self.loaded = True

    def _replay_partition(self, partition: int) -> Iterator[None]:
        for batch in iter_partition_batches(self._state_log(partition), skip_control=True):
            for record in batch.records:
                self._replay(record)
            yield

    def _replay(self, record: Record) -> None:
        if record.key is None:
            return
        transactional_id = decode_key(record.key)
        value = decode_value(record.value)
        if value is None:
            self.txns.pop(transactional_id, None)
            self._placements.pop(transactional_id, None)
        else:
            self.txns[transactional_id] = metadata_from(transactional_id, value)

    # --- requests --------------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int, given_pid: int = NO_PRODUCER_ID,
                         given_epoch: int = NO_PRODUCER_EPOCH) -> tuple[int, int]:
        """Kafka's handleInitProducerId for a transactional id. A producer id and epoch given by the
        client (KIP-360, InitProducerId v3+: a producer bumping its epoch to recover from an abortable
        error) must still be its own: the current producer id, or the previous one at an exhausted
        epoch (a retried rotation); the epoch the current one (it bumps) or the previous one (a retry
        whose answer was lost: the current epoch again). Anything else is PRODUCER_FENCED."""
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            raise _error(ErrorCode.invalid_transaction_timeout,
                         f"transaction.timeout.ms {timeout_ms} is above transaction.max.timeout.ms "
                         f"{self.config.max_timeout_ms}")
        now = self._clock.now_ms()
        meta = self.txns.get(transactional_id)
        if meta is None:
            fresh = TxnMetadata(transactional_id, self._allocate(), 0, timeout_ms, TxnState.EMPTY,
                                txn_last_update_timestamp=now)
            self._write(fresh, transactional_id)
            return fresh.producer_id, fresh.producer_epoch
        expected_epoch = None if given_pid == NO_PRODUCER_ID else given_epoch
        if expected_epoch is not None and not _is_own_producer_id(meta, given_pid, expected_epoch):
            raise _error(ErrorCode.producer_fenced, f"producer id {given_pid} (epoch {given_epoch}) is not current "
                         f"for {transactional_id}: producer id {meta.producer_id}, epoch {meta.producer_epoch}")
        if meta.pending_completion:
            raise _error(ErrorCode.concurrent_transactions, "the previous transaction is still completing")
        if meta.state == TxnState.ONGOING:
            # The previous instance left a transaction open: fence it by bumping the epoch and abort.
            # The client retries on CONCURRENT_TRANSACTIONS and then gets the new epoch.
            self._abort(transactional_id, meta.prepare_fence_producer_epoch(now), now, self.config.transaction_version)
            raise _error(ErrorCode.concurrent_transactions, "aborting the open transaction of a previous instance")
        if meta.is_epoch_exhausted and expected_epoch in (None, meta.producer_epoch):
            bumped = meta.prepare_producer_id_rotation(self._allocate(), timeout_ms, now,
                                                       record_last_epoch=expected_epoch is not None)
        else:
            bumped = meta.prepare_incr_producer_epoch(timeout_ms, now, expected_epoch)
        self._write(bumped, transactional_id)
        return bumped.producer_id, bumped.producer_epoch

    def _current(self, transactional_id: str, producer_id: int, producer_epoch: int) -> TxnMetadata:
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            raise _error(ErrorCode.invalid_producer_id_mapping,
                         f"producer id {producer_id} is not mapped to {transactional_id}")
        if producer_epoch < meta.producer_epoch:
            raise _error(ErrorCode.producer_fenced,
                         f"epoch {producer_epoch} of {transactional_id} is fenced by {meta.producer_epoch}")
        if producer_epoch > meta.producer_epoch:
            raise _error(ErrorCode.invalid_producer_epoch, f"epoch {producer_epoch} is ahead of the coordinator")
        if meta.pending_completion:
            raise _error(ErrorCode.concurrent_transactions, "the previous transaction is still completing")
        return meta

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition], client_transaction_version: int = 0) -> None:
        """AddPartitionsToTxn; with client version 2, the implicit add of a Produce v12 or
        TxnOffsetCommit v5 (Kafka's AddPartitionsToTxn v5 from the partition leader)."""
        meta = self._current(transactional_id, producer_id, producer_epoch)
        wanted = frozenset(partitions)
        if meta.state == TxnState.ONGOING and wanted <= meta.topic_partitions:
            return  # a retry: nothing new to write
        if meta.state == TxnState.PREPARE_EPOCH_FENCE:
            raise _error(ErrorCode.producer_fenced, "the transaction is being fenced")
        self._write(meta.prepare_add_partitions(wanted, self._clock.now_ms(), client_transaction_version),
                    transactional_id)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, KafkaError | None]:
        """AddPartitionsToTxn v4+ `verify_only` (Kafka's handleVerifyPartitionsInTransaction): per
        partition, None when it is in the producer's transaction, else TRANSACTION_ABORTABLE; a
        KafkaError raised (the producer's, not a partition's) is every partition's. Nothing is written."""
        meta = self.txns.get(transactional_id)
        if not self.loaded:
            raise _error(ErrorCode.coordinator_load_in_progress, "the transaction coordinator is loading")
        if meta is None or meta.producer_id != producer_id:
            raise _error(ErrorCode.invalid_producer_id_mapping, f"{transactional_id} is not producer id {producer_id}")
        if meta.producer_epoch != producer_epoch:
            raise _error(ErrorCode.producer_fenced, f"epoch {producer_epoch} is not {meta.producer_epoch}")
        if meta.pending_completion:
            raise _error(ErrorCode.concurrent_transactions, "the previous transaction is still completing")
        return {tp: None if tp in meta.topic_partitions
                else _error(ErrorCode.transaction_abortable, f"{tp[0]}-{tp[1]} is not in the transaction")
                for tp in partitions}

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str,
                    offsets_partitions: int) -> None:
        self.add_partitions(transactional_id, producer_id, producer_epoch,
                            [(OFFSETS_TOPIC, partition_for(group_id, offsets_partitions))])

    def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                        client_transaction_version: int = 0) -> tuple[int, int]:
        """EndTxn. Returns the producer id and epoch the client continues with: from client version
        2 on, the bumped ones (Kafka's EndTxn v5 response); below it, no id and no epoch (-1, -1)."""
        if client_transaction_version >= TV2:
            return self._end_transaction_v2(transactional_id, producer_id, producer_epoch, commit)
        self._end_transaction_v1(transactional_id, producer_id, producer_epoch, commit)
        return NO_PRODUCER_ID, NO_PRODUCER_EPOCH

    def _end_transaction_v1(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> None:
        meta = self.txns.get(transactional_id)
        if meta is not None and meta.producer_id == producer_id and meta.producer_epoch == producer_epoch:
            finished = {TxnState.COMPLETE_COMMIT: True, TxnState.COMPLETE_ABORT: False}
            if meta.state in finished:
                if finished[meta.state] == commit:
                    return  # a retried EndTxn of a transaction that is already complete
                raise _error(ErrorCode.invalid_txn_state, f"the last transaction was {meta.state.display_name}")
            pending = {TxnState.PREPARE_COMMIT: True, TxnState.PREPARE_ABORT: False}
            if meta.state in pending:
                if pending[meta.state] == commit:
                    raise _error(ErrorCode.concurrent_transactions, "markers are still being written")
                raise _error(ErrorCode.invalid_txn_state, f"the transaction is in {meta.state.display_name}")
        meta = self._current(transactional_id, producer_id, producer_epoch)
        if meta.state != TxnState.ONGOING:
            raise _error(ErrorCode.invalid_txn_state, f"no transaction is ongoing ({meta.state.display_name})")
        now = self._clock.now_ms()
        if commit:
            self._write(meta.prepare_abort_or_commit(True, now, 0), transactional_id)
            self.crash_point("after_prepare_commit")
            self._schedule(lambda: self._write_markers_and_complete(transactional_id))
        else:
            self._abort(transactional_id, meta, now, 0)

    def _end_transaction_v2(self, transactional_id: str, producer_id: int, producer_epoch: int,
                            commit: bool) -> tuple[int, int]:
        """Kafka's endTransaction for transaction version 2: the epoch bumps at every end, so a retry
        is told apart by the epoch it carries (one below the bumped one, or the last epoch of the
        previous producer id after a rotation)."""
        if not transactional_id:
            raise _error(ErrorCode.invalid_request, "EndTxn needs a transactional id")
        meta = self.txns.get(transactional_id)
        if meta is None:
            raise _error(ErrorCode.invalid_producer_id_mapping, f"{transactional_id} is not known")
        retry_on_overflow = (meta.last_producer_id == producer_id and producer_epoch == SHORT_MAX - 1
                             and meta.producer_epoch == 0)
        retry_on_epoch_bump = meta.producer_epoch == producer_epoch + 1
        is_retry = retry_on_epoch_bump or retry_on_overflow
        if meta.pending_completion:
            valid_epoch = retry_on_epoch_bump
        elif meta.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            valid_epoch = is_retry or producer_epoch == meta.producer_epoch
        else:
            valid_epoch = producer_epoch == meta.producer_epoch
        if meta.producer_id != producer_id and not retry_on_overflow:
            raise _error(ErrorCode.invalid_producer_id_mapping,
                         f"producer id {producer_id} is not mapped to {transactional_id}")
        if not valid_epoch:
            raise _error(ErrorCode.producer_fenced,
                         f"epoch {producer_epoch} of {transactional_id} is fenced by {meta.producer_epoch}")
        result = "commit" if commit else "abort"
        invalid = _error(ErrorCode.invalid_txn_state, f"cannot {result} in {meta.state.display_name}")
        if meta.state == TxnState.ONGOING:
            pass
        elif meta.state == TxnState.COMPLETE_COMMIT:
            if commit and is_retry:
                return meta.producer_id, meta.producer_epoch  # a retried commit that completed
            if commit or is_retry:
                raise invalid  # a second commit of nothing, or the retry of an abort that never was
        elif meta.state == TxnState.COMPLETE_ABORT:
            if commit:
                raise invalid
            if is_retry:
                return meta.producer_id, meta.producer_epoch  # a retried abort that completed
        elif meta.pending_completion:
            if commit == (meta.state == TxnState.PREPARE_COMMIT):
                raise _error(ErrorCode.concurrent_transactions, "markers are still being written")
            raise invalid
        elif meta.state == TxnState.EMPTY:
            if commit:
                raise invalid
        else:
            raise invalid  # Dead and PrepareEpochFence are never installed
        now = self._clock.now_ms()
        if commit:
            prepared = meta.prepare_abort_or_commit(True, now, TV2, self._next_producer_id(meta))
            self._write(prepared, transactional_id)
            self.crash_point("after_prepare_commit")
            self._schedule(lambda: self._write_markers_and_complete(transactional_id))
        else:
            prepared = self._abort(transactional_id, meta, now, TV2)
        return prepared.producer_id, prepared.producer_epoch

    def _next_producer_id(self, meta: TxnMetadata) -> int:
        """TV2: the producer id a transaction ending at an exhausted epoch continues with."""
        return self._allocate() if meta.producer_epoch >= SHORT_MAX - 1 else NO_PRODUCER_ID

    def _abort(self, transactional_id: str, meta: TxnMetadata, now: int,
               client_transaction_version: int) -> TxnMetadata:
        next_producer_id = self._next_producer_id(meta) if client_transaction_version >= TV2 else NO_PRODUCER_ID
        prepared = meta.prepare_abort_or_commit(False, now, client_transaction_version, next_producer_id)
        self._write(prepared, transactional_id)
        self.crash_point("after_prepare_abort")
        self._schedule(lambda: self._write_markers_and_complete(transactional_id))
        return prepared

    def _write_markers_and_complete(self, transactional_id: str) -> None:
        """Write the markers still missing, then Complete*; on a retriable failure, try again later."""
        meta = self.txns.get(transactional_id)
        if meta is None or not meta.pending_completion:
            self._completions.pop(transactional_id, None)
            return
        job = self._completions.get(transactional_id)
        if job is None or (job.producer_id, job.producer_epoch) != (meta.producer_id, meta.producer_epoch):
            job = _Completion(meta.producer_id, meta.producer_epoch, set(meta.topic_partitions))
            self._completions[transactional_id] = job
        commit = meta.state == TxnState.PREPARE_COMMIT
        failure: str | None = None
        now = self._clock.now_ms()
        for topic, partition in sorted(job.remaining):
            try:
                self._write_marker(meta, topic, partition, commit, now)
            except KafkaError as exc:
                if exc.error_code not in _RETRIABLE_MARKER_ERRORS:
                    _log.warning("marker for %s-%d of %s failed for good, not retried: %s", topic, partition,
                                 transactional_id, exc)
                    job.remaining.discard((topic, partition))
                elif failure is None:
                    failure = f"marker for {topic}-{partition}: {exc}"
                continue
            job.remaining.discard((topic, partition))
            if len(job.remaining) == len(meta.topic_partitions) - 1:
                self.crash_point("after_first_marker")
        if failure is None:
            self.crash_point("before_complete_commit" if commit else "before_complete_abort")
            completed = meta.prepare_complete(self._clock.now_ms())
            try:
                self._write(completed, transactional_id)
            except KafkaError as exc:
                if exc.error_code not in _RETRIABLE_MARKER_ERRORS:
                    raise
                failure = f"{completed.state.display_name} to {TRANSACTION_STATE_TOPIC}: {exc}"
        if failure is None:
            del self._completions[transactional_id]
            if job.failures:
                _log.info("transaction of %s completed after %d failed attempts", transactional_id, job.failures)
            return
        job.failures += 1
        delay = retry_backoff_ms(job.failures)
        if job.failures == 1:  # once per failure streak: a full disk would otherwise log every second
            _log.warning("cannot complete the transaction of %s yet (%s); it stays in %s, retrying every %d ms "
                         "at most", transactional_id, failure, meta.state.display_name, RETRY_BACKOFF_MAX_MS)
        self.timers.schedule(("complete transaction", transactional_id), self._clock.now_ms() + delay,
                             lambda: self._write_markers_and_complete(transactional_id))

    def _write_marker(self, meta: TxnMetadata, topic: str, partition: int, commit: bool, now_ms: int) -> None:
        """The marker carries the Prepare* epoch: under TV2 the bumped one, which fences a late
        produce of the transaction's own epoch at the partition."""
        try:
            self.markers.write(meta.producer_id, meta.producer_epoch, COORDINATOR_EPOCH, topic, partition, commit,
                               now_ms)
        except UnknownTopicOrPartition:
            _log.info("no marker for %s-%d of %s: deleted since it joined the transaction", topic, partition,
                      meta.transactional_id)

    def verify_partition(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                         topic: str, partition: int) -> None:
        """Transactional produce: the partition must be in the producer's ongoing transaction."""
        if not self.loaded:
            # Kafka's verification answers COORDINATOR_LOAD_IN_PROGRESS, shown to producers as this
            # retriable code (ReplicaManager's mapping of coordinator errors for Produce).
            raise _error(ErrorCode.not_enough_replicas, "the transaction coordinator is loading")
        meta = self.txns.get(transactional_id) if transactional_id is not None else None
        if meta is None or meta.producer_id != producer_id:
            raise _error(ErrorCode.invalid_producer_id_mapping, "unknown transactional producer")
        if producer_epoch < meta.producer_epoch:
            raise _error(ErrorCode.invalid_producer_epoch, "the producer epoch is fenced")
        if meta.state != TxnState.ONGOING or (topic, partition) not in meta.topic_partitions:
            raise _error(ErrorCode.invalid_txn_state, f"{topic}-{partition} was not added to the transaction")

    # --- timeouts and expiry -------------------------------------------------------------

    def abort_timed_out(self) -> list[str]:
        """Ongoing transactions past their timeout are aborted with a bumped epoch (zombie fenced)."""
        if not self.loaded:
            return []  # a half-replayed id may not show its latest state yet
        now = self._clock.now_ms()
        aborted = []
        for transactional_id, meta in list(self.txns.items()):
            if meta.state == TxnState.ONGOING and now - meta.txn_start_timestamp > meta.txn_timeout_ms:
                self._abort(transactional_id, meta.prepare_fence_producer_epoch(now), now,
                            meta.client_transaction_version)
                aborted.append(transactional_id)
        return aborted

    def expire_idle(self) -> list[str]:
        """transactional.id.expiration.ms: idle ids go to Dead (Kafka's prepareDead), a tombstone."""
        if not self.loaded:
            return []  # a half-replayed id may not show its latest state yet
        now = self._clock.now_ms()
        expired = []
        for transactional_id, meta in list(self.txns.items()):
            if meta.is_expiration_candidate and now - meta.txn_last_update_timestamp > self.config.id_expiration_ms:
                self._write(meta.prepare_dead(now), transactional_id)
                expired.append(transactional_id)
        return expired

    # --- admin -----------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> TxnMetadata:
        meta = self.txns.get(transactional_id)
        if meta is None:
            raise _error(ErrorCode.transactional_id_not_found, f"{transactional_id} is not known")
        return meta

    def list(self, states: set[TxnState] | None, producer_ids: set[int] | None,
             min_duration_ms: int = -1) -> list[TxnMetadata]:
        now = self._clock.now_ms()
        return [
            meta for meta in self.txns.values()
            if (not states or meta.state in states) and (not producer_ids or meta.producer_id in producer_ids)
            and (min_duration_ms < 0 or (meta.state == TxnState.ONGOING
                                        and now - meta.txn_start_timestamp >= min_duration_ms))
        ]
