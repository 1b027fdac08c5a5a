"""Transaction version 2 (KIP-890) in the coordinator and the partition: the epoch bump at every end,
its retries, the epoch overflow, the ClientTransactionVersion kept in `__transaction_state` across a
restart, the shared marker writer, and the verification guard of the producer state."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest
from minikafka.coordinator.transaction.coordinator import TransactionCoordinator, TxnConfig
from minikafka.coordinator.transaction.log import decode_value
from minikafka.coordinator.transaction.state import SHORT_MAX, InvalidTransition, TxnMetadata, TxnState
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.records import Record, build_batch, decode_batch, iter_whole_batches
from minikafka.storage.clock import ManualClock
from minikafka.storage.config import LogConfig
from minikafka.storage.errors import UnknownTopicOrPartition
from minikafka.storage.manager import LogManager
from minikafka.storage.producer_state import InvalidTxnState

START_MS = 1_700_000_000_000
TOPIC = "orders"
TID = "tv2-tid"


class Node:
    def __init__(self, data_dir: Path, clock: ManualClock, transaction_version: int = 2) -> None:
        self.logs = LogManager(data_dir, LogConfig(), clock)
        self.logs.load()
        if self.logs.topic(TOPIC) is None:
            self.logs.create_topic(TOPIC, 2, {})
        self.scheduled: list[Callable[[], None]] = []
        ids = itertools.count(1000)
        self.coordinator = TransactionCoordinator(
            self.logs, lambda: next(ids), clock,
            TxnConfig(num_partitions=2, log_value_version=1, transaction_version=transaction_version),
            complete_group_transaction=lambda *_args: None, notify=lambda _tp: None, schedule=self.scheduled.append)
        self.coordinator.load()

    def run_scheduled(self) -> None:
        for _ in range(100):
            if not self.scheduled:
                return
            self.scheduled.pop(0)()
        raise AssertionError("scheduled jobs keep scheduling more")

    def meta(self) -> TxnMetadata:
        return self.coordinator.txns[TID]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


def control_epochs(node: Node, partition: int) -> list[int]:
    log = node.logs.partition(TOPIC, partition)
    data = log.read(0, 1 << 20).records
    return [header.producer_epoch for _pos, header in iter_whole_batches(data) if header.is_control]


def test_commit_and_abort_bump_the_epoch_and_markers_carry_it(tmp_path: Path, clock: ManualClock) -> None:
    node = Node(tmp_path, clock)
    pid, epoch = node.coordinator.init_producer_id(TID, 60_000)
    node.coordinator.add_partitions(TID, pid, epoch, [(TOPIC, 0)], client_transaction_version=2)
    assert node.meta().client_transaction_version == 2
    assert node.coordinator.end_transaction(TID, pid, epoch, True, 2) == (pid, epoch + 1)
    assert node.meta().state == TxnState.PREPARE_COMMIT and node.meta().last_producer_epoch == epoch
    node.run_scheduled()
    assert node.meta().state == TxnState.COMPLETE_COMMIT
    assert control_epochs(node, 0) == [epoch + 1], "the marker fences the ended transaction's epoch"
    # retry of the completed commit (old epoch) is answered with the current epoch; an abort retry is not
    assert node.coordinator.end_transaction(TID, pid, epoch, True, 2) == (pid, epoch + 1)
    with pytest.raises(KafkaError) as refused:
        node.coordinator.end_transaction(TID, pid, epoch, False, 2)
    assert refused.value.error_code == ErrorCode.invalid_txn_state
    # an abort of nothing bumps once more and writes no marker
    assert node.coordinator.end_transaction(TID, pid, epoch + 1, False, 2) == (pid, epoch + 2)
    node.run_scheduled()
    assert node.meta().state == TxnState.COMPLETE_ABORT and control_epochs(node, 0) == [epoch + 1]
    with pytest.raises(KafkaError) as fenced:
        node.coordinator.add_partitions(TID, pid, epoch + 1, [(TOPIC, 1)], client_transaction_version=2)
    assert fenced.value.error_code == ErrorCode.producer_fenced


def test_client_transaction_version_is_persisted_and_replayed(tmp_path: Path, clock: ManualClock) -> None:
    node = Node(tmp_path, clock)
    pid, epoch = node.coordinator.init_producer_id(TID, 60_000)
    node.coordinator.add_partitions(TID, pid, epoch, [(TOPIC, 0)], client_transaction_version=2)
    state_log = node.logs.partition("__transaction_state", node.coordinator.partition_for(TID))
    data = state_log.read(0, 1 << 20).records
    values = [decode_value(record.value) for pos, _h in iter_whole_batches(data)
              for record in decode_batch(data, pos).records]
    last = values[-1]
    assert last is not None and (last.version, last.client_transaction_version) == (1, 2)
    node.logs.close()
    again = Node(tmp_path, clock)
    assert again.meta().client_transaction_version == 2 and again.meta().state == TxnState.ONGOING
    # after the restart the commit still follows version 2's rules
    assert again.coordinator.end_transaction(TID, pid, epoch, True, 2) == (pid, epoch + 1)


def test_an_exhausted_epoch_continues_as_the_next_producer_id(tmp_path: Path, clock: ManualClock) -> None:
    node = Node(tmp_path, clock)
    pid, _epoch = node.coordinator.init_producer_id(TID, 60_000)
    worn = TxnMetadata(TID, pid, SHORT_MAX - 1, 60_000, TxnState.ONGOING, frozenset({(TOPIC, 0)}), START_MS,
                       START_MS, client_transaction_version=2)
    node.coordinator._write(worn, TID)  # the state a long-lived producer reaches
    answered = node.coordinator.end_transaction(TID, pid, SHORT_MAX - 1, True, 2)
    assert answered == (pid, SHORT_MAX), "Kafka answers the Prepare* epoch; Complete* rotates"
    node.run_scheduled()
    done = node.meta()
    assert (done.state, done.producer_epoch, done.last_producer_id) == (TxnState.COMPLETE_COMMIT, 0, pid)
    assert done.producer_id != pid
    # a retry naming the old id at its last epoch is Kafka's retryOnOverflow
    assert node.coordinator.end_transaction(TID, pid, SHORT_MAX - 1, True, 2) == (done.producer_id, 0)


def test_version_1_end_keeps_the_epoch(tmp_path: Path, clock: ManualClock) -> None:
    node = Node(tmp_path, clock, transaction_version=0)
    pid, epoch = node.coordinator.init_producer_id(TID, 60_000)
    node.coordinator.add_partitions(TID, pid, epoch, [(TOPIC, 0)])
    assert node.coordinator.end_transaction(TID, pid, epoch, True) == (-1, -1)
    node.run_scheduled()
    assert (node.meta().state, node.meta().producer_epoch) == (TxnState.COMPLETE_COMMIT, epoch)
    assert control_epochs(node, 0) == [epoch]


def test_a_failed_state_write_leaves_the_installed_metadata(tmp_path: Path, clock: ManualClock) -> None:
    """prepare/complete: the pending state is set during the append and undone when it fails."""
    node = Node(tmp_path, clock)
    pid, epoch = node.coordinator.init_producer_id(TID, 60_000)
    before = node.meta()
    state_log = node.logs.partition("__transaction_state", node.coordinator.partition_for(TID))
    seen: list[TxnState | None] = []

    def failing_append(*_args: object, **_kwargs: object) -> None:
        seen.append(node.meta().pending_state)
        raise OSError("disk gone")

    state_log.append = failing_append  # type: ignore[method-assign]
    with pytest.raises(OSError):
        node.coordinator.add_partitions(TID, pid, epoch, [(TOPIC, 0)], client_transaction_version=2)
    assert seen == [TxnState.ONGOING] and node.meta() == before


def test_the_marker_writer_refuses_an_unknown_partition(tmp_path: Path, clock: ManualClock) -> None:
    node = Node(tmp_path, clock)
    with pytest.raises(UnknownTopicOrPartition):
        node.coordinator.markers.write(1, 0, 0, "nope", 0, True)


def test_prepare_abort_from_empty_only_under_version_2() -> None:
    empty = TxnMetadata(TID, 7, 3, 60_000, TxnState.EMPTY, txn_last_update_timestamp=1)
    with pytest.raises(InvalidTransition):
        empty.prepare_abort_or_commit(False, now_ms=5)
    aborting = empty.prepare_abort_or_commit(False, now_ms=5, client_transaction_version=2)
    assert (aborting.state, aborting.producer_epoch, aborting.last_producer_epoch, aborting.txn_start_timestamp) == (
        TxnState.PREPARE_ABORT, 4, 3, 5)
    with pytest.raises(InvalidTransition):
        empty.prepare_abort_or_commit(True, now_ms=5, client_transaction_version=2)


def test_a_verification_overtaken_by_a_marker_cannot_open_a_transaction(tmp_path: Path, clock: ManualClock) -> None:
    """Kafka's VerificationGuard: verified, then the marker of the previous transaction lands, then
    the late batch arrives: it must not start a transaction nobody will end."""
    node = Node(tmp_path, clock)
    log = node.logs.partition(TOPIC, 0)
    batch = build_batch([Record(None, b"late", (), START_MS)], producer_id=5, producer_epoch=0, base_sequence=0,
                        transactional=True)
    guard = log.producer_state.start_verification(5)
    log.append_control(5, 0, 0, False, START_MS)  # the marker spends the guard
    with pytest.raises(InvalidTxnState):
        log.append(batch, START_MS, verification_guard=guard)
    fresh = log.producer_state.start_verification(5)
    assert fresh is not guard
    log.append(batch, START_MS, verification_guard=fresh)
    assert log.producer_state.entries[5].current_txn_first_offset >= 0
