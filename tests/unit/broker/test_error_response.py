"""The generic error response: every API and version we serve, built from a populated request."""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from typing import Any

import pytest
from kio.index import load_request_schema
from minikafka.broker.handlers import all_handler_modules
from minikafka.broker.wire.errors import error_code_for, shown_code
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import decode_response, encode_response
from minikafka.protocol.error_response import error_response
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.errors import KafkaStorageError

ROUTES = [(int(m.API_KEY), v) for m in all_handler_modules() for v in range(m.VERSIONS.min, m.VERSIONS.max + 1)]
E = ErrorCode.unknown_server_error


def _sample(kafka_type: str | None) -> Any:
    samples: dict[str | None, Any] = {
        "int8": 1, "int16": 1, "int32": 7, "int64": 7, "uint16": 1, "uint32": 1, "float64": 1.0,
        "string": "k", "bytes": b"b", "records": None, "bool": False, "uuid": uuid.UUID(int=1),
        "timedelta_i32": datetime.timedelta(0), "timedelta_i64": datetime.timedelta(0),
        "datetime_i64": datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC),
    }
    return samples[kafka_type]


def populated(cls: type) -> Any:
    """An instance of kio entity `cls` with one element in every array, recursively."""
    hints = typing.get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if typing.get_origin(hint) in (typing.Union, types.UnionType):
            hint = args[0]
        if typing.get_origin(hint) is tuple:
            inner = typing.get_args(hint)[0]
            element = populated(inner) if dataclasses.is_dataclass(inner) else _sample(f.metadata["kafka_type"])
            values[f.name] = (element,)
        elif isinstance(hint, type) and dataclasses.is_dataclass(hint):
            values[f.name] = populated(hint)
        else:
            values[f.name] = _sample(f.metadata.get("kafka_type"))
    return cls(**values)


def error_codes(entity: Any) -> list[ErrorCode]:
    found = []
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if isinstance(value, ErrorCode):
            found.append(value)
        elif isinstance(value, tuple):
            for item in value:
                if dataclasses.is_dataclass(item):
                    found.extend(error_codes(item))
        elif dataclasses.is_dataclass(value):
            found.extend(error_codes(value))
    return found


@pytest.mark.parametrize(("api_key", "version"), ROUTES, ids=[f"{ApiKey(k).name}-v{v}" for k, v in ROUTES])
def test_every_api_gets_an_encodable_response_marked_with_the_error(api_key: int, version: int) -> None:
    request = populated(load_request_schema(api_key, version))
    response = error_response(request, E, "unexpected server error")
    _corr, decoded = decode_response(encode_response(5, response)[4:], api_key, version)
    codes = error_codes(decoded)
    assert codes, "the client must be told something failed"
    assert set(codes) == {E}


def test_entries_mirror_the_request() -> None:
    produce = populated(load_request_schema(ApiKey.PRODUCE, 9))
    response = error_response(produce, E, None)
    [topic] = response.responses
    [partition] = topic.partition_responses
    assert topic.name == "k" and partition.index == 7 and partition.error_code == E

    groups = populated(load_request_schema(ApiKey.DESCRIBE_GROUPS, 5))
    [group] = error_response(groups, E, None).groups
    assert group.group_id == "k" and group.error_code == E

    fetch = populated(load_request_schema(ApiKey.FETCH, 12))
    response = error_response(fetch, E, None)
    assert response.error_code == E
    [entry] = response.responses[0].partitions
    assert entry.partition_index == 7 and entry.error_code == E
    assert entry.records == b""  # never null: librdkafka rejects a null MessageSet


def test_top_level_error_alone_where_the_schema_has_one() -> None:
    join = populated(load_request_schema(ApiKey.JOIN_GROUP, 9))
    response = error_response(join, E, None)
    assert response.error_code == E and response.members == ()


@pytest.mark.parametrize(("api_key", "version", "code", "shown"), [
    (ApiKey.END_TXN, 1, ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch),
    (ApiKey.END_TXN, 2, ErrorCode.producer_fenced, ErrorCode.producer_fenced),
    (ApiKey.INIT_PRODUCER_ID, 3, ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch),
    (ApiKey.INIT_PRODUCER_ID, 4, ErrorCode.producer_fenced, ErrorCode.producer_fenced),
    (ApiKey.ADD_PARTITIONS_TO_TXN, 1, ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch),
    (ApiKey.ADD_OFFSETS_TO_TXN, 2, ErrorCode.producer_fenced, ErrorCode.producer_fenced),
    (ApiKey.TXN_OFFSET_COMMIT, 1, ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available),
    (ApiKey.TXN_OFFSET_COMMIT, 2, ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_load_in_progress),
    (ApiKey.FETCH, 5, ErrorCode.kafka_storage_error, ErrorCode.not_leader_or_follower),
    (ApiKey.FETCH, 6, ErrorCode.kafka_storage_error, ErrorCode.kafka_storage_error),
    (ApiKey.PRODUCE, 3, ErrorCode.kafka_storage_error, ErrorCode.kafka_storage_error),
    (ApiKey.OFFSET_COMMIT, 8, ErrorCode.kafka_storage_error, ErrorCode.not_coordinator),
    (ApiKey.END_TXN, 3, ErrorCode.kafka_storage_error, ErrorCode.not_coordinator),
    (ApiKey.FIND_COORDINATOR, 4, ErrorCode.kafka_storage_error, ErrorCode.coordinator_not_available),
    (ApiKey.PRODUCE, 3, ErrorCode.producer_fenced, ErrorCode.producer_fenced),
])
def test_translation_table(api_key: int, version: int, code: ErrorCode, shown: ErrorCode) -> None:
    assert shown_code(api_key, version, code) is shown


def test_error_code_for_without_a_request() -> None:
    assert error_code_for(KafkaStorageError("disk full")) is ErrorCode.kafka_storage_error
    assert error_code_for(KafkaError("x", code=ErrorCode.invalid_request)) is ErrorCode.invalid_request
    assert error_code_for(ZeroDivisionError()) is ErrorCode.unknown_server_error
