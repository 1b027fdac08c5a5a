"""`__transaction_state` records in Kafka's format (TransactionLogKey/Value), so that Kafka's
TransactionLogMessageFormatter and kafka-dump-log.sh --transaction-log-decoder read them.

key   = int16 version 0 + TransactionalId (int16-length string)
value = int16 version + TransactionLogValue:
  v0 (non-flexible): ProducerId int64, ProducerEpoch int16, TransactionTimeoutMs int32,
      TransactionStatus int8, TransactionPartitions nullable [Topic string, PartitionIds [int32]],
      TransactionLastUpdateTimestampMs int64, TransactionStartTimestampMs int64
  v1 (flexible): the same with compact strings/arrays and tagged fields, plus tags 0
      PreviousProducerId, 1 NextProducerId (default -1) and 2 ClientTransactionVersion (default 0),
      written only when they differ from their defaults.
Partitions are null when the state is Empty. A null value (tombstone) removes the id.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from minikafka.coordinator.transaction.state import TopicPartition, TxnMetadata, TxnState
from minikafka.protocol.errors import CorruptRecord
from minikafka.protocol.records import NO_PRODUCER_ID

KEY_VERSION = 0
_INT16_MAX = 32767


class CorruptTxnRecord(CorruptRecord, ValueError):
    """A `__transaction_state` key or value that is not one of Kafka's schemas (truncated, garbage)."""


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    version: int
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] | None
    last_update_timestamp: int
    start_timestamp: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0


def encode_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode()
    if len(raw) > _INT16_MAX:
        raise ValueError("a transactional id longer than 32767 bytes does not fit an int16-length string")
    return struct.pack(">hh", KEY_VERSION, len(raw)) + raw


def decode_key(data: bytes) -> str:
    reader = _Reader(data, flexible=False)
    version = reader.int16()
    if version != KEY_VERSION:
        raise CorruptTxnRecord(f"unknown TransactionLogKey version {version}")
    transactional_id = reader.string()
    reader.done()
    return transactional_id


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _string(value: str, flexible: bool) -> bytes:
    raw = value.encode()
    if not flexible and len(raw) > _INT16_MAX:
        raise ValueError(f"topic name of {len(raw)} bytes does not fit an int16-length string")
    return (_uvarint(len(raw) + 1) if flexible else struct.pack(">h", len(raw))) + raw


def _array_length(count: int | None, flexible: bool) -> bytes:
    if flexible:
        return _uvarint(0 if count is None else count + 1)
    return struct.pack(">i", -1 if count is None else count)


