"""ShareGroupHeartbeat's engine (coordinator/share/group.py) with fake topics and timers."""

from __future__ import annotations

from minikafka.coordinator.share.group import ShareGroupEngine, ShareHeartbeat
from minikafka.protocol.errors import ErrorCode


class _Fakes:
    def __init__(self) -> None:
        self.expiries: dict[tuple[str, str], int] = {}
        self.left: list[tuple[str, str]] = []
        self.initialized: list[dict[str, frozenset[int]]] = []
        self.partitions = {"t": 2}

    def engine(self) -> ShareGroupEngine:
        return ShareGroupEngine(
            partition_count=self.partitions.get, session_timeout_ms=lambda _g: 45000,
            heartbeat_interval_ms=lambda _g: 5000,
            schedule_expiry=lambda g, m, ms: self.expiries.__setitem__((g, m), ms),
            cancel_expiry=lambda g, m: self.expiries.pop((g, m), None),
            on_member_left=lambda g, m: self.left.append((g, m)),
            on_assigned=lambda _g, everything: self.initialized.append(everything), max_size=2)


def _beat(engine: ShareGroupEngine, member: str, epoch: int, topics: tuple[str, ...] | None = ("t",)) -> object:
    return engine.heartbeat(ShareHeartbeat("g", member, epoch, None, topics, "client", "/127.0.0.1"))


def test_join_heartbeat_leave_and_epochs() -> None:
    fakes = _Fakes()
    engine = fakes.engine()
    joined = _beat(engine, "a", 0)
    assert (joined.error, joined.member_epoch, joined.assignment) == (ErrorCode.none, 1, {"t": frozenset({0, 1})})
    assert fakes.initialized == [{"t": frozenset({0, 1})}] and fakes.expiries == {("g", "a"): 45000}
    second = _beat(engine, "b", 0)
    assert second.member_epoch == 2 and second.assignment is not None
    again = _beat(engine, "a", 1, None)  # a moves to the new epoch and is told its smaller assignment
    assert again.member_epoch == 2 and again.assignment is not None and len(again.assignment["t"]) == 1
    quiet = _beat(engine, "a", 2, None)
    assert quiet.assignment is None  # nothing changed: no assignment in the answer
    assert _beat(engine, "a", 1, None).error == ErrorCode.fenced_member_epoch
    assert _beat(engine, "c", 0).error == ErrorCode.group_max_size_reached
    left = _beat(engine, "b", -1, None)
    assert (left.error, left.member_epoch) == (ErrorCode.none, -1)
    assert fakes.left == [("g", "b")] and ("g", "b") not in fakes.expiries
    assert engine.groups["g"].group_epoch == 3


def test_invalid_requests_and_expiry() -> None:
    fakes = _Fakes()
    engine = fakes.engine()
    assert _beat(engine, "", 0).error == ErrorCode.invalid_request
    assert _beat(engine, "a", 0, None).error == ErrorCode.invalid_request
    _beat(engine, "a", 0)
    engine.remove_member("g", "a")  # what the session timer does
    assert engine.groups["g"].state == "Empty" and fakes.left == [("g", "a")]
    assert _beat(engine, "a", 1, None).error == ErrorCode.unknown_member_id


def test_a_new_partition_bumps_the_group_epoch() -> None:
    fakes = _Fakes()
    engine = fakes.engine()
    _beat(engine, "a", 0)
    fakes.partitions["t"] = 3
    grown = _beat(engine, "a", 1, None)
    assert grown.member_epoch == 2 and grown.assignment == {"t": frozenset({0, 1, 2})}
