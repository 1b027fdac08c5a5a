"""Coordinator timers: keyed deadlines, replacement, cancellation, and the asyncio runner."""

from __future__ import annotations

import asyncio

from minikafka.coordinator.group.timers import Timers
from minikafka.storage.clock import SystemClock

from .fakes import FakeClock


def test_run_due_in_deadline_order_with_replace_and_cancel() -> None:
    clock = FakeClock(now=0)
    timers = Timers(clock)
    fired: list[str] = []
    timers.schedule("a", 30, lambda: fired.append("a"))
    timers.schedule("b", 10, lambda: fired.append("b"))
    timers.schedule("c", 20, lambda: fired.append("c"))
    timers.schedule("a", 5, lambda: fired.append("a2"))  # replaces a
    timers.cancel("c")
    assert timers.next_deadline() == 5
    assert timers.run_due(9) == 1 and fired == ["a2"]
    assert timers.run_due(100) == 1 and fired == ["a2", "b"]
    assert timers.next_deadline() is None


def test_callback_may_reschedule_itself() -> None:
    timers = Timers(FakeClock(now=0))
    count = []

    def tick() -> None:
        count.append(1)
        if len(count) < 3:
            timers.schedule("t", len(count) * 10, tick)

    timers.schedule("t", 0, tick)
    timers.run_due(100)
    assert len(count) == 3


async def test_runner_fires_and_wakes_for_earlier_deadlines() -> None:
    clock = SystemClock()
    timers = Timers(clock)
    timers.start()
    done = asyncio.Event()
    try:
        timers.schedule("late", clock.now_ms() + 60_000, lambda: None)
        await asyncio.sleep(0.01)  # the runner now sleeps until "late"
        timers.schedule("soon", clock.now_ms() + 20, done.set)
        await asyncio.wait_for(done.wait(), 2)
    finally:
        await timers.close()
