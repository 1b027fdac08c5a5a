"""The classic group state machine: transitions, membership, protocol selection."""

from __future__ import annotations

import pytest
from minikafka.coordinator.group.state import (
    Group,
    GroupState,
    IllegalStateTransition,
    Member,
    can_transition,
)
from minikafka.protocol.errors import ErrorCode

from .outcomes import raised


def member(member_id: str, protocols: list[str], instance: str | None = None) -> Member:
    return Member(
        member_id,
        instance,
        "client",
        "/h",
        10000,
        10000,
        "consumer",
        [(name, name.encode()) for name in protocols],
    )


S = GroupState


@pytest.mark.parametrize(
    ("current", "target", "ok"),
    [
        (S.EMPTY, S.PREPARING_REBALANCE, True),
        (S.STABLE, S.PREPARING_REBALANCE, True),
        (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE, True),
        (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, True),
        (S.COMPLETING_REBALANCE, S.STABLE, True),
        (S.PREPARING_REBALANCE, S.EMPTY, True),
        (S.STABLE, S.DEAD, True),
        (S.EMPTY, S.DEAD, True),
        (S.EMPTY, S.STABLE, False),
        (S.EMPTY, S.COMPLETING_REBALANCE, False),
        (S.STABLE, S.COMPLETING_REBALANCE, False),
        (S.PREPARING_REBALANCE, S.STABLE, False),
        (S.DEAD, S.PREPARING_REBALANCE, False),
        (S.STABLE, S.EMPTY, False),
    ],
)
def test_transitions(current: GroupState, target: GroupState, ok: bool) -> None:
    assert can_transition(current, target) is ok
    group = Group("g", state=current)
    if ok:
        group.transition_to(target, 5)
        assert group.state is target and group.state_timestamp_ms == 5
    else:
        with pytest.raises(IllegalStateTransition):
            group.transition_to(target, 5)


def test_first_member_is_leader_and_leader_moves_on_removal() -> None:
    group = Group("g")
    group.add(member("a", ["range"]))
    group.add(member("b", ["range"]))
    assert group.leader_id == "a" and group.protocol_type == "consumer"
    group.remove("a")
    assert group.leader_id == "b"
    group.remove("b")
    assert group.leader_id is None


def test_supports_protocols() -> None:
    group = Group("g")
    assert group.supports_protocols("consumer", ["range"])
    assert not group.supports_protocols("", ["range"])
    assert not group.supports_protocols("consumer", [])
    group.add(member("a", ["range", "roundrobin"]))
    assert group.supports_protocols("consumer", ["roundrobin"])
    assert not group.supports_protocols("consumer", ["sticky"])
    assert not group.supports_protocols("connect", ["range"])


def test_select_protocol_by_votes() -> None:
    group = Group("g")
    group.add(member("a", ["range", "roundrobin"]))
    group.add(member("b", ["roundrobin", "range"]))
    group.add(member("c", ["roundrobin", "range", "sticky"]))
    assert group.candidate_protocols() == {"range", "roundrobin"}
    assert group.select_protocol() == "roundrobin"


def test_select_protocol_tie_goes_to_leader_preference() -> None:
    group = Group("g")
    group.add(member("a", ["range", "roundrobin"]))
    group.add(member("b", ["roundrobin", "range"]))
    assert group.select_protocol() == "range"


def test_static_members_and_fencing() -> None:
    group = Group("g")
    group.add(member("a", ["range"], instance="i1"))
    assert group.static_member_id("i1") == "a"
    assert group.is_static_member_fenced("x", "i1")
    assert not group.is_static_member_fenced("a", "i1")
    assert not group.is_static_member_fenced("x", None)
    replaced = group.replace_static_member("i1", "a", "a2")
    assert replaced.member_id == "a2" and group.leader_id == "a2" and set(group.members) == {"a2"}
    assert group.is_static_member_fenced("a", "i1")


def test_init_next_generation() -> None:
    group = Group("g")
    group.add(member("a", ["range"]))
    group.transition_to(S.PREPARING_REBALANCE, 1)
    group.init_next_generation(2)
    assert (
        group.state is S.COMPLETING_REBALANCE and group.generation_id == 1 and group.protocol_name == "range"
    )
    group.transition_to(S.PREPARING_REBALANCE, 3)
    group.remove("a")
    group.init_next_generation(4)
    assert group.state is S.EMPTY and group.generation_id == 2 and group.protocol_name is None


def test_validate_offset_commit_in_kafkas_order() -> None:
    """Ports Kafka's ClassicGroupTest.testValidateOffsetCommit, with the transactional variant."""
    E = ErrorCode
    group = Group("g")

    def validate(generation_id: int, member_id: str, instance_id: str | None, *, transactional: bool) -> ErrorCode:
        return raised(lambda: group.validate_offset_commit(generation_id, member_id, instance_id,
                                                           transactional=transactional))

    # A commit without member fields (admin client, simple consumer) to an Empty group passes.
    assert validate(-1, "", None, transactional=False) is E.none
    group.add(member("member-id", ["roundrobin"], instance="instance-id"))
    group.transition_to(S.PREPARING_REBALANCE, 0)
    group.init_next_generation(0)
    assert group.is_(S.COMPLETING_REBALANCE) and group.generation_id == 1
    # No member fields while the group has members: only a transactional (v0-2) commit passes.
    assert validate(-1, "", None, transactional=False) is E.unknown_member_id
    assert validate(-1, "", None, transactional=True) is E.none
    assert validate(-1, "unknown", "unknown", transactional=False) is E.unknown_member_id
    assert validate(-1, "member-id", "unknown", transactional=False) is E.unknown_member_id
    # Member and generation are checked before the state: an old generation is ILLEGAL_GENERATION.
    assert validate(0, "member-id", "instance-id", transactional=False) is E.illegal_generation
    assert validate(1, "member-id", "instance-id", transactional=False) is E.rebalance_in_progress
    assert validate(1, "member-id", "instance-id", transactional=True) is E.none
    group.transition_to(S.STABLE, 0)
    assert validate(1, "member-id", "instance-id", transactional=False) is E.none
    group.replace_static_member("instance-id", "member-id", "new-member-id")
    assert validate(1, "member-id", "instance-id", transactional=False) is E.fenced_instance_id
    group.transition_to(S.DEAD, 0)
    assert validate(1, "new-member-id", "instance-id", transactional=False) is (
        E.coordinator_not_available
    )
