"""Record parsers of `minikafka dump-log`, after the MessageParsers of Kafka's DumpLogSegments.

A parser turns one record into the (key, payload) the tool prints after `key: ` and `payload: `;
None means "not printed" (Kafka's Optional.empty). A payload is a string, or a dict that the text
output writes as compact JSON (as Jackson's ObjectNode.toString does) and `--json` nests as is.

- StringParser: `--key-decoder-class` / `--value-decoder-class` left at Kafka's StringDecoder
  (UTF-8, malformed bytes replaced).
- OffsetsParser (`--offsets-decoder`), Kafka's OffsetsMessageParser over `__consumer_offsets`:
  key `{"type":"<record type>","data":{...}}`, value `{"version":"<value version>","data":{...}}`
  (type and version are JSON strings there, unlike kafka-console-consumer's formatters), `<DELETE>`
  for a tombstone; a consumer group's member subscription and assignment bytes are decoded as
  ConsumerProtocolSubscription / ConsumerProtocolAssignment, or kept as base64 when they do not parse.
  The KIP-848 consumer group records (types 3-8 and 16) print as Kafka's generated JSON converters
  write them: camelCase field names, topic ids as Kafka's base64 Uuid text, tagged fields only when
  not at their default.
- TransactionLogParser (`--transaction-log-decoder`), Kafka's TransactionLogMessageParser over
  `__transaction_state`, with the same key/value envelope.
A record these parsers cannot decode gives Kafka's key text `Unknown record type N at offset O,
skipping.` or `Error at offset O, skipping. <reason>` and no payload; a record without a key is an
error (Kafka throws).
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable
from typing import Protocol

from minikafka.coordinator.group.records import (
    CONSUMER_GROUP_PARTITION_METADATA,
    CONSUMER_GROUP_RECORD_TYPES,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerGroupValue,
    MemberValue,
    TopicIdPartitions,
    decode_consumer_group_value,
    decode_group_value,
    decode_key,
    decode_offset_value,
)
from minikafka.coordinator.transaction.log import KEY_VERSION as TXN_KEY_TYPE
from minikafka.coordinator.transaction.log import formatter_json
from minikafka.protocol.errors import CorruptRecord
from minikafka.protocol.primitives import Reader
from minikafka.protocol.records import Record
from minikafka.protocol.render import kafka_uuid


class Tombstone(str):
    """What a coordinator parser prints for a record without a value; `--json` writes null instead."""


DELETE = Tombstone("<DELETE>")
STRING_DECODERS = frozenset({"org.apache.kafka.tools.api.StringDecoder", "kafka.serializer.StringDecoder"})

JsonValue = str | int | bool | None | list["JsonValue"] | dict[str, "JsonValue"]
Printed = str | dict[str, JsonValue] | None

_LEGACY_OFFSET_KEY, _OFFSET_KEY, _GROUP_KEY = 0, 1, 2
_CONSUMER_PROTOCOL_TYPE = "consumer"
_CONSUMER_PROTOCOL_MAX_VERSION = 3


class MissingKey(Exception):
    """A coordinator record without a key: Kafka's parsers throw, which ends the dump."""


class MessageParser(Protocol):
    def parse(self, record: Record) -> tuple[Printed, Printed]: ...


class StringParser:
    def parse(self, record: Record) -> tuple[Printed, Printed]:
        key = None if record.key is None else record.key.decode("utf-8", "replace")
        value = None if record.value is None else record.value.decode("utf-8", "replace")
        return key, value


class _CoordinatorParser:
    """Kafka's CoordinatorRecordMessageParser: the envelope and the error texts."""

    def parse(self, record: Record) -> tuple[Printed, Printed]:
        if record.key is None:
            raise MissingKey(f"Failed to decode message at offset {record.offset} using the specified decoder "
                             "(message had a missing key)")
        if len(record.key) < 2:
            return f"Error at offset {record.offset}, skipping. Could not read version from key's buffer.", None
        record_type = Reader(record.key).int16()
        if record_type not in self.known_types:
            return f"Unknown record type {record_type} at offset {record.offset}, skipping.", None
        try:
            return self.decode(record_type, record.key, record.value)
        except (CorruptRecord, UnicodeDecodeError, ValueError, struct.error) as exc:
            return f"Error at offset {record.offset}, skipping. {exc}", None

    known_types: frozenset[int] = frozenset()

    def decode(self, record_type: int, key: bytes, value: bytes | None) -> tuple[Printed, Printed]:
        raise NotImplementedError


