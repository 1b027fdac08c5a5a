"""Fault rules: make chosen requests fail, stall, lose their connection or be throttled, on purpose.

A rule names one API and, optionally, narrows it to a topic (and partition), a group id, a
transactional id or a client id. The next `count` requests it matches (or every one, with
count=None, until the rule is removed) get, in this order: a delay of `delay_ms`; a dropped
connection ("before" handling: nothing happens; "after": the request takes effect, its response is
lost); an error code instead of handling (`error`); `throttle_ms` in the response's throttle_time_ms.
The first matching rule, in the order rules were added, is used and counted; the others stay.

Errors are built by protocol/error_response.py, so they look like a real broker's. With a topic
filter, only the matched partitions of a request that lists topics (Produce, Fetch, ListOffsets,
OffsetCommit, AddPartitionsToTxn, Metadata ...) get the error, as a broker that is not the leader
of those partitions answers; the rest of the request is handled normally and the two answers are
merged. Requests that name no topic (or Metadata asking for all topics) never match a topic filter.

The table is read by dispatch on every request; with no rules the cost is one truth test of an
empty dict. Rules live in the running broker only: a restart starts with none, as with kfake's
ControlKey and librdkafka's mock cluster.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from typing import Any

import structlog
from minikafka.broker.wire.hooks import DROP_AFTER, DROP_BEFORE, FaultHit
from minikafka.broker.wire.services import BrokerServices
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.split import (
    TopicResolver,
    can_name_groups,
    can_name_topics,
    can_name_transactional_ids,
    group_ids_of,
    split_request,
    transactional_ids_of,
)

_log = structlog.get_logger("minikafka.faults")

DROP_POINTS = (DROP_BEFORE, DROP_AFTER)
# Longest delay or throttle a rule may ask for: a stuck request past Kafka clients' default
# request.timeout.ms (30 s) ten times over tests nothing more.
MAX_DELAY_MS = 300_000
# Rules one broker holds; a test suite adding rules in a loop without clearing them is a bug to report.
MAX_RULES = 10_000
_SPEC_KEYS = frozenset({"api", "error", "count", "delay_ms", "drop", "throttle_ms", "topic", "partition",
                        "group_id", "transactional_id", "client_id"})


class FaultSpecError(ValueError):
    """A fault rule that cannot be used; the message says which field and why."""


def _normalized(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


_API_BY_NAME = {_normalized(key.name): key for key in ApiKey}
_ERROR_BY_NAME = {_normalized(code.name): code for code in ErrorCode}


def kafka_api_name(key: int) -> str:
    """Kafka's spelling, "FindCoordinator" for FIND_COORDINATOR."""
    return "".join(part.capitalize() for part in ApiKey(key).name.split("_"))


def api_key_of(value: object) -> ApiKey:
    """An API served here, by Kafka's name ("Produce", "FindCoordinator"; case and _ ignored) or key."""
    if isinstance(value, bool):
        raise FaultSpecError(f"api: expected a Kafka API name or key, got {value!r}")
    if isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit()):
        try:
            return ApiKey(int(value))
        except ValueError:
            raise FaultSpecError(f"api: key {value} is not an API minikafka serves") from None
    if isinstance(value, str) and _normalized(value) in _API_BY_NAME:
        return _API_BY_NAME[_normalized(value)]
    raise FaultSpecError(f"api: unknown API {value!r} (use Kafka's names, such as Produce or FindCoordinator)")


def error_code_of(value: object) -> ErrorCode:
    """A Kafka error by name (NOT_LEADER_OR_FOLLOWER, any case) or number; NONE is not an error."""
    code: ErrorCode | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        code = ErrorCode(value) if value in ErrorCode._value2member_map_ else None
    elif isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return error_code_of(int(text))
        code = _ERROR_BY_NAME.get(_normalized(text))
    if code is None:
        raise FaultSpecError(f"error: unknown Kafka error {value!r} (use a name such as NOT_LEADER_OR_FOLLOWER "
                             "or its number)")
    if code == ErrorCode.none:
        raise FaultSpecError("error: NONE is not an error")
    return code


def _optional_int(spec: Mapping[str, Any], key: str, low: int, high: int) -> int | None:
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise FaultSpecError(f"{key}: expected an integer from {low} to {high}, got {value!r}")
    return value


def _optional_str(spec: Mapping[str, Any], key: str) -> str | None:
    value = spec.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise FaultSpecError(f"{key}: expected a non-empty string, got {value!r}")
    return value


@dataclasses.dataclass(slots=True)
class FaultRule:
    id: int
    api_key: ApiKey
    error: ErrorCode | None = None
    delay_ms: int = 0
    drop: str | None = None
    throttle_ms: int | None = None
    remaining: int | None = 1  # None: until removed
    topic: str | None = None
    partition: int | None = None
    group_id: str | None = None
    transactional_id: str | None = None
    client_id: str | None = None
    fired: int = 0

    def selects(self, topic: str, partition: int | None) -> bool:
        return topic == self.topic and (self.partition is None or partition is None or partition == self.partition)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "api": kafka_api_name(self.api_key), "api_key": int(self.api_key),
            "error": self.error.name.upper() if self.error is not None else None,
            "error_code": int(self.error) if self.error is not None else None,
            "delay_ms": self.delay_ms, "drop": self.drop, "throttle_ms": self.throttle_ms,
            "remaining": self.remaining, "fired": self.fired, "topic": self.topic, "partition": self.partition,
            "group_id": self.group_id, "transactional_id": self.transactional_id, "client_id": self.client_id,
        }


