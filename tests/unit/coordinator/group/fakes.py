"""In-memory stand-ins for the storage API the group coordinator uses."""

from __future__ import annotations

from dataclasses import dataclass, field

from minikafka.protocol.records import iter_batches, set_base_offset
from minikafka.storage.origin import AppendOrigin


@dataclass
class FakeClock:
    now: int = 1_000_000

    def now_ms(self) -> int:
        return self.now

    def monotonic(self) -> float:
        return self.now / 1000

    def real_monotonic(self) -> float:
        return self.now / 1000


@dataclass
class _Append:
    base_offset: int
    last_offset: int


@dataclass
class _Read:
    records: bytes


@dataclass
class FakePartitionLog:
    batches: list[bytes] = field(default_factory=list)
    log_end_offset: int = 0
    log_start_offset: int = 0

    def append(self, records: bytes, now_ms: int, *, origin: AppendOrigin = AppendOrigin.CLIENT) -> _Append:
        buf = bytearray(records)
        base = self.log_end_offset
        last = base
        for pos, header in iter_batches(records):
            set_base_offset(buf, pos, self.log_end_offset)
            last = self.log_end_offset + header.last_offset_delta
            self.log_end_offset = last + 1
        self.batches.append(bytes(buf))
        return _Append(base, last)

    def append_control(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                       now_ms: int) -> _Append:
        from minikafka.protocol.records import ControlType, build_control_batch

        marker = build_control_batch(producer_id=producer_id, producer_epoch=producer_epoch,
                                     control_type=ControlType.COMMIT if commit else ControlType.ABORT,
                                     coordinator_epoch=coordinator_epoch, timestamp=now_ms)
        return self.append(marker, now_ms)

    def read(
        self, offset: int, max_bytes: int, upper_bound: int | None = None, min_one_batch: bool = True
    ) -> _Read:
        from minikafka.protocol.records import BatchHeader

        out = b""
        for batch in self.batches:
            header = BatchHeader.parse(batch, 0)
            if header.next_offset > offset:
                out += batch
        return _Read(out)


@dataclass
class _Meta:
    name: str
    partitions: int
    internal: bool


class FakeLogManager:
    def __init__(self) -> None:
        self.topics: dict[str, _Meta] = {}
        self.logs: dict[tuple[str, int], FakePartitionLog] = {}
        self.configs: dict[str, dict[str, str]] = {}

    def create_topic(
        self, name: str, partitions: int, configs: dict[str, str] | None = None, internal: bool = False
    ) -> _Meta:
        self.topics[name] = _Meta(name, partitions, internal)
        self.configs[name] = dict(configs or {})
        for p in range(partitions):
            self.logs[(name, p)] = FakePartitionLog()
        return self.topics[name]

    def topic(self, name: str) -> _Meta | None:
        return self.topics.get(name)

    def partition(self, topic: str, partition: int) -> FakePartitionLog | None:
        return self.logs.get((topic, partition))