def _value_version(value: bytes) -> int:
    if len(value) < 2:
        raise CorruptRecord("Could not read version from value's buffer.")
    return Reader(value).int16()


class TransactionLogParser(_CoordinatorParser):
    known_types = frozenset({TXN_KEY_TYPE})

    def decode(self, record_type: int, key: bytes, value: bytes | None) -> tuple[Printed, Printed]:
        formatted = formatter_json(key, value)
        if formatted is None:  # only for a missing key, refused above
            raise CorruptRecord("record without a key")
        key_json = {"type": str(record_type), "data": formatted["key"]["data"]}  # type: ignore[index]
        if formatted["value"] is None:
            return key_json, DELETE
        value_json = formatted["value"]
        return key_json, {"version": str(value_json["version"]), "data": value_json["data"]}  # type: ignore[index]


class OffsetsParser(_CoordinatorParser):
    """The record types minikafka writes: offset commits, classic group metadata, and KIP-848
    consumer group records; share and streams group records read as unknown."""

    known_types = frozenset({_LEGACY_OFFSET_KEY, _OFFSET_KEY, _GROUP_KEY, *CONSUMER_GROUP_RECORD_TYPES})

    def decode(self, record_type: int, key: bytes, value: bytes | None) -> tuple[Printed, Printed]:
        if record_type in CONSUMER_GROUP_RECORD_TYPES:
            return _consumer_group_record_json(record_type, key, value)
        reader = Reader(key, 2, what="__consumer_offsets key")
        key_data: dict[str, JsonValue]
        if record_type == _GROUP_KEY:
            key_data = {"group": reader.string()}
        else:
            key_data = {"group": reader.string(), "topic": reader.string(), "partition": reader.int32()}
        key_json: dict[str, JsonValue] = {"type": str(record_type), "data": key_data}
        if value is None:
            return key_json, DELETE
        version = _value_version(value)
        data = _group_value_json(value, version) if record_type == _GROUP_KEY else _offset_value_json(value, version)
        return key_json, {"version": str(version), "data": data}


def _consumer_group_record_json(record_type: int, key: bytes, value: bytes | None) -> tuple[Printed, Printed]:
    decoded_key = decode_key(key)
    if not isinstance(decoded_key, ConsumerGroupKey):
        raise CorruptRecord(f"not a consumer group key: {decoded_key}")
    key_data: dict[str, JsonValue] = {"groupId": decoded_key.group}
    if decoded_key.member_id is not None:
        key_data["memberId"] = decoded_key.member_id
    if decoded_key.regex is not None:
        key_data["regularExpression"] = decoded_key.regex
    key_json: dict[str, JsonValue] = {"type": str(record_type), "data": key_data}
    if value is None:
        return key_json, DELETE
    if record_type == CONSUMER_GROUP_PARTITION_METADATA:
        raise CorruptRecord("ConsumerGroupPartitionMetadataValue (deprecated) is not decoded")
    version = _value_version(value)
    data = _consumer_group_value_json(decode_consumer_group_value(record_type, value))
    return key_json, {"version": str(version), "data": data}


def _topic_id_partitions_json(value: TopicIdPartitions) -> list[JsonValue]:
    return [{"topicId": kafka_uuid(topic_id), "partitions": list(partitions)} for topic_id, partitions in value]


def _consumer_group_value_json(value: ConsumerGroupValue) -> dict[str, JsonValue]:
    if isinstance(value, ConsumerGroupMetadataValue):
        data: dict[str, JsonValue] = {"epoch": value.epoch}
        if value.metadata_hash != 0:
            data["metadataHash"] = value.metadata_hash
        return data
    if isinstance(value, ConsumerGroupMemberMetadataValue):
        data = {
            "instanceId": value.instance_id,
            "rackId": value.rack_id,
            "clientId": value.client_id,
            "clientHost": value.client_host,
            "subscribedTopicNames": list(value.subscribed_topic_names),
            "subscribedTopicRegex": value.subscribed_topic_regex,
            "rebalanceTimeoutMs": value.rebalance_timeout_ms,
            "serverAssignor": value.server_assignor,
        }
        if value.classic_protocols is not None:
            data["classicMemberMetadata"] = {"supportedProtocols": [
                {"name": name, "metadata": _base64(metadata)} for name, metadata in value.classic_protocols
            ]}
        return data
    if isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        return {"assignmentEpoch": value.assignment_epoch}
    if isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        return {"topicPartitions": _topic_id_partitions_json(value.topic_partitions)}
    if isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
        return {
            "memberEpoch": value.member_epoch,
            "previousMemberEpoch": value.previous_member_epoch,
            "state": value.state,
            "assignedPartitions": _topic_id_partitions_json(value.assigned_partitions),
            "partitionsPendingRevocation": _topic_id_partitions_json(value.partitions_pending_revocation),
        }
    assert isinstance(value, ConsumerGroupRegularExpressionValue)
    return {"topics": list(value.topics), "version": value.version, "timestamp": value.timestamp}


