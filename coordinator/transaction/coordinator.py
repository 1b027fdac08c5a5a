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
from typing import Any

from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.records import Record, build_batch, decode_batch, iter_whole_batches

from ..hashing import partition_for
from ..timers import Timers
from .log import decode_key, decode_value, encode_key, encode_value, metadata_from
from .state import TopicPartition, TxnMetadata, TxnState

TRANSACTION_STATE_TOPIC = "__transaction_state"
OFFSETS_TOPIC = "__consumer_offsets"
COORDINATOR_EPOCH = 0
_READ_CHUNK = 1 << 20
RETRY_BACKOFF_MS = 100
RETRY_BACKOFF_MAX_MS = 1000
# Kafka's TransactionMarkerRequestCompletionHandler retries these marker errors. Any other error
# is logged and the partition given up, as before (Kafka gives up on UNSUPPORTED_VERSION that way
# and treats the errors it does not expect as fatal, which a single node cannot hand to a peer).
_RETRIABLE_MARKER_ERRORS = frozenset({ErrorCode.kafka_storage_error, ErrorCode.not_leader_or_follower,
                                      ErrorCode.not_enough_replicas, ErrorCode.not_enough_replicas_after_append,
                                      ErrorCode.request_timed_out})

# Named points of ending a transaction where a test may make the broker die as kill -9 would (the
# broker's crash points, broker/crash_points.py): Prepare* appended; the first marker written (with
# more partitions, the others not yet); every marker written and Complete* not yet appended.
CRASH_POINTS = ("after_prepare_commit", "after_prepare_abort", "after_first_marker", "before_complete_commit",
                "before_complete_abort")

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


class TransactionCoordinator:
    def __init__(self, logs: Any, allocate_producer_id: Callable[[], int], clock: Any, config: TxnConfig,
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
        self._complete_group_transaction = complete_group_transaction
        self._notify = notify
        self._schedule = schedule
        self.timers = timers if timers is not None else Timers(clock)
        self.txns: dict[str, TxnMetadata] = {}
        self._completions: dict[str, _Completion] = {}
        # Called with a CRASH_POINTS name as the flow passes it; the broker's hook may end the process.
        self.crash_point: Callable[[str], None] = _no_crash
        # False until `__transaction_state` is replayed: requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS.
        self.loaded = False

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

    def _write(self, meta: TxnMetadata | None, transactional_id: str) -> None:
        """Append the new state (or a tombstone) durably, then install it in memory."""
        self._ensure_topic()
        value = encode_value(meta, self.config.log_value_version) if meta is not None else None
        now = self._clock.now_ms()
        batch = build_batch([Record(encode_key(transactional_id), value, (), now)])
        self._logs.partition(TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id)).append(batch, now)
        if meta is None:
            self.txns.pop(transactional_id, None)
        else:
            self.txns[transactional_id] = meta

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
        log = self._logs.partition(TRANSACTION_STATE_TOPIC, partition)
        position, end = log.log_start_offset, log.log_end_offset
        while position < end:
            chunk = log.read(position, _READ_CHUNK).records
            advanced = False
            for pos, header in iter_whole_batches(chunk):
                if header.next_offset <= position or header.is_control:
                    position = max(position, header.next_offset)
                    continue
                for record in decode_batch(chunk, pos).records:
                    self._replay(record)
                position, advanced = header.next_offset, True
                yield
            if not advanced:
                break

    def _replay(self, record: Record) -> None:
        if record.key is None:
            return
        transactional_id = decode_key(record.key)
        value = decode_value(record.value)
        if value is None:
            self.txns.pop(transactional_id, None)
        else:
            self.txns[transactional_id] = metadata_from(transactional_id, value)

    # --- requests --------------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int, given_pid: int = -1,
                         given_epoch: int = -1) -> tuple[int, int]:
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
        if given_pid >= 0 and given_pid not in (meta.producer_id, meta.last_producer_id):
            raise _error(ErrorCode.producer_fenced, f"producer id {given_pid} is not current for {transactional_id}")
        if meta.pending_completion:
            raise _error(ErrorCode.concurrent_transactions, "the previous transaction is still completing")
        if meta.state == TxnState.ONGOING:
            # The previous instance left a transaction open: fence it by bumping the epoch and abort.
            # The client retries on CONCURRENT_TRANSACTIONS and then gets the new epoch.
            self._abort(transactional_id, meta.prepare_fence_producer_epoch(now), now)
            raise _error(ErrorCode.concurrent_transactions, "aborting the open transaction of a previous instance")
        if meta.is_epoch_exhausted:
            bumped = meta.prepare_producer_id_rotation(self._allocate(), timeout_ms, now)
        else:
            bumped = meta.prepare_incr_producer_epoch(timeout_ms, now)
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
                       partitions: Iterable[TopicPartition]) -> None:
        meta = self._current(transactional_id, producer_id, producer_epoch)
        wanted = frozenset(partitions)
        if meta.state == TxnState.ONGOING and wanted <= meta.topic_partitions:
            return  # a retry: nothing new to write
        if meta.state == TxnState.PREPARE_EPOCH_FENCE:
            raise _error(ErrorCode.producer_fenced, "the transaction is being fenced")
        self._write(meta.prepare_add_partitions(wanted, self._clock.now_ms()), transactional_id)

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str,
                    offsets_partitions: int) -> None:
        self.add_partitions(transactional_id, producer_id, producer_epoch,
                            [(OFFSETS_TOPIC, partition_for(group_id, offsets_partitions))])

    def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> None:
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
            self._write(meta.prepare_abort_or_commit(True, now), transactional_id)
            self.crash_point("after_prepare_commit")
            self._schedule(lambda: self._write_markers_and_complete(transactional_id))
        else:
            self._abort(transactional_id, meta, now)

    def _abort(self, transactional_id: str, meta: TxnMetadata, now: int) -> None:
        self._write(meta.prepare_abort_or_commit(False, now), transactional_id)
        self.crash_point("after_prepare_abort")
        self._schedule(lambda: self._write_markers_and_complete(transactional_id))

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
        for topic, partition in sorted(job.remaining):
            try:
                self._write_marker(meta, topic, partition, commit)
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

    def _write_marker(self, meta: TxnMetadata, topic: str, partition: int, commit: bool) -> None:
        if topic == OFFSETS_TOPIC:
            self._complete_group_transaction(partition, meta.producer_id, meta.producer_epoch, commit,
                                             COORDINATOR_EPOCH)
        else:
            log = self._logs.partition(topic, partition)
            if log is None:
                return  # deleted since it joined the transaction
            log.append_control(meta.producer_id, meta.producer_epoch, COORDINATOR_EPOCH, commit,
                               self._clock.now_ms())
        self._notify((topic, partition))

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
                self._abort(transactional_id, meta.prepare_fence_producer_epoch(now), now)
                aborted.append(transactional_id)
        return aborted

    def expire_idle(self) -> list[str]:
        """transactional.id.expiration.ms: idle ids are removed with a tombstone."""
        if not self.loaded:
            return []  # a half-replayed id may not show its latest state yet
        now = self._clock.now_ms()
        expired = []
        for transactional_id, meta in list(self.txns.items()):
            if meta.is_expiration_candidate and now - meta.txn_last_update_timestamp > self.config.id_expiration_ms:
                self._write(None, transactional_id)
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
