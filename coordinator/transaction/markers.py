"""The one writer of transaction markers (Kafka's WriteTxnMarkers path), shared by the transaction
coordinator (EndTxn, timeouts, recovery) and the WriteTxnMarkers handler (admin aborts of hanging
transactions, kafka-transactions.sh abort).

A data partition gets a COMMIT/ABORT control batch, which closes the producer's open transaction
there (an abort lands in `.txnindex`); a `__consumer_offsets` partition applies or drops the offsets
the transaction staged, which writes the marker to that partition too. Either way the partition's
fetchers waiting for data are woken.
"""

from __future__ import annotations

from collections.abc import Callable

from minikafka.coordinator.internal_topics import OFFSETS_TOPIC
from minikafka.coordinator.ports import LogManager
from minikafka.coordinator.transaction.state import TopicPartition
from minikafka.storage.clock import Clock
from minikafka.storage.errors import UnknownTopicOrPartition


class MarkerWriter:
    def __init__(self, logs: LogManager, complete_group_transaction: Callable[[int, int, int, bool, int], None],
                 notify: Callable[[TopicPartition], None], clock: Clock) -> None:
        self._logs = logs
        self._complete_group_transaction = complete_group_transaction
        self._notify = notify
        self._clock = clock

    def write(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, topic: str, partition: int,
              commit: bool, now_ms: int | None = None) -> None:
        """Write one marker; UnknownTopicOrPartition if the partition is not on this node, and the
        partition's own errors (PRODUCER_FENCED, TRANSACTION_COORDINATOR_FENCED, KAFKA_STORAGE_ERROR)
        as they are raised. The markers of one transaction given one `now_ms` are the same batch,
        which the partitions then build only once."""
        log = self._logs.partition(topic, partition)
        if log is None:
            raise UnknownTopicOrPartition(f"{topic}-{partition} does not exist on this node")
        if topic == OFFSETS_TOPIC:
            self._complete_group_transaction(partition, producer_id, producer_epoch, commit, coordinator_epoch)
        else:
            log.append_control(producer_id, producer_epoch, coordinator_epoch, commit,
                               self._clock.now_ms() if now_ms is None else now_ms)
        self._notify((topic, partition))
