"""The one clock every layer reads time from, so tests can drive timeouts without sleeping.

`SystemClock` is the wall clock. `ManualClock` (`minikafka.clock=manual`, `--clock manual`) moves only
when `advance(ms)` is called, and that call also runs what became due: every deadline runner that
reads the clock (the coordinators' timers, the broker's periodic jobs) registers as a listener, and
`advance` steps the time to each due deadline in order, so a callback sees the time it was due at and
a deadline it schedules inside the advanced span fires in the same call (as Kafka's MockTime with
MockScheduler, except that periodic checks are coalesced: `next_periodic_run`). Listeners run on the
caller's thread: the broker's event loop thread.
"""

from __future__ import annotations

import time
from typing import Protocol, TypeGuard

# A deadline runner that keeps scheduling at or before the time it is run at would never let an
# advance finish; past this many steps the clock jumps to the target and runs what is due once more.
MAX_ADVANCE_STEPS = 100_000


class Clock(Protocol):
    def now_ms(self) -> int: ...

    def monotonic(self) -> float: ...

    def real_monotonic(self) -> float:
        """Seconds on the host's monotonic clock, even under a manual clock: for waits a client times in
        real time (a fetch long-poll's max_wait ends before the client's request.timeout.ms does), which
        a manual clock standing still must not stretch."""


class ClockListener(Protocol):
    """A deadline runner driven by a manual clock's `advance`."""

    def next_deadline(self) -> int | None: ...

    def run_due(self, now_ms: int) -> int: ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    def real_monotonic(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock that moves only when told to; `advance` runs the listeners' deadlines it passes."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self._start_ms = now_ms
        self._now_ms = now_ms
        self._listeners: list[ClockListener] = []
        self.advancing_to: int | None = None  # the target of the advance in progress

    def now_ms(self) -> int:
        return self._now_ms

    def monotonic(self) -> float:
        return (self._now_ms - self._start_ms) / 1000

    def real_monotonic(self) -> float:
        return time.monotonic()

    @property
    def advanced_ms(self) -> int:
        """How far the clock has been moved since it was made."""
        return self._now_ms - self._start_ms

    def add_listener(self, listener: ClockListener) -> None:
        if listener not in self._listeners:
            self._listeners.append(listener)

    def remove_listener(self, listener: ClockListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def advance(self, ms: int) -> int:
        """Move the clock `ms` forward, running every listener deadline up to the new time in deadline
        order; returns the new time."""
        if ms < 0:
            raise ValueError(f"a clock only moves forward; cannot advance by {ms} ms")
        target = self._now_ms + ms
        self.advancing_to = target
        try:
            for _step in range(MAX_ADVANCE_STEPS):
                due = self._earliest_deadline_up_to(target)
                if due is None:
                    break
                self._now_ms = max(self._now_ms, due)
                self._run_listeners()
            self._now_ms = target
            self._run_listeners()
        finally:
            self.advancing_to = None
        return target

    def _earliest_deadline_up_to(self, target: int) -> int | None:
        deadlines = [deadline for listener in self._listeners
                     if (deadline := listener.next_deadline()) is not None and deadline <= target]
        return min(deadlines, default=None)

    def _run_listeners(self) -> None:
        for listener in list(self._listeners):
            listener.run_due(self._now_ms)


def is_manual(clock: object) -> TypeGuard[ManualClock]:
    return isinstance(clock, ManualClock)


def next_periodic_run(clock: Clock, interval_ms: int) -> int:
    """When a periodic check that just ran runs next: `interval_ms` from now, except that in the middle of
    a manual clock's advance that passes that time, at the advance's end. A check of the state as of a
    time (retention, expiry, timeouts, checkpoints) run at the end finds everything the runs in between
    would have, and a day's advance does not run an every-10-s check 8640 times."""
    next_ms = clock.now_ms() + interval_ms
    if isinstance(clock, ManualClock) and clock.advancing_to is not None and next_ms < clock.advancing_to:
        return clock.advancing_to
    return next_ms
