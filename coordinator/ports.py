"""What the coordinators need of the storage layer, and nothing more.

The group and transaction coordinators keep their state in internal topics (`__consumer_offsets`,
`__transaction_state`) and look up the topics their groups subscribe to; these Protocols are the
part of storage/manager.py's LogManager and storage/log.py's PartitionLog they call, so unit tests
can pass small fakes. `_storage_fits` makes mypy (`make lint`) check that the real classes still fit.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from minikafka.protocol.records import BatchHeader
from minikafka.protocol.regions import FileRegion
from minikafka.storage.origin import AppendOrigin

if TYPE_CHECKING:
    from minikafka.storage.log import PartitionLog as StoragePartitionLog
    from minikafka.storage.manager import LogManager as StorageLogManager


class TopicMetadata(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def topic_id(self) -> uuid.UUID: ...

    @property
    def partitions(self) -> int: ...

    @property
    def internal(self) -> bool: ...


class Appended(Protocol):
    @property
    def base_offset(self) -> int: ...


class ReadSlice(Protocol):
    @property
    def records(self) -> bytes | FileRegion:
        """bytes unless the read asked for a region, which the coordinators never do."""


class PartitionLog(Protocol):
    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    def append(self, records: bytes | bytearray, now_ms: int,
               batches: list[tuple[int, BatchHeader]] | None = None, *,
               origin: AppendOrigin = AppendOrigin.CLIENT) -> Appended: ...

    def append_control(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                       now_ms: int) -> Appended: ...

    def read(self, offset: int, max_bytes: int) -> ReadSlice: ...


class LogManager(Protocol):
    def topic(self, name: str) -> TopicMetadata | None: ...

    def topic_by_id(self, topic_id: uuid.UUID | None) -> TopicMetadata | None: ...

    def topics(self) -> Sequence[TopicMetadata]: ...

    def create_topic(self, name: str, partitions: int, configs: Mapping[str, str] | None = None, *,
                     internal: bool = False) -> TopicMetadata: ...

    def partition(self, topic: str, partition: int) -> PartitionLog | None: ...


if TYPE_CHECKING:
    def _storage_fits(manager: StorageLogManager, log: StoragePartitionLog) -> tuple[LogManager, PartitionLog]:
        """Never called: mypy checks that the storage classes are what the coordinators take."""
        return manager, log


def read_bytes(log: PartitionLog, offset: int, max_bytes: int) -> bytes:
    """`log.read` as bytes: the coordinators replay their topics in memory and never ask for a file region
    (which only a fetch's answer sends as it is)."""
    records = log.read(offset, max_bytes).records
    if isinstance(records, FileRegion):
        raise TypeError(f"a read at offset {offset} gave a file region, not bytes")
    return records