def _grouped(partitions: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in partitions:
        by_topic[topic].append(partition)
    return [(topic, sorted(ids)) for topic, ids in sorted(by_topic.items())]


@lru_cache(maxsize=1024)
def _encoded_partitions(partitions: frozenset[TopicPartition], flexible: bool) -> bytes:
    """TransactionPartitions, kept for the next records: Ongoing and Prepare* carry the same set,
    and a producer's transactions mostly span the same partitions."""
    grouped = _grouped(partitions)
    out = bytearray(_array_length(len(grouped), flexible))
    for topic, ids in grouped:
        out += _string(topic, flexible)
        out += _array_length(len(ids), flexible)
        out += b"".join(struct.pack(">i", i) for i in ids)
        if flexible:
            out += b"\x00"  # no tagged fields in the partition entry
    return bytes(out)


def encode_value(meta: TxnMetadata, version: int = 0) -> bytes:
    if version not in (0, 1):
        raise ValueError(f"TransactionLogValue v{version} is not written")
    flexible = version == 1
    try:
        out = bytearray(struct.pack(">hqhib", version, meta.producer_id, meta.producer_epoch, meta.txn_timeout_ms,
                                    int(meta.state)))
    except struct.error as exc:  # a field out of its Kafka type's range: a caller bug, not a corrupt record
        raise ValueError(f"transaction metadata does not fit TransactionLogValue: {exc}") from exc
    if meta.state == TxnState.EMPTY:
        if meta.topic_partitions:
            raise ValueError("an Empty transaction has no partitions")
        out += _array_length(None, flexible)
    else:
        out += _encoded_partitions(meta.topic_partitions, flexible)
    out += struct.pack(">qq", meta.txn_last_update_timestamp, meta.txn_start_timestamp)
    if flexible:
        out += _tagged_fields(meta)
    return bytes(out)


def _tagged_fields(meta: TxnMetadata) -> bytes:
    """Tags 0-2 of TransactionLogValue v1, in ascending order, each only when not its default."""
    tags = []
    if meta.last_producer_id != NO_PRODUCER_ID:
        tags.append((0, struct.pack(">q", meta.last_producer_id)))
    if meta.next_producer_id != NO_PRODUCER_ID:
        tags.append((1, struct.pack(">q", meta.next_producer_id)))
    if meta.client_transaction_version != 0:
        tags.append((2, struct.pack(">h", meta.client_transaction_version)))
    out = bytearray(_uvarint(len(tags)))
    for tag, payload in tags:
        out += _uvarint(tag) + _uvarint(len(payload)) + payload
    return bytes(out)


class _Reader:
    def __init__(self, data: bytes, flexible: bool) -> None:
        self.data = data
        self.pos = 0
        self.flexible = flexible

    def _take(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise CorruptTxnRecord(f"record ends at byte {len(self.data)}, needed {self.pos + size}")
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return int(value)

    def int8(self) -> int:
        return self._take(">b")

    def int16(self) -> int:
        return self._take(">h")

    def int32(self) -> int:
        return self._take(">i")

    def int64(self) -> int:
        return self._take(">q")

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            byte = self._take(">B")
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 35:
                raise CorruptTxnRecord("varint too long")

    def raw(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise CorruptTxnRecord("length runs past the end of the record")
        value = self.data[self.pos:self.pos + size]
        self.pos += size
        return value

    def string(self) -> str:
        size = self.uvarint() - 1 if self.flexible else self.int16()
        if size < 0:
            raise CorruptTxnRecord("null in a non-nullable string")
        try:
            return self.raw(size).decode()
        except UnicodeDecodeError as exc:
            raise CorruptTxnRecord("string is not UTF-8") from exc

    def array_length(self) -> int | None:
        if self.flexible:
            count = self.uvarint()
            return None if count == 0 else count - 1
        count = self.int32()
        return None if count < 0 else count

    def tags(self) -> dict[int, bytes]:
        found = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            found[tag] = self.raw(self.uvarint())
        return found

    def done(self) -> None:
        if self.pos != len(self.data):
            raise CorruptTxnRecord(f"{len(self.data) - self.pos} bytes after the record")


def decode_value(data: bytes | None) -> TxnLogValue | None:
    """The value of a `__transaction_state` record; None for a tombstone."""
    if data is None:
        return None
    reader = _Reader(data, flexible=False)
    version = reader.int16()
    if version not in (0, 1):
        raise CorruptTxnRecord(f"unknown TransactionLogValue version {version}")
    reader.flexible = version == 1
    producer_id, epoch, timeout = reader.int64(), reader.int16(), reader.int32()
    try:
        state = TxnState(reader.int8())
    except ValueError as exc:
        raise CorruptTxnRecord(str(exc)) from exc
    partitions: set[TopicPartition] | None = None
    count = reader.array_length()
    if count is not None:
        partitions = set()
        for _ in range(count):
            topic = reader.string()
            ids = reader.array_length()
            if ids is None:
                raise CorruptTxnRecord(f"null PartitionIds for topic {topic}")
            partitions.update((topic, reader.int32()) for _ in range(ids))
            if reader.flexible:
                reader.tags()
    last_update, start = reader.int64(), reader.int64()
    tags = reader.tags() if reader.flexible else {}
    reader.done()
    return TxnLogValue(
        version, producer_id, epoch, timeout, state, frozenset(partitions) if partitions is not None else None,
        last_update, start,
        previous_producer_id=_tag_int(tags, 0, ">q", NO_PRODUCER_ID),
        next_producer_id=_tag_int(tags, 1, ">q", NO_PRODUCER_ID),
        client_transaction_version=_tag_int(tags, 2, ">h", 0),
    )


def _tag_int(tags: dict[int, bytes], tag: int, fmt: str, default: int) -> int:
    if tag not in tags:
        return default
    if len(tags[tag]) != struct.calcsize(fmt):
        raise CorruptTxnRecord(f"tagged field {tag} has {len(tags[tag])} bytes")
    return int(struct.unpack(fmt, tags[tag])[0])


def metadata_from(transactional_id: str, value: TxnLogValue) -> TxnMetadata:
    """Coordinator metadata from a replayed record (Kafka's TransactionLog.readTxnRecordValue)."""
    return TxnMetadata(
        transactional_id=transactional_id,
        producer_id=value.producer_id,
        producer_epoch=value.producer_epoch,
        txn_timeout_ms=value.txn_timeout_ms,
        state=value.state,
        topic_partitions=value.partitions or frozenset(),
        txn_start_timestamp=value.start_timestamp,
        txn_last_update_timestamp=value.last_update_timestamp,
        last_producer_id=value.previous_producer_id,
        next_producer_id=value.next_producer_id,
        client_transaction_version=value.client_transaction_version,
    )


def formatter_json(key: bytes | None, value: bytes | None) -> dict[str, object] | None:
    """A record as Kafka's TransactionLogMessageFormatter prints it (CoordinatorRecordMessageFormatter):
    `{"key":{"type":0,"data":{"transactionalId":...}},"value":{"version":V,"data":{...}}}`, `"value":null`
    for a tombstone, None (nothing printed) for a record without a key. Tagged fields appear only
    when they differ from their defaults, as Kafka's generated JSON converters write them."""
    if key is None:
        return None
    key_json = {"type": KEY_VERSION, "data": {"transactionalId": decode_key(key)}}
    decoded = decode_value(value)
    if decoded is None:
        return {"key": key_json, "value": None}
    partitions = None if decoded.partitions is None else [
        {"topic": topic, "partitionIds": ids} for topic, ids in _grouped(decoded.partitions)]
    data: dict[str, object] = {
        "producerId": decoded.producer_id,
        "producerEpoch": decoded.producer_epoch,
        "transactionTimeoutMs": decoded.txn_timeout_ms,
        "transactionStatus": int(decoded.state),
        "transactionPartitions": partitions,
        "transactionLastUpdateTimestampMs": decoded.last_update_timestamp,
        "transactionStartTimestampMs": decoded.start_timestamp,
    }
    if decoded.version >= 1:
        tagged = (("previousProducerId", decoded.previous_producer_id, NO_PRODUCER_ID),
                  ("nextProducerId", decoded.next_producer_id, NO_PRODUCER_ID),
                  ("clientTransactionVersion", decoded.client_transaction_version, 0))
        data.update({name: field for name, field, default in tagged if field != default})
    return {"key": key_json, "value": {"version": decoded.version, "data": data}}
