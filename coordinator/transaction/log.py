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
from minikafka.protocol.primitives import Reader, Writer
from minikafka.protocol.records import NO_PRODUCER_ID

KEY_VERSION = 0
# version, ProducerId, ProducerEpoch, TransactionTimeoutMs, TransactionStatus: one pack for the fixed head
_VALUE_HEAD = struct.Struct(">hqhib")
# Tags 0 (PreviousProducerId) and 1 (NextProducerId) are int64, 2 (ClientTransactionVersion) int16.
_TAG_FORMS = {0: struct.Struct(">q"), 1: struct.Struct(">q"), 2: struct.Struct(">h")}


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
    out = Writer()
    out.int16(KEY_VERSION)
    out.string(transactional_id)  # ValueError past 32767 bytes
    return out.value()


def decode_key(data: bytes) -> str:
    reader = _reader(data, "TransactionLogKey")
    version = reader.int16()
    if version != KEY_VERSION:
        raise CorruptTxnRecord(f"unknown TransactionLogKey version {version}")
    transactional_id = reader.string()
    _done(reader)
    return transactional_id


def _string(out: Writer, value: str, flexible: bool) -> None:
    if flexible:
        out.compact_string(value)
    else:
        out.string(value)  # ValueError past 32767 bytes


def _array_length(out: Writer, count: int | None, flexible: bool) -> None:
    if flexible:
        out.compact_array_length(count)
    else:
        out.array_length(count)


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
    out = Writer()
    _array_length(out, len(grouped), flexible)
    for topic, ids in grouped:
        _string(out, topic, flexible)
        _array_length(out, len(ids), flexible)
        for partition in ids:
            out.int32(partition)
        if flexible:
            out.tagged_fields({})  # none in the partition entry
    return out.value()


def encode_value(meta: TxnMetadata, version: int = 0) -> bytes:
    if version not in (0, 1):
        raise ValueError(f"TransactionLogValue v{version} is not written")
    flexible = version == 1
    out = Writer()
    try:
        out.raw(_VALUE_HEAD.pack(version, meta.producer_id, meta.producer_epoch, meta.txn_timeout_ms,
                                 int(meta.state)))
    except struct.error as exc:  # a field out of its Kafka type's range: a caller bug, not a corrupt record
        raise ValueError(f"transaction metadata does not fit TransactionLogValue: {exc}") from exc
    if meta.state == TxnState.EMPTY:
        if meta.topic_partitions:
            raise ValueError("an Empty transaction has no partitions")
        _array_length(out, None, flexible)
    else:
        out.raw(_encoded_partitions(meta.topic_partitions, flexible))
    out.int64(meta.txn_last_update_timestamp)
    out.int64(meta.txn_start_timestamp)
    if flexible:
        out.tagged_fields(_tagged_fields(meta))
    return out.value()


def _tagged_fields(meta: TxnMetadata) -> dict[int, bytes]:
    """Tags 0-2 of TransactionLogValue v1, each only when not its default."""
    tags = {}
    if meta.last_producer_id != NO_PRODUCER_ID:
        tags[0] = _TAG_FORMS[0].pack(meta.last_producer_id)
    if meta.next_producer_id != NO_PRODUCER_ID:
        tags[1] = _TAG_FORMS[1].pack(meta.next_producer_id)
    if meta.client_transaction_version != 0:
        tags[2] = _TAG_FORMS[2].pack(meta.client_transaction_version)
    return tags


def _reader(data: bytes, what: str) -> Reader:
    return Reader(data, what=what, error=CorruptTxnRecord)


def _done(reader: Reader) -> None:
    if reader.remaining:
        raise reader.malformed(f"has {reader.remaining} bytes after the record")


def _array_length_of(reader: Reader, flexible: bool) -> int | None:
    """An array's element count; None for a null array."""
    count = reader.compact_array_length() if flexible else reader.array_length()
    return None if count < 0 else count


def decode_value(data: bytes | None) -> TxnLogValue | None:
    """The value of a `__transaction_state` record; None for a tombstone."""
    if data is None:
        return None
    reader = _reader(data, "TransactionLogValue")
    version = reader.int16()
    if version not in (0, 1):
        raise CorruptTxnRecord(f"unknown TransactionLogValue version {version}")
    flexible = version == 1
    producer_id, epoch, timeout = reader.int64(), reader.int16(), reader.int32()
    try:
        state = TxnState(reader.int8())
    except ValueError as exc:
        raise CorruptTxnRecord(str(exc)) from exc
    partitions: set[TopicPartition] | None = None
    count = _array_length_of(reader, flexible)
    if count is not None:
        partitions = set()
        for _ in range(count):
            topic = reader.compact_string() if flexible else reader.string()
            ids = _array_length_of(reader, flexible)
            if ids is None:
                raise CorruptTxnRecord(f"null PartitionIds for topic {topic}")
            partitions.update((topic, reader.int32()) for _ in range(ids))
            if flexible:
                reader.tagged_fields()
    last_update, start = reader.int64(), reader.int64()
    tags = reader.tagged_fields() if flexible else {}
    _done(reader)
    return TxnLogValue(
        version, producer_id, epoch, timeout, state, frozenset(partitions) if partitions is not None else None,
        last_update, start,
        previous_producer_id=_tag_int(tags, 0, NO_PRODUCER_ID),
        next_producer_id=_tag_int(tags, 1, NO_PRODUCER_ID),
        client_transaction_version=_tag_int(tags, 2, 0),
    )


def _tag_int(tags: dict[int, bytes], tag: int, default: int) -> int:
    if tag not in tags:
        return default
    form = _TAG_FORMS[tag]
    if len(tags[tag]) != form.size:
        raise CorruptTxnRecord(f"tagged field {tag} has {len(tags[tag])} bytes")
    return int(form.unpack(tags[tag])[0])


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