def _offset_value_json(value: bytes, version: int) -> dict[str, JsonValue]:
    decoded = decode_offset_value(value)
    data: dict[str, JsonValue] = {"offset": decoded.offset}
    if version >= 3:
        data["leaderEpoch"] = decoded.leader_epoch
    data["metadata"] = decoded.metadata
    data["commitTimestamp"] = decoded.commit_timestamp
    if version == 1:
        data["expireTimestamp"] = decoded.expire_timestamp
    return data


def _group_value_json(value: bytes, version: int) -> dict[str, JsonValue]:
    decoded = decode_group_value(value)
    data: dict[str, JsonValue] = {
        "protocolType": decoded.protocol_type,
        "generation": decoded.generation,
        "protocol": decoded.protocol,
        "leader": decoded.leader,
    }
    if version >= 2:
        data["currentStateTimestamp"] = decoded.current_state_timestamp
    consumer = decoded.protocol_type == _CONSUMER_PROTOCOL_TYPE
    data["members"] = [_member_json(member, version, consumer) for member in decoded.members]
    return data


def _member_json(member: MemberValue, version: int, consumer: bool) -> dict[str, JsonValue]:
    data: dict[str, JsonValue] = {"memberId": member.member_id}
    if version >= 3:
        data["groupInstanceId"] = member.group_instance_id
    data["clientId"] = member.client_id
    data["clientHost"] = member.client_host
    if version >= 1:
        data["rebalanceTimeout"] = member.rebalance_timeout
    data["sessionTimeout"] = member.session_timeout
    subscription: JsonValue = _base64(member.subscription)
    assignment: JsonValue = _base64(member.assignment)
    if consumer:  # Kafka swallows a parse failure and keeps the bytes
        subscription = _or_bytes(_subscription_json, member.subscription)
        assignment = _or_bytes(_assignment_json, member.assignment)
    data["subscription"] = subscription
    data["assignment"] = assignment
    return data


def _base64(data: bytes | None) -> JsonValue:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _or_bytes(parse: Callable[[Reader], dict[str, JsonValue]], data: bytes) -> JsonValue:
    try:
        return parse(Reader(data, what="consumer protocol payload"))
    except CorruptRecord:
        return _base64(data)


# Non-flexible Kafka types (coordinator keys, consumer protocol); trailing bytes are ignored, as Kafka's
# ByteBufferAccessor does.


def _version(reader: Reader) -> int:
    version = reader.int16()
    if not 0 <= version <= _CONSUMER_PROTOCOL_MAX_VERSION:
        raise CorruptRecord(f"unsupported consumer protocol version {version}")
    return version


def _array_length(reader: Reader) -> int:
    size = reader.array_length()
    if size < 0:
        raise CorruptRecord("non-nullable array field was serialized as null")
    if size > reader.remaining:  # each element takes at least one byte
        raise CorruptRecord(f"array of {size} elements does not fit")
    return size


def _int32_array(reader: Reader) -> list[JsonValue]:
    return [reader.int32() for _ in range(_array_length(reader))]


def _topic_partitions(reader: Reader) -> list[JsonValue]:
    return [{"topic": reader.string(), "partitions": _int32_array(reader)} for _ in range(_array_length(reader))]


def _subscription_json(reader: Reader) -> dict[str, JsonValue]:
    version = _version(reader)
    data: dict[str, JsonValue] = {"topics": [reader.string() for _ in range(_array_length(reader))],
                                  "userData": _base64(reader.nullable_bytes())}
    if version >= 1:
        data["ownedPartitions"] = _topic_partitions(reader)
    if version >= 2:
        data["generationId"] = reader.int32()
    if version >= 3:
        data["rackId"] = reader.nullable_string()
    return data


def _assignment_json(reader: Reader) -> dict[str, JsonValue]:
    _version(reader)
    return {"assignedPartitions": _topic_partitions(reader), "userData": _base64(reader.nullable_bytes())}


def parser_for(offsets: bool, transaction_log: bool) -> MessageParser:
    if offsets:
        return OffsetsParser()
    if transaction_log:
        return TransactionLogParser()
    return StringParser()
