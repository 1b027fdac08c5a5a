"""Storage errors, each carrying the Kafka error code a client should see."""

from __future__ import annotations

from minikafka.protocol.errors import CorruptRecord, ErrorCode, KafkaError

__all__ = [
    "CorruptRecord",
    "InvalidConfig",
    "InvalidPartitions",
    "InvalidReplicationFactor",
    "InvalidTopic",
    "KafkaStorageError",
    "OffsetOutOfRange",
    "PolicyViolation",
    "RecordTooLarge",
    "TopicAlreadyExists",
    "UnknownTopicOrPartition",
]


class UnknownTopicOrPartition(KafkaError):
    error_code = ErrorCode.unknown_topic_or_partition


class TopicAlreadyExists(KafkaError):
    error_code = ErrorCode.topic_already_exists


class InvalidTopic(KafkaError):
    error_code = ErrorCode.invalid_topic_exception


class InvalidPartitions(KafkaError):
    error_code = ErrorCode.invalid_partitions


class InvalidReplicationFactor(KafkaError):
    error_code = ErrorCode.invalid_replication_factor


class OffsetOutOfRange(KafkaError):
    error_code = ErrorCode.offset_out_of_range


class RecordTooLarge(KafkaError):
    error_code = ErrorCode.message_too_large


class InvalidTimestamp(KafkaError):
    error_code = ErrorCode.invalid_timestamp


class InvalidConfig(KafkaError):
    error_code = ErrorCode.invalid_config


class PolicyViolation(KafkaError):
    error_code = ErrorCode.policy_violation


class KafkaStorageError(KafkaError):
    error_code = ErrorCode.kafka_storage_error


class InvalidRecord(KafkaError):
    error_code = ErrorCode.invalid_record


class RecordValidationError(InvalidRecord):
    """Records refused one by one (Kafka's RecordValidationException): the produce response carries
    `record_errors` (KIP-467), each the record's index in its batch and why."""

    def __init__(self, record_errors: list[tuple[int, str]]) -> None:
        self.record_errors = record_errors
        shown = ", ".join(f"RecordError(batchIndex={index}, message='{message}')" for index, message in
                          record_errors[:3])
        super().__init__(f"One or more records have been rejected due to {len(record_errors)} record errors in "
                         f"total, and only showing the first three errors at most: [{shown}]")