def parse_rule(spec: Mapping[str, Any], rule_id: int) -> FaultRule:
    """A rule from its JSON form (the HTTP body and the Python keywords are the same names)."""
    if not isinstance(spec, Mapping):
        raise FaultSpecError("a fault rule is a JSON object")
    unknown = sorted(set(spec) - _SPEC_KEYS)
    if unknown:
        raise FaultSpecError(f"unknown field(s) {', '.join(map(str, unknown))}; known: {', '.join(sorted(_SPEC_KEYS))}")
    if "api" not in spec:
        raise FaultSpecError("api: required (a Kafka API name such as Produce, or its key)")
    drop = spec.get("drop")
    if drop is not None and drop not in DROP_POINTS:
        raise FaultSpecError(f"drop: expected {' or '.join(DROP_POINTS)}, got {drop!r}")
    count = spec.get("count", 1)
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        raise FaultSpecError(f"count: expected a positive integer, or null for until removed; got {count!r}")
    rule = FaultRule(
        id=rule_id, api_key=api_key_of(spec["api"]),
        error=error_code_of(spec["error"]) if spec.get("error") is not None else None,
        delay_ms=_optional_int(spec, "delay_ms", 0, MAX_DELAY_MS) or 0, drop=drop,
        throttle_ms=_optional_int(spec, "throttle_ms", 0, MAX_DELAY_MS), remaining=count,
        topic=_optional_str(spec, "topic"), partition=_optional_int(spec, "partition", 0, 2**31 - 1),
        group_id=_optional_str(spec, "group_id"), transactional_id=_optional_str(spec, "transactional_id"),
        client_id=_optional_str(spec, "client_id"),
    )
    if rule.error is None and not rule.delay_ms and rule.drop is None and rule.throttle_ms is None:
        raise FaultSpecError("a rule needs at least one of error, delay_ms, drop, throttle_ms")
    if rule.partition is not None and rule.topic is None:
        raise FaultSpecError("partition: needs topic")
    if rule.error is not None and rule.drop == DROP_AFTER:
        raise FaultSpecError("drop=after needs the request handled, which error prevents; use one of them")
    _check_filters_can_match(rule)
    return rule


def _check_filters_can_match(rule: FaultRule) -> None:
    """Refuse a filter the rule's API never carries (group_id on Metadata): such a rule would never fire."""
    api = kafka_api_name(rule.api_key)
    if rule.group_id is not None and not can_name_groups(rule.api_key):
        raise FaultSpecError(f"group_id: {api} requests name no group, so this rule could never match")
    if rule.transactional_id is not None and not can_name_transactional_ids(rule.api_key):
        raise FaultSpecError(f"transactional_id: {api} requests name no transactional id, so this rule could "
                             "never match")
    if rule.topic is not None and not can_name_topics(rule.api_key):
        raise FaultSpecError(f"topic: {api} requests name no topic, so this rule could never match")


# --- the table -------------------------------------------------------------------------------------


class FaultTable:
    """The rules of one broker; used from its event loop only (Broker calls in through the loop)."""

    def __init__(self) -> None:
        # Ordered by id: the first rule added wins when several match.
        self.rules: dict[int, FaultRule] = {}
        self._ids = itertools.count(1)
        # Set by the server: the name of a topic id, so topic rules match requests that name topics by id.
        self.resolve_topic: TopicResolver | None = None

    def add(self, spec: Mapping[str, Any]) -> FaultRule:
        if len(self.rules) >= MAX_RULES:
            raise FaultSpecError(f"too many fault rules ({MAX_RULES}); clear some first")
        rule = parse_rule(spec, next(self._ids))
        self.rules[rule.id] = rule
        _log.info("fault rule added", **{key: value for key, value in rule.to_json().items() if value is not None})
        return rule

    def list(self) -> list[dict[str, Any]]:
        return [rule.to_json() for rule in self.rules.values()]

    def remove(self, rule_id: int) -> bool:
        removed = self.rules.pop(rule_id, None) is not None
        if removed:
            _log.info("fault rule removed", fault_id=rule_id)
        return removed

    def clear(self) -> int:
        count = len(self.rules)
        self.rules.clear()
        if count:
            _log.info("fault rules cleared", count=count)
        return count

    def take(self, api_key: int, client_id: str | None, request: Any) -> FaultHit | None:
        """The hit of the first rule matching this request, counted; None when no rule matches."""
        for rule in self.rules.values():
            if rule.api_key != api_key:
                continue
            if rule.client_id is not None and rule.client_id != client_id:
                continue
            if rule.group_id is not None and rule.group_id not in group_ids_of(api_key, request):
                continue
            if rule.transactional_id is not None and rule.transactional_id not in transactional_ids_of(api_key,
                                                                                                     request):
                continue
            split = None
            if rule.topic is not None:
                split = split_request(request, rule.selects, self.resolve_topic)
                if split is None:
                    continue
            rule.fired += 1
            if rule.remaining is not None:
                rule.remaining -= 1
                if rule.remaining <= 0:
                    del self.rules[rule.id]
            return FaultHit(rule, split)
        return None


def fault_table(services: BrokerServices) -> FaultTable:
    """The node's fault table, for the control plane that edits its rules (dispatch sees only the hook)."""
    table = services.faults
    assert isinstance(table, FaultTable), f"fault hook is a {type(table).__name__}"
    return table
