"""Cut a request in two by the topics and partitions it names, and merge the two answers again.

The fault rules (broker/control/faults.py) and the ACL checks (broker/security/api_authorization.py)
both answer part of a request themselves, as a broker that is not the leader of (or may not show)
those partitions does, and hand the rest to the handler. Which field of a request lists topics and
which lists partitions is found from kio's dataclasses once per class, so every API that lists
topics is covered without a table to keep up.
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
import uuid
from collections.abc import Callable
from functools import cache
from typing import Any

from minikafka.protocol.api_keys import ApiKey, kio_range
from minikafka.protocol.codec import request_schema
from minikafka.protocol.error_response import error_response
from minikafka.protocol.errors import ErrorCode

_PARTITION_KEYS = ("partition_index", "partition", "index", "partition_id")
# A topic id (Fetch v13+) counts as the topic it names now: resolved through the caller's resolver.
_TOPIC_KEYS = ("name", "topic", "topic_id")
# APIs whose topic lists are not what the request acts on (a consumer group member's owned or
# assigned partitions, or a share fetch whose share session spans more than the request names, so that
# half of it cannot be answered apart): a topic rule never splits them.
_NOT_TOPIC_ADDRESSED = frozenset({ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE,
                                  ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE})


# --- what a request names ------------------------------------------------------------------------


def group_ids_of(api_key: int, request: Any) -> tuple[str, ...]:
    group_id = getattr(request, "group_id", None)
    if isinstance(group_id, str):
        return (group_id,)
    if api_key == ApiKey.FIND_COORDINATOR:
        return _coordinator_keys(request, key_type=0)
    if api_key == ApiKey.OFFSET_FETCH:  # v8+: a batch of groups
        return tuple(group.group_id for group in getattr(request, "groups", ()) or ())
    if api_key == ApiKey.DESCRIBE_GROUPS:
        return tuple(request.groups)
    if api_key == ApiKey.DELETE_GROUPS:
        return tuple(request.groups_names)
    if api_key == ApiKey.SHARE_GROUP_DESCRIBE:
        return tuple(request.group_ids)
    if api_key == ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS:
        return tuple(group.group_id for group in request.groups)
    return ()


def transactional_ids_of(api_key: int, request: Any) -> tuple[str, ...]:
    # AddPartitionsToTxn v0-3 names it v3_and_below_transactional_id.
    transactional_id = getattr(request, "transactional_id", getattr(request, "v3_and_below_transactional_id", None))
    if isinstance(transactional_id, str):
        return (transactional_id,)
    if api_key == ApiKey.FIND_COORDINATOR:
        return _coordinator_keys(request, key_type=1)
    if api_key == ApiKey.DESCRIBE_TRANSACTIONS:
        return tuple(request.transactional_ids)
    return ()


def _coordinator_keys(request: Any, key_type: int) -> tuple[str, ...]:
    if getattr(request, "key_type", 0) != key_type:  # v0 has no key_type: groups only
        return ()
    if hasattr(request, "coordinator_keys"):  # v4+
        return tuple(request.coordinator_keys)
    return (request.key,)


@dataclasses.dataclass(frozen=True, slots=True)
class _TopicShape:
    """Where a request or response lists topics: `topics[].<name>` with `topics[].<partitions>[]`."""

    topics: str
    name: str
    partitions: str | None  # None: topics only (Metadata)
    partition_key: str | None  # None: the partitions are plain ints (AddPartitionsToTxn v0-3)


def _field_types(cls: type) -> list[tuple[str, Any]]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if type(None) in typing.get_args(hint):
            hint = args[0]
        out.append((f.name, hint))
    return out


def _array_element(hint: Any) -> Any:
    return typing.get_args(hint)[0] if typing.get_origin(hint) is tuple else None


def _class_of(value: Any) -> type:
    return type(value)  # typed `type`, so the cached lookups below accept it


@cache
def topic_shape(cls: type) -> _TopicShape | None:
    if getattr(cls, "__api_key__", None) in _NOT_TOPIC_ADDRESSED:
        return None
    for name, hint in _field_types(cls):
        element = _array_element(hint)
        if not (isinstance(element, type) and dataclasses.is_dataclass(element)):
            continue
        element_fields = _field_types(element)
        names = [field for field, _ in element_fields]
        topic_key = next((key for key in _TOPIC_KEYS if key in names), None)
        if topic_key is None:
            continue
        for sub_name, sub_hint in element_fields:
            sub_element = _array_element(sub_hint)
            if sub_element is None:
                continue
            if "partition" not in sub_name:
                continue  # CreateTopics' `assignments` list partitions too, but the topic is what it creates
            if isinstance(sub_element, type) and dataclasses.is_dataclass(sub_element):
                sub_names = {field.name for field in dataclasses.fields(sub_element)}
                key = next((k for k in _PARTITION_KEYS if k in sub_names), None)
                if key is not None:
                    return _TopicShape(name, topic_key, sub_name, key)
            else:
                return _TopicShape(name, topic_key, sub_name, None)
        return _TopicShape(name, topic_key, None, None)
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class Split:
    """A request cut in two by a topic filter: what the fault answers, and what is handled normally."""

    matched: Any
    rest: Any | None  # None: every partition matched


TopicResolver = Callable[[uuid.UUID], "str | None"]


def split_request(request: Any, selects: Callable[[str, int | None], bool],
                  resolve_topic: TopicResolver | None = None) -> Split | None:
    """None when nothing in the request matches (or it names no topics). Topics given by id are matched by
    the name `resolve_topic` gives them (an id it does not know matches no rule); without a resolver the id
    itself is what `selects` sees."""
    shape = topic_shape(_class_of(request))
    if shape is None:
        return None
    entries = getattr(request, shape.topics, None) or ()
    matched: list[Any] = []
    rest: list[Any] = []
    for entry in entries:
        topic = getattr(entry, shape.name)
        if isinstance(topic, uuid.UUID) and resolve_topic is not None:
            topic = resolve_topic(topic)
        partitions = getattr(entry, shape.partitions) if shape.partitions is not None else ()
        if not partitions:
            (matched if isinstance(topic, str) and selects(topic, None) else rest).append(entry)
            continue
        assert shape.partitions is not None
        hit: list[Any] = []
        miss: list[Any] = []
        for partition in partitions:
            index = getattr(partition, shape.partition_key) if shape.partition_key is not None else partition
            (hit if topic is not None and selects(topic, index) else miss).append(partition)
        if hit:
            matched.append(dataclasses.replace(entry, **{shape.partitions: tuple(hit)}))
        if miss:
            rest.append(dataclasses.replace(entry, **{shape.partitions: tuple(miss)}))
    if not matched:
        return None
    return Split(dataclasses.replace(request, **{shape.topics: tuple(matched)}),
                 dataclasses.replace(request, **{shape.topics: tuple(rest)}) if rest else None)


def partition_errors(split: Split, code: ErrorCode, message: str | None = None) -> Any | None:
    """The error answer for the matched topics and partitions only, the request itself successful; None
    when the API reports such an error only for the whole request (OffsetFetch v2-7, OffsetDelete)."""
    answer = error_response(split.matched, code, message)
    shape = topic_shape(_class_of(answer))
    if shape is None or not getattr(answer, shape.topics, None):
        return None
    if _has_field(_class_of(answer), "error_code"):
        answer = dataclasses.replace(answer, error_code=ErrorCode.none)  # Fetch's top-level error_code
    return answer


def merge_responses(handled: Any, injected: Any) -> Any:
    """`handled` with the topics and partitions of `injected` added (same response class)."""
    shape = topic_shape(_class_of(handled))
    assert shape is not None, f"{type(handled).__name__} lists no topics"
    topics = list(getattr(handled, shape.topics))
    position = {getattr(entry, shape.name): i for i, entry in enumerate(topics)}
    for entry in getattr(injected, shape.topics):
        i = position.get(getattr(entry, shape.name))
        if i is None or shape.partitions is None:
            topics.append(entry)
            continue
        merged = getattr(topics[i], shape.partitions) + getattr(entry, shape.partitions)
        topics[i] = dataclasses.replace(topics[i], **{shape.partitions: merged})
    return dataclasses.replace(handled, **{shape.topics: tuple(topics)})


@cache
def _has_field(cls: type, name: str) -> bool:
    return any(f.name == name for f in dataclasses.fields(cls))


def with_throttle(response: Any, throttle_ms: int) -> Any:
    """The response with throttle_time_ms set; a response without the field is returned as it is."""
    if not _has_field(_class_of(response), "throttle_time"):
        return response
    return dataclasses.replace(response, throttle_time=datetime.timedelta(milliseconds=throttle_ms))


# --- what an API's requests can name, over every version the codec reads ---------------------------------

_GROUP_ID_FIELDS = ("group_id",)
_TRANSACTIONAL_ID_FIELDS = ("transactional_id", "v3_and_below_transactional_id")
# APIs that name groups or transactional ids in lists rather than in a field of those names.
_LISTS_GROUPS = frozenset({ApiKey.FIND_COORDINATOR, ApiKey.OFFSET_FETCH, ApiKey.DESCRIBE_GROUPS,
                           ApiKey.DELETE_GROUPS})
_LISTS_TRANSACTIONAL_IDS = frozenset({ApiKey.FIND_COORDINATOR, ApiKey.DESCRIBE_TRANSACTIONS})


def _request_classes(api_key: int) -> list[type]:
    served = kio_range(api_key)
    return [request_schema(api_key, version) for version in range(served.min, served.max + 1)]


@cache
def can_name_groups(api_key: int) -> bool:
    """Whether some version of this API's request names a group id (what group_ids_of reads)."""
    return api_key in _LISTS_GROUPS or any(_has_field(cls, name) for cls in _request_classes(api_key)
                                           for name in _GROUP_ID_FIELDS)


@cache
def can_name_transactional_ids(api_key: int) -> bool:
    """Whether some version of this API's request names a transactional id (what transactional_ids_of reads)."""
    return api_key in _LISTS_TRANSACTIONAL_IDS or any(_has_field(cls, name) for cls in _request_classes(api_key)
                                                      for name in _TRANSACTIONAL_ID_FIELDS)


@cache
def can_name_topics(api_key: int) -> bool:
    """Whether some version of this API's request lists topics that split_request can cut by."""
    return any(topic_shape(cls) is not None for cls in _request_classes(api_key))
