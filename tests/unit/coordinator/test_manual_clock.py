"""The manual clock drives deadline runners: `advance` runs what it passes, in deadline order."""

from __future__ import annotations

import asyncio

import pytest
from minikafka.coordinator.timers import Timers
from minikafka.storage.clock import ManualClock, next_periodic_run

START_MS = 1_000_000


def test_advance_steps_through_deadlines_in_order_and_stops_at_the_target() -> None:
    clock = ManualClock(START_MS)
    timers = Timers(clock)
    clock.add_listener(timers)
    fired: list[tuple[str, int]] = []

    def note(name: str) -> None:
        fired.append((name, clock.now_ms()))

    timers.schedule("late", START_MS + 300, lambda: note("late"))
    timers.schedule("early", START_MS + 100, lambda: note("early"))
    timers.schedule("beyond", START_MS + 1_000, lambda: note("beyond"))

    def chain() -> None:
        note("chain")
        # Scheduled inside the advanced span: fires in the same advance, at its own time.
        timers.schedule("chained", clock.now_ms() + 50, lambda: note("chained"))

    timers.schedule("chain", START_MS + 200, chain)
    assert clock.advance(500) == START_MS + 500
    assert fired == [("early", START_MS + 100), ("chain", START_MS + 200), ("chained", START_MS + 250),
                     ("late", START_MS + 300)]
    assert clock.now_ms() == START_MS + 500 and clock.advanced_ms == 500
    assert clock.monotonic() == 0.5
    assert timers.next_deadline() == START_MS + 1_000, "a deadline past the target waits for the next advance"


def test_a_removed_listener_is_not_run_and_time_never_goes_back() -> None:
    clock = ManualClock(START_MS)
    timers = Timers(clock)
    fired: list[int] = []
    timers.schedule("t", START_MS + 10, lambda: fired.append(clock.now_ms()))
    clock.add_listener(timers)
    clock.remove_listener(timers)
    clock.advance(100)
    assert fired == []
    with pytest.raises(ValueError, match="forward"):
        clock.advance(-1)
    assert clock.now_ms() == START_MS + 100


async def test_started_timers_run_on_advance_and_due_ones_without_it() -> None:
    clock = ManualClock(START_MS)
    timers = Timers(clock)
    timers.start()
    fired: list[str] = []
    try:
        timers.schedule("session", START_MS + 60_000, lambda: fired.append("session"))
        due_now = asyncio.Event()
        timers.schedule("now", START_MS, due_now.set)
        await asyncio.wait_for(due_now.wait(), 5)  # a deadline already due runs on the loop
        await asyncio.sleep(0.05)  # real time passing must not move a manual clock's deadlines
        assert fired == []
        clock.advance(60_000)
        assert fired == ["session"], "the advance itself ran the timer, before returning"
    finally:
        await timers.close()
    timers.schedule("after close", START_MS + 60_001, lambda: fired.append("after close"))
    clock.advance(10)
    assert fired == ["session"], "closed timers are no longer run by the clock"


def test_a_periodic_check_runs_at_its_first_due_time_and_at_the_end_of_a_long_advance() -> None:
    clock = ManualClock(START_MS)
    timers = Timers(clock)
    clock.add_listener(timers)
    runs: list[int] = []

    def check() -> None:
        runs.append(clock.now_ms())
        timers.schedule("check", next_periodic_run(clock, 10_000), check)

    timers.schedule("check", START_MS + 10_000, check)
    clock.advance(86_400_000)  # a day: 8640 intervals
    assert runs == [START_MS + 10_000, START_MS + 86_400_000]
    assert timers.next_deadline() == START_MS + 86_410_000, "outside an advance, the interval as usual"
    clock.advance(10_000)
    assert runs[-1] == START_MS + 86_410_000 and len(runs) == 3
