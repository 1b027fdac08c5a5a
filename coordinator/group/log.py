"""The `__consumer_offsets` topic as the group coordinator sees it: append record batches, replay.

Goes through the storage layer's LogManager (`create_topic`, `topic`, `partition`) and
PartitionLog (`append`, `read`, `log_start_offset`, `log_end_offset`); unit tests pass a fake.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from minikafka.coordinator.hashing import partition_for
from minikafka.coordinator.internal_topics import OFFSETS_TOPIC
from minikafka.coordinator.ports import LogManager, PartitionLog
from minikafka.coordinator.replay import iter_partition_batches
from minikafka.protocol.records import NO_PRODUCER_ID, DecodedBatch, Record, build_batch
from minikafka.storage.origin import AppendOrigin


class OffsetsTopic:
    def __init__(self, logs: LogManager, num_partitions: int) -> None:
        self._logs = logs
        self._configured_partitions = num_partitions

    def exists(self) -> bool:
        return self._logs.topic(OFFSETS_TOPIC) is not None

    @property
    def num_partitions(self) -> int:
        meta = self._logs.topic(OFFSETS_TOPIC)
        return meta.partitions if meta is not None else self._configured_partitions

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def ensure(self) -> None:
        """Create the topic on first use (compacted, internal), as Kafka does."""
        if not self.exists():
            self._logs.create_topic(
                OFFSETS_TOPIC,
                self._configured_partitions,
                {"cleanup.policy": "compact"},
                internal=True,
            )

    def _log(self, partition: int) -> PartitionLog:
        self.ensure()
        log = self._logs.partition(OFFSETS_TOPIC, partition)
        if log is None:
            raise LookupError(f"{OFFSETS_TOPIC}-{partition} does not exist")
        return log

    def append(
        self,
        partition: int,
        records: Sequence[tuple[bytes, bytes | None]],
        now_ms: int,
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = -1,
        transactional: bool = False,
    ) -> int:
        """Append (key, value) records as one uncompressed batch; returns the first record's offset."""
        batch = build_batch(
            [Record(key=key, value=value, timestamp=now_ms) for key, value in records],
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            transactional=transactional,
        )
        log = self._log(partition)
        # Kafka's group coordinator appends as AppendOrigin.COORDINATOR: its records carry their keys
        return int(log.append(batch, now_ms, origin=AppendOrigin.COORDINATOR).base_offset)

    def append_marker(
        self,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        now_ms: int,
    ) -> int:
        result = self._log(partition).append_control(producer_id, producer_epoch, coordinator_epoch, commit, now_ms)
        return int(result.base_offset)

    def batches(self, partition: int) -> Iterator[DecodedBatch]:
        """Every batch of one partition, from the log start to the log end."""
        log = self._logs.partition(OFFSETS_TOPIC, partition)
        if log is None:
            return
        yield from iter_partition_batches(log)
