"""Fault rules without a socket: parsing, matching, and the split of a request by a topic filter whose two
answers must merge into one valid response for every API and version we serve."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from minikafka.broker.config.config import ConfigError, build_config
from minikafka.broker.control.faults import FaultSpecError, FaultTable
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import decode_response, encode_response
from minikafka.protocol.error_response import error_response
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.split import merge_responses, partition_errors, split_request, topic_shape

from .test_error_response import ROUTES, populated

CODE = ErrorCode.not_leader_or_follower
# Responses that carry one error for the whole request, with no per-partition error to put it on (DescribeLogDirs:
# one per log directory).
WHOLE_REQUEST_ONLY = {*((ApiKey.OFFSET_FETCH, v) for v in range(2, 8)), (ApiKey.OFFSET_DELETE, 0),
                      *((ApiKey.DESCRIBE_LOG_DIRS, v) for v in range(1, 5)), (ApiKey.LIST_PARTITION_REASSIGNMENTS, 0)}
_ERROR_FIELDS = ("error_code", "partition_error_code")
_KEYS = ("partition_index", "partition", "index", "partition_id")


def _two_partitions(request: Any) -> tuple[Any, int, int] | None:
    """The populated request with its first topic holding two partitions, and their indexes."""
    shape = topic_shape(type(request))
    if shape is None or shape.partitions is None:
        return None
    entry = getattr(request, shape.topics)[0]
    first = getattr(entry, shape.partitions)[0]
    if shape.partition_key is None:
        second, first_index, second_index = first + 1, first, first + 1
    else:
        first_index = getattr(first, shape.partition_key)
        second_index = first_index + 1
        second = dataclasses.replace(first, **{shape.partition_key: second_index})
    entry = dataclasses.replace(entry, **{shape.partitions: (first, second)})
    return dataclasses.replace(request, **{shape.topics: (entry,)}), first_index, second_index


def _partition_codes(response: Any) -> dict[int, int]:
    shape = topic_shape(type(response))
    assert shape is not None and shape.partitions is not None
    codes = {}
    for topic in getattr(response, shape.topics):
        for partition in getattr(topic, shape.partitions):
            key = next(getattr(partition, k) for k in _KEYS if hasattr(partition, k))
            codes[int(key)] = int(next(getattr(partition, f) for f in _ERROR_FIELDS if hasattr(partition, f)))
    return codes


SPLITTABLE = []
for _key, _version in ROUTES:
    _request = populated(load_request_schema(_key, _version))
    _prepared = _two_partitions(_request)
    if _prepared is not None:
        SPLITTABLE.append(pytest.param(_prepared, id=f"{ApiKey(_key).name}-v{_version}"))


def test_the_partition_level_apis_are_all_found() -> None:
    names = {param.id.rsplit("-v", 1)[0] for param in SPLITTABLE}
    assert {"PRODUCE", "FETCH", "LIST_OFFSETS", "OFFSET_COMMIT", "TXN_OFFSET_COMMIT", "ADD_PARTITIONS_TO_TXN",
            "DELETE_RECORDS", "OFFSET_FOR_LEADER_EPOCH"} <= names


@pytest.mark.parametrize("prepared", SPLITTABLE)
def test_split_answers_merge_into_one_valid_response(prepared: tuple[Any, int, int]) -> None:
    request, kept, faulted = prepared
    topic = getattr(getattr(request, topic_shape(type(request)).topics)[0],  # type: ignore[union-attr]
                    topic_shape(type(request)).name)  # type: ignore[union-attr]
    split = split_request(request, lambda name, partition: name == topic and partition == faulted)
    assert split is not None and split.rest is not None
    injected = partition_errors(split, CODE)
    if injected is None:  # errors only for the whole request: dispatch answers error_response(request) instead
        assert (request.__api_key__, request.__version__) in WHOLE_REQUEST_ONLY
        return
    handled = error_response(split.rest, ErrorCode.none, None)  # stands for the handler's answer
    merged = merge_responses(handled, injected)
    correlation_id, decoded = decode_response(encode_response(7, merged)[4:], request.__api_key__,
                                              request.__version__)
    assert correlation_id == 7
    assert _partition_codes(decoded) == {kept: ErrorCode.none, faulted: CODE}
    if hasattr(decoded, "error_code"):
        assert decoded.error_code == ErrorCode.none  # a partition-level fault leaves the request successful


def test_take_counts_and_filters() -> None:
    table = FaultTable()
    rule = table.add({"api": "FindCoordinator", "error": "COORDINATOR_LOAD_IN_PROGRESS", "count": 2,
                      "group_id": "g1"})
    other_group = FindCoordinatorRequest(key_type=0, coordinator_keys=("g2",))
    same_group = FindCoordinatorRequest(key_type=0, coordinator_keys=("g1",))
    transactional = FindCoordinatorRequest(key_type=1, coordinator_keys=("g1",))
    assert table.take(ApiKey.FIND_COORDINATOR, None, other_group) is None
    assert table.take(ApiKey.FIND_COORDINATOR, None, transactional) is None  # a transactional id, not a group
    assert table.take(ApiKey.METADATA, None, same_group) is None
    assert table.take(ApiKey.FIND_COORDINATOR, None, same_group) is not None
    assert table.list()[0]["remaining"] == 1 and table.list()[0]["fired"] == 1
    assert table.take(ApiKey.FIND_COORDINATOR, None, same_group).rule is rule  # type: ignore[union-attr]
    assert table.rules == {}
    assert table.take(ApiKey.FIND_COORDINATOR, None, same_group) is None


def test_first_rule_added_wins() -> None:
    table = FaultTable()
    first = table.add({"api": "Heartbeat", "delay_ms": 1, "count": None})
    table.add({"api": "Heartbeat", "error": "NOT_COORDINATOR", "count": None})
    request = populated(load_request_schema(ApiKey.HEARTBEAT, 4))
    assert all(table.take(ApiKey.HEARTBEAT, "c", request).rule is first for _ in range(3))  # type: ignore[union-attr]


@pytest.mark.parametrize("spec", [
    "not a mapping", {"error": 6}, {"api": "Produce", "error": 6, "drop": "after"},
    {"api": "Produce", "error": 6, "count": True}, {"api": "Produce", "throttle_ms": 10**9},
    {"api": True, "error": 6}, {"api": "Produce", "error": 6.5}, {"api": "Produce", "error": 6, "client_id": ""},
])
def test_bad_specs(spec: Any) -> None:
    with pytest.raises(FaultSpecError):
        FaultTable().add(spec)


def test_admin_listener_config() -> None:
    assert build_config(overrides=[], environ={}).admin_port is None  # off by default
    enabled = build_config(overrides=["admin.listener.port=0"], environ={})
    assert (enabled.admin_port, enabled.admin_host) == (0, "127.0.0.1")
    for bad in ("70000", "-1", "port"):
        with pytest.raises(ConfigError, match=r"admin\.listener\.port"):
            build_config(overrides=[f"admin.listener.port={bad}"], environ={})


@pytest.mark.parametrize(("spec", "field"), [
    ({"api": "Metadata", "error": 15, "group_id": "billing"}, "group_id"),
    ({"api": "ListGroups", "error": 15, "group_id": "billing"}, "group_id"),
    ({"api": "Fetch", "error": 6, "transactional_id": "t1"}, "transactional_id"),
    ({"api": "Heartbeat", "error": 6, "topic": "orders"}, "topic"),
    ({"api": "EndTxn", "error": 6, "topic": "orders", "partition": 0}, "topic"),
])
def test_a_filter_the_api_never_carries_is_refused(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(FaultSpecError, match=f"^{field}: .*could never match"):
        FaultTable().add(spec)


@pytest.mark.parametrize("spec", [
    {"api": "FindCoordinator", "error": 15, "group_id": "billing"},  # named in the key (or coordinator_keys)
    {"api": "OffsetFetch", "error": 15, "group_id": "billing"},  # v8+: a list of groups
    {"api": "AddOffsetsToTxn", "error": 51, "group_id": "billing", "transactional_id": "t1"},
    {"api": "Produce", "error": 6, "transactional_id": "t1", "topic": "orders"},
    {"api": "DescribeTransactions", "error": 15, "transactional_id": "t1"},
])
def test_filters_the_api_can_carry_are_kept(spec: dict[str, Any]) -> None:
    assert FaultTable().add(spec).fired == 0
