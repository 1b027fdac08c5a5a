"""API keys and version ranges, plus what kio can parse for each key."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from functools import cache

from kio.index import UnknownAPIKey, UnknownEntity, load_request_schema
from kio.schema.index import api_key_map, schema_name_map


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


@dataclass(frozen=True, slots=True)
class VersionRange:
    min: int
    max: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.min <= version <= self.max


def api_name(key: int) -> str:
    try:
        return ApiKey(key).name
    except ValueError:
        return api_key_map.get(key, f"UNKNOWN_{key}")


@cache
def kafka_api_name(key: int) -> str:
    """The name Kafka gives the API ("FindCoordinator", "EndTxn"), for keys kio knows even if we do not serve them."""
    snake = api_key_map.get(key)
    if snake is None:
        return f"Unknown{key}"
    return "".join(part.capitalize() for part in snake.split("_"))


def _normalized(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


_KEYS_BY_NAME = {_normalized(name): key for key, name in api_key_map.items()}


def api_key_by_name(name: str) -> int | None:
    """The key of an API named as Kafka does ("EndTxn"), as our enum does ("END_TXN"), or by number."""
    text = name.strip()
    if text.isdigit():
        return int(text) if int(text) in api_key_map else None
    return _KEYS_BY_NAME.get(_normalized(text))


@cache
def kio_range(key: int) -> VersionRange:
    """The versions of `key` that kio has schemas for."""
    versions = sorted(schema_name_map[api_key_map[key]])
    return VersionRange(versions[0], versions[-1])


@cache
def is_flexible_request(key: int, version: int) -> bool:
    try:
        return bool(load_request_schema(key, version).__flexible__)
    except (UnknownAPIKey, UnknownEntity):
        return False
