"""A version-correct error response for any request, built from kio's schema classes.

Kafka's AbstractRequest.getErrorResponse, generically: a response with a top-level `error_code`
carries the error there alone (as Kafka's JoinGroup, EndTxn, ListGroups ... do); Fetch also marks
every requested partition, as Kafka does below v13. A response without one mirrors the request's
topics, partitions, groups, ids ... with the error on each entry (Produce, Metadata, OffsetCommit,
DescribeGroups ...). Request and response arrays are paired by name, the rest in declaration order
(Produce `topic_data` -> `responses`); entry keys are copied by name or by the aliases Kafka's
schemas use for the same key (`partition` / `index` / `partition_index`).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from functools import cache
from typing import Any

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.build import build, has_field, nested
from minikafka.protocol.codec import response_class
from minikafka.protocol.errors import ErrorCode

# Response fields holding the error of an entry.
_ERROR_FIELDS = ("error_code", "partition_error_code")
_MESSAGE_FIELDS = ("error_message",)
# The same key under the names different schemas give it.
_ALIASES: dict[str, tuple[str, ...]] = {
    "partition_index": ("partition_index", "partition", "index"),
    "partition": ("partition", "partition_index", "index"),
    "index": ("index", "partition_index", "partition"),
    "name": ("name", "topic"),
    "topic": ("topic", "name"),
}
_RECORDS_TYPE = "records"
_KEY_TYPES_OF_STR = frozenset({"string"})
_KEY_TYPES_OF_INT = frozenset({"int32", "int64"})
# APIs whose error response marks every requested entry even though it has a top-level error code (Kafka's
# FetchRequest, ElectLeadersRequest and AlterPartitionReassignmentsRequest getErrorResponse).
_MIRROR_DESPITE_TOP_LEVEL = frozenset({ApiKey.FETCH, ApiKey.ELECT_LEADERS, ApiKey.ALTER_PARTITION_REASSIGNMENTS})


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    name: str
    is_array: bool
    element: type | None  # entity class of an entity array or nested entity
    kafka_type: str | None


@cache
def _fields(cls: type) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if typing.get_origin(hint) in (typing.Union, types.UnionType):
            hint = args[0]
        is_array = typing.get_origin(hint) is tuple
        inner = typing.get_args(hint)[0] if is_array else hint
        element = inner if isinstance(inner, type) and dataclasses.is_dataclass(inner) else None
        out.append(_Field(f.name, is_array, element, f.metadata.get("kafka_type")))
    return tuple(out)


def _entity_arrays(cls: type) -> list[_Field]:
    return [f for f in _fields(cls) if f.is_array]


def _pair_arrays(request_cls: type, response_cls: type) -> dict[str, str]:
    """Response array field -> request array field it mirrors."""
    request_arrays = [f.name for f in _entity_arrays(request_cls)]
    response_arrays = [f.name for f in _fields(response_cls) if f.is_array and f.element is not None]
    pairs = {name: name for name in response_arrays if name in request_arrays}
    left_request = [name for name in request_arrays if name not in pairs.values()]
    left_response = [name for name in response_arrays if name not in pairs]
    # The rest pair up in declaration order: the request's main array comes first, as does the
    # response's (Produce `topic_data` -> `responses`, before v10's `node_endpoints`).
    pairs.update(zip(left_response, left_request, strict=False))
    return pairs


def _key_value(request_entry: Any, name: str) -> tuple[bool, Any]:
    for candidate in _ALIASES.get(name, (name,)):
        if hasattr(request_entry, candidate):
            value = getattr(request_entry, candidate)
            if not isinstance(value, tuple):
                return True, value
    return False, None


def _entry(response_cls: type, request_entry: Any, code: ErrorCode, message: str | None) -> dict[str, Any]:
    """One response entry mirroring `request_entry` (an entity, or a bare key such as a group id)."""
    values: dict[str, Any] = {}
    own_fields = _fields(response_cls)
    has_error = any(f.name in _ERROR_FIELDS for f in own_fields)
    if dataclasses.is_dataclass(request_entry):
        for f in own_fields:
            if f.is_array or f.element is not None or f.name in _ERROR_FIELDS:
                continue
            found, value = _key_value(request_entry, f.name)
            if found:
                values[f.name] = value
        if not has_error:
            # An entry without its own error (a Produce topic) carries it in its sub-entries.
            values.update(_mirror(type(request_entry), request_entry, response_cls, code, message))
    else:
        # A bare key (DescribeGroups' group ids, DeleteTopics' names): the first field of its type.
        wanted = _KEY_TYPES_OF_STR if isinstance(request_entry, str) else _KEY_TYPES_OF_INT
        for f in own_fields:
            if not f.is_array and f.kafka_type in wanted:
                values[f.name] = request_entry
                break
    for f in own_fields:
        if f.name in _ERROR_FIELDS:
            values[f.name] = code
        elif f.name in _MESSAGE_FIELDS:
            values[f.name] = message
        elif f.kafka_type == _RECORDS_TYPE:
            # Kafka answers a refused Fetch partition with empty records (MemoryRecords.EMPTY); librdkafka
            # fails the whole response on a null MessageSet ("invalid MessageSetSize -1").
            values[f.name] = b""
    return values


def _mirror(request_cls: type, request: Any, response_cls: type, code: ErrorCode,
            message: str | None) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for response_field, request_field in _pair_arrays(request_cls, response_cls).items():
        entries = getattr(request, request_field, None)
        if entries is None:
            continue
        element = nested(response_cls, response_field)
        values[response_field] = [_entry(element, entry, code, message) for entry in entries]
    return values


def error_response(request: Any, code: ErrorCode, message: str | None) -> Any:
    """The response to `request` (a decoded kio request) that reports `code` for all of it."""
    api_key = request.__api_key__
    response_cls = response_class(api_key, request.__version__)
    values: dict[str, Any] = {}
    top_level = has_field(response_cls, "error_code")
    if top_level:
        values["error_code"] = code
        if has_field(response_cls, "error_message"):
            values["error_message"] = message
    if not top_level or api_key in _MIRROR_DESPITE_TOP_LEVEL:
        values.update(_mirror(type(request), request, response_cls, code, message))
    return build(response_cls, **values)
