"""The group coordinator's answers as error codes: it raises a GroupError to refuse a request and
reports per-member or per-partition outcomes as None (done) or the GroupError of that one."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from minikafka.coordinator.errors import GroupError
from minikafka.protocol.errors import ErrorCode

K = TypeVar("K")


def raised(call: Callable[[], object]) -> ErrorCode:
    """The code of the GroupError `call` raises; NONE when it returns."""
    try:
        call()
    except GroupError as exc:
        return exc.error_code
    return ErrorCode.none


def codes(outcomes: Mapping[K, GroupError | None]) -> dict[K, ErrorCode]:
    """Each partition's (or group's) code, NONE for None."""
    return {key: code(outcome) for key, outcome in outcomes.items()}


def member_codes(outcomes: Sequence[GroupError | None]) -> list[ErrorCode]:
    return [code(outcome) for outcome in outcomes]


def partition_codes(call: Callable[[], Mapping[K, GroupError | None]], keys: Iterable[K]) -> dict[K, ErrorCode]:
    """Per partition, as a handler answers: each one's own outcome, or the refusal's code for all `keys`."""
    try:
        return codes(call())
    except GroupError as exc:
        return dict.fromkeys(keys, exc.error_code)


def code(outcome: GroupError | None) -> ErrorCode:
    return ErrorCode.none if outcome is None else outcome.error_code
