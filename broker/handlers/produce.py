"""Produce: v3-13 accepted; v0-13 advertised.

Behavior:
- Each partition's records must be exactly one v2 record batch (Kafka's rule for v3+): none, more
  than one, or another magic is INVALID_RECORD; a bad CRC or a torn batch is CORRUPT_MESSAGE; a
  control batch from a client is INVALID_RECORD; a batch over max.message.bytes is MESSAGE_TOO_LARGE.
- Batches are stored as sent: only the base offset and partition leader epoch are patched (and the
  timestamp, for LogAppendTime topics). Records are never decoded here.
- acks must be -1, 0 or 1 (else INVALID_REQUIRED_ACKS). Data is stored once, so acks=-1 completes at
  once; but with fewer online replicas in the ISR than the topic's min.insync.replicas it is refused
  with NOT_ENOUGH_REPLICAS before the append, as Kafka does (the ISR cannot shrink mid-append here,
  so NOT_ENOUGH_REPLICAS_AFTER_APPEND never arises).
  acks=0 sends no response; as in Kafka, a failed acks=0 request closes the connection so the
  client notices.
- A record without a key on a compacted topic is INVALID_RECORD with KIP-467 `record_errors` (the
  record's index in its batch and Kafka's LogValidator message) and Kafka's `error_message`.
- Writing to an internal topic is INVALID_TOPIC_EXCEPTION; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION
  (auto-creation happens through Metadata, which clients send first).
- v13 (KIP-516) names topics by id only. An id this broker does not know (never created, deleted, the
  old id of a topic since re-created under its name, or the zero id) is UNKNOWN_TOPIC_ID on each of
  its partitions, with no error message, as Kafka 4.1's handleProduceRequest answers; the response
  echoes the requested id. The id is resolved once per request, so a client holding the old id of a
  re-created topic never writes into the new topic. A known id with a missing partition is
  UNKNOWN_TOPIC_OR_PARTITION, as by name.
Version notes: v0-2 are advertised (librdkafka disables compression features otherwise, KAFKA-18659)
but, as in Kafka 4, not accepted.
- Idempotent batches get Kafka's sequence checks and de-duplication (storage/producer_state.py);
  transactional batches must be for a partition added to the producer's ongoing transaction
  (INVALID_TXN_STATE otherwise), as Kafka's transaction.partition.verification.enable does.
  The verification leaves a guard in the partition's producer state which the append must still
  find (Kafka's VerificationGuard): a marker written in between spends it.
- v12 with `transaction.version` 2 (KIP-890 part 2): a transactional batch adds its partition to
  the transaction itself, through the coordinator (Kafka's AddPartitionsToTxn v5 from the leader);
  the client sends no AddPartitionsToTxn. A stale epoch is PRODUCER_FENCED; the coordinator's
  retriable answers (CONCURRENT_TRANSACTIONS while the previous transaction's markers are written,
  COORDINATOR_LOAD_IN_PROGRESS) are NOT_ENOUGH_REPLICAS, as Kafka's ReplicaManager maps them.
  Below transaction version 2, v12 is handled as v11.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import (
    check_min_insync_replicas,
    leader_endpoints,
    partition_log,
    response_of,
)
from minikafka.broker.handlers._shared.transactions import client_transaction_version
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import PRODUCE_ADD_PARTITION_ERRORS, CloseConnection, error_fields
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import CorruptRecord, ErrorCode, KafkaError
from minikafka.protocol.records import MAGIC_OFFSET, MAGIC_V2, BatchHeader, is_crc_valid
from minikafka.storage.errors import InvalidTopic, RecordValidationError

API_KEY = ApiKey.PRODUCE
VERSIONS = VersionRange(3, 13)
ADVERTISED_VERSIONS = VersionRange(0, 13)
TOPIC_IDS_FROM = 13


class InvalidRecord(KafkaError):
    error_code = ErrorCode.invalid_record


def _add_partition_implicitly(services: Any, transactional_id: str | None, header: BatchHeader, topic: str,
                              partition: int) -> None:
    """Transaction version 2: the coordinator adds the partition (a retry of an added one is free)."""
    if not services.transactions.loaded:
        raise KafkaError("the transaction coordinator is loading", code=ErrorCode.not_enough_replicas)
    if transactional_id is None:
        raise KafkaError("a transactional batch needs the request's transactional id",
                         code=ErrorCode.invalid_producer_id_mapping)
    try:
        services.transactions.add_partitions(transactional_id, header.producer_id, header.producer_epoch,
                                             [(topic, partition)], 2)
    except KafkaError as exc:
        shown = PRODUCE_ADD_PARTITION_ERRORS.get(exc.error_code)
        if shown is not None:
            raise KafkaError(f"cannot add {topic}-{partition} to the transaction yet: {exc}", code=shown) from exc
        raise


def _topic_name(ctx: RequestContext, topic: Any, by_id: bool) -> str | None:
    """The name a produce topic entry addresses now; None for an id this broker does not know."""
    if not by_id:
        return topic.name  # type: ignore[no-any-return]
    meta = ctx.services.logs.topic_by_id(topic.topic_id)
    return meta.name if meta is not None else None


def validate_batch(records: bytes | None) -> BatchHeader:
    """The single v2 batch of a produce partition, with its header and CRC checked."""
    if not records:
        raise InvalidRecord("produce requests v3+ must have exactly one record batch per partition")
    if len(records) > MAGIC_OFFSET and records[MAGIC_OFFSET] != MAGIC_V2:
        raise InvalidRecord(f"record batch magic {records[MAGIC_OFFSET]} is not allowed in produce v3+")
    header = BatchHeader.parse(records, 0)
    if header.size != len(records):
        if header.size < len(records):
            raise InvalidRecord("produce requests v3+ must have exactly one record batch per partition")
        raise CorruptRecord("record batch is truncated")
    if not is_crc_valid(records, 0, header):
        raise CorruptRecord("record batch CRC mismatch")
    if header.is_control:
        raise InvalidRecord("clients may not write control batches")
    if header.compression > 4:
        raise CorruptRecord(f"unknown compression codec {header.compression}")
    return header


async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    acks = request.acks
    now_ms = services.clock.now_ms()
    implicit_add = client_transaction_version(ctx, request.__version__, 12) >= 2
    failed = False
    topics = []
    answered: list[list[dict[str, Any]]] = []
    by_id = request.__version__ >= TOPIC_IDS_FROM
    for topic in request.topic_data:
        name = _topic_name(ctx, topic, by_id)
        results = []
        for part in topic.partition_data:
            result: dict[str, Any] = {"index": part.index, "base_offset": -1, "log_append_time": -1,
                                      "log_start_offset": -1}
            if name is None:
                failed = True
                result.update(error_code=ErrorCode.unknown_topic_id, error_message=None)
                ctx.log.info("produce rejected", topic_id=str(topic.topic_id), partition=part.index,
                             error=ErrorCode.unknown_topic_id.name)
                results.append(result)
                continue
            try:
                if acks not in (-1, 0, 1):
                    raise KafkaError("acks must be -1, 0 or 1", code=ErrorCode.invalid_required_acks)
                log = partition_log(ctx, name, part.index)
                meta = services.logs.topic(name)
                if meta is not None and meta.internal:
                    raise InvalidTopic(f"cannot produce to internal topic {name}")
                if acks == -1:
                    check_min_insync_replicas(ctx, log, name, part.index)
                header = validate_batch(part.records)
                guard = None
                if header.is_transactional:
                    guard = log.producer_state.start_verification(header.producer_id)
                    if implicit_add:
                        _add_partition_implicitly(services, request.transactional_id, header, name, part.index)
                    else:
                        services.transactions.verify_partition(request.transactional_id, header.producer_id,
                                                               header.producer_epoch, name, part.index)
                appended = log.append(part.records, now_ms, [(0, header)], verification_guard=guard)
                services.waiters.notify((name, part.index))
                result.update(base_offset=appended.base_offset, log_append_time=appended.log_append_time,
                              log_start_offset=appended.log_start_offset)
            except Exception as exc:
                failed = True
                result.update(error_fields(ctx, exc, topic=name, partition=part.index))
                if isinstance(exc, RecordValidationError):
                    result["record_errors"] = [{"batch_index": index, "batch_index_error_message": message}
                                               for index, message in exc.record_errors]
                ctx.log.info("produce rejected", topic=name, partition=part.index,
                             error=result["error_code"].name, reason=str(exc))
            results.append(result)
        # `build` keeps the one the version has: the name up to v12, the id (as requested) from v13.
        topics.append({"name": name, "topic_id": getattr(topic, "topic_id", None), "partition_responses": results})
        answered.append(results)
    if acks == 0:
        if failed:
            raise CloseConnection("acks=0 produce failed", bad_input=False)
        return None
    # Only a refused partition names a leader (KIP-951's current_leader, set with its error).
    endpoints = leader_endpoints(ctx, [result for entries in answered for result in entries]) if failed else []
    return build(response_of(request), responses=topics, throttle_time=0, node_endpoints=endpoints)
