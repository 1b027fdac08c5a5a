"""InitProducerId in the transaction coordinator: KIP-360's producer id and epoch given by the client
(Kafka's TransactionCoordinator.handleInitProducerId), and the expiration of idle transactional ids
through Dead (Kafka's prepareDead)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest
from minikafka.coordinator.internal_topics import TRANSACTION_STATE_TOPIC
from minikafka.coordinator.transaction.coordinator import TransactionCoordinator, TxnConfig
from minikafka.coordinator.transaction.log import decode_key
from minikafka.coordinator.transaction.state import SHORT_MAX, TxnMetadata, TxnState
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.records import decode_batch, iter_whole_batches
from minikafka.storage.clock import ManualClock
from minikafka.storage.config import LogConfig
from minikafka.storage.manager import LogManager

START_MS = 1_700_000_000_000
TOPIC = "orders"
TID = "kip-360-tid"
TIMEOUT_MS = 60_000
EXPIRATION_MS = 3_600_000


class Node:
    def __init__(self, data_dir: Path, clock: ManualClock) -> None:
        self.clock = clock
        self.logs = LogManager(data_dir, LogConfig(), clock)
        self.logs.load()
        if self.logs.topic(TOPIC) is None:
            self.logs.create_topic(TOPIC, 1, {})
        self.scheduled: list[Callable[[], None]] = []
        ids = itertools.count(1000)
        self.coordinator = TransactionCoordinator(
            self.logs, lambda: next(ids), clock,
            TxnConfig(num_partitions=1, log_value_version=1, id_expiration_ms=EXPIRATION_MS),
            complete_group_transaction=lambda *_args: None, notify=lambda _tp: None, schedule=self.scheduled.append)
        self.coordinator.load()

    def run_scheduled(self) -> None:
        while self.scheduled:
            self.scheduled.pop(0)()

    def meta(self) -> TxnMetadata:
        return self.coordinator.txns[TID]

    def init(self, given_pid: int = -1, given_epoch: int = -1) -> tuple[int, int]:
        return self.coordinator.init_producer_id(TID, TIMEOUT_MS, given_pid, given_epoch)

    def state_records(self) -> list[tuple[str, bytes | None]]:
        log = self.logs.partition(TRANSACTION_STATE_TOPIC, 0)
        assert log is not None
        data = log.read(0, 1 << 20).records
        assert isinstance(data, bytes)
        return [(decode_key(record.key), record.value) for pos, _header in iter_whole_batches(data)
                for record in decode_batch(data, pos).records if record.key is not None]


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path, ManualClock(START_MS))


def refused(node: Node, given_pid: int, given_epoch: int) -> ErrorCode:
    with pytest.raises(KafkaError) as raised:
        node.init(given_pid, given_epoch)
    return raised.value.error_code


def test_without_a_given_producer_id_every_init_bumps_the_epoch(node: Node) -> None:
    pid, epoch = node.init()
    assert node.init() == (pid, epoch + 1)
    assert node.meta().last_producer_epoch == -1, "a new instance forgets the last epoch, as Kafka"


def test_the_current_epoch_bumps_and_a_retry_of_that_bump_gets_the_same_epoch(node: Node) -> None:
    pid, epoch = node.init()
    assert node.init(pid, epoch) == (pid, epoch + 1)
    assert node.meta().last_producer_epoch == epoch
    # the answer was lost: the producer asks again with the epoch it still has
    assert node.init(pid, epoch) == (pid, epoch + 1)
    # and once it has the new epoch, the next recovery bumps again
    assert node.init(pid, epoch + 1) == (pid, epoch + 2)


def test_a_stale_epoch_is_fenced(node: Node) -> None:
    pid, epoch = node.init()
    node.init()  # a new instance: epoch + 1, the last epoch forgotten
    assert refused(node, pid, epoch) == ErrorCode.producer_fenced
    assert refused(node, pid, epoch + 5) == ErrorCode.producer_fenced
    assert node.meta().producer_epoch == epoch + 1, "a fenced request changes nothing"


def test_another_producer_id_is_fenced(node: Node) -> None:
    pid, epoch = node.init()
    assert refused(node, pid + 1, epoch) == ErrorCode.producer_fenced
    assert (node.meta().producer_id, node.meta().producer_epoch) == (pid, epoch)


def test_an_exhausted_epoch_rotates_the_producer_id_and_a_retry_of_the_rotation_is_answered(node: Node) -> None:
    pid, _epoch = node.init()
    worn = TxnMetadata(TID, pid, SHORT_MAX - 1, TIMEOUT_MS, TxnState.COMPLETE_COMMIT,
                       txn_last_update_timestamp=START_MS)
    node.coordinator._write(worn, TID)  # the state a long-lived producer reaches
    new_pid, new_epoch = node.init(pid, SHORT_MAX - 1)
    assert new_pid != pid and new_epoch == 0
    assert (node.meta().last_producer_id, node.meta().last_producer_epoch) == (pid, SHORT_MAX - 1), \
        "a KIP-360 caller's rotation keeps the old epoch as the last one"
    # the rotation's answer was lost: the old producer id at its exhausted epoch gets the new id again
    assert node.init(pid, SHORT_MAX - 1) == (new_pid, 0)
    # the old producer id at an epoch that was not exhausted is another instance's
    assert refused(node, pid, 3) == ErrorCode.producer_fenced


def test_an_exhausted_epoch_without_a_given_producer_id_rotates_and_forgets_the_epoch(node: Node) -> None:
    pid, _epoch = node.init()
    worn = TxnMetadata(TID, pid, SHORT_MAX - 1, TIMEOUT_MS, TxnState.EMPTY, txn_last_update_timestamp=START_MS)
    node.coordinator._write(worn, TID)
    new_pid, new_epoch = node.init()
    assert (new_epoch, node.meta().last_producer_epoch) == (0, -1) and new_pid != pid


def test_an_open_transaction_is_fenced_and_aborted_for_its_own_producer_only(node: Node) -> None:
    pid, epoch = node.init()
    node.coordinator.add_partitions(TID, pid, epoch, [(TOPIC, 0)])
    assert refused(node, pid + 1, epoch) == ErrorCode.producer_fenced
    assert node.meta().state == TxnState.ONGOING, "a foreign producer id aborts nothing"
    assert refused(node, pid, epoch) == ErrorCode.concurrent_transactions
    node.run_scheduled()
    assert (node.meta().state, node.meta().producer_epoch) == (TxnState.COMPLETE_ABORT, epoch + 1)
    # Kafka's fence forgets the last epoch: the producer whose transaction was aborted is fenced
    assert refused(node, pid, epoch) == ErrorCode.producer_fenced
    assert node.init() == (pid, epoch + 2)


def test_a_foreign_producer_id_is_fenced_before_markers_in_flight_are_waited_for(node: Node) -> None:
    pid, epoch = node.init()
    node.coordinator.add_partitions(TID, pid, epoch, [(TOPIC, 0)])
    node.coordinator.end_transaction(TID, pid, epoch, True)
    assert node.meta().state == TxnState.PREPARE_COMMIT
    assert refused(node, pid + 1, epoch) == ErrorCode.producer_fenced
    assert refused(node, pid, epoch) == ErrorCode.concurrent_transactions


def test_the_last_epoch_does_not_survive_a_restart(tmp_path: Path) -> None:
    """Kafka's TransactionLogValue has no field for the last epoch (a loaded id has none), so a retry
    of a bump that spans a restart is fenced, as on Kafka; the current epoch still bumps."""
    clock = ManualClock(START_MS)
    node = Node(tmp_path, clock)
    pid, epoch = node.init()
    node.init(pid, epoch)
    node.logs.close()
    again = Node(tmp_path, clock)
    assert (again.meta().producer_epoch, again.meta().last_producer_epoch) == (epoch + 1, -1)
    assert refused(again, pid, epoch) == ErrorCode.producer_fenced
    assert again.init(pid, epoch + 1) == (pid, epoch + 2)


def test_an_idle_id_expires_through_dead_as_a_tombstone(node: Node) -> None:
    pid, _epoch = node.init()
    node.clock.advance(EXPIRATION_MS + 1)
    assert node.coordinator.expire_idle() == [TID]
    assert TID not in node.coordinator.txns
    assert node.state_records()[-1] == (TID, None)
    new_pid, new_epoch = node.init()
    assert new_pid != pid and new_epoch == 0, "the expired id starts over with a new producer id"


def test_an_open_transaction_does_not_expire(node: Node) -> None:
    pid, epoch = node.init()
    node.coordinator.add_partitions(TID, pid, epoch, [(TOPIC, 0)])
    node.clock.advance(EXPIRATION_MS + 1)
    assert node.coordinator.expire_idle() == []
    assert node.meta().state == TxnState.ONGOING
