"""Deadline timers of the coordinators, driven by the injectable clock.

Each timer has a key (re-scheduling a key replaces its deadline) and a callback. One asyncio task
sleeps until the earliest deadline (`clock.now_ms()`-based) and runs what is due; tests may call
`run_due(now_ms)` directly after moving a fake clock instead of waiting.

Under a manual clock (storage/clock.py) time moves only by `advance`, so sleeping in real time for a
deadline would be meaningless: started timers register with the clock, which runs them as it passes
their deadlines, and the task only runs deadlines that are already due (a timer scheduled for now).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
from collections.abc import Callable, Hashable

from minikafka.storage.clock import Clock, is_manual

_log = logging.getLogger("minikafka.coordinator.timers")


class Timers:
    def __init__(self, clock: Clock, name: str = "coordinator-timers") -> None:
        self._clock = clock
        self._name = name
        self._entries: dict[Hashable, tuple[int, int, Callable[[], None]]] = {}
        self._heap: list[tuple[int, int, Hashable]] = []
        self._seq = itertools.count()
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    def schedule(self, key: Hashable, deadline_ms: int, callback: Callable[[], None]) -> None:
        seq = next(self._seq)
        self._entries[key] = (deadline_ms, seq, callback)
        heapq.heappush(self._heap, (deadline_ms, seq, key))
        if self._wake is not None and self._heap[0][1] == seq:
            self._wake.set()

    def cancel(self, key: Hashable) -> None:
        self._entries.pop(key, None)

    def clear(self) -> None:
        """Forget every timer (a broker reset); the task keeps running for the timers scheduled next."""
        self._entries.clear()
        self._heap.clear()

    def deadline(self, key: Hashable) -> int | None:
        entry = self._entries.get(key)
        return entry[0] if entry else None

    def next_deadline(self) -> int | None:
        while self._heap:
            deadline, seq, key = self._heap[0]
            entry = self._entries.get(key)
            if entry is not None and entry[1] == seq:
                return deadline
            heapq.heappop(self._heap)
        return None

    def run_due(self, now_ms: int) -> int:
        """Run every callback whose deadline is <= now_ms; returns how many ran."""
        ran = 0
        while True:
            deadline = self.next_deadline()
            if deadline is None or deadline > now_ms:
                return ran
            _deadline, _seq, key = heapq.heappop(self._heap)
            _d, _s, callback = self._entries.pop(key)
            ran += 1
            try:
                callback()
            except Exception:
                _log.exception("coordinator timer %r failed", key)

    def start(self) -> None:
        if self._task is None:
            self._wake = asyncio.Event()
            self._task = asyncio.create_task(self._run(), name=self._name)
            if is_manual(self._clock):
                self._clock.add_listener(self)

    def _real_wait_s(self, deadline: int | None) -> float | None:
        """How long to sleep in real time before `deadline` may be due; None: until woken."""
        if deadline is None:
            return None
        remaining_ms = deadline - self._clock.now_ms()
        if remaining_ms > 0 and is_manual(self._clock):
            return None  # only an advance of the clock (which runs it) or an earlier timer can make it due
        return max(0.0, remaining_ms / 1000)

    async def _run(self) -> None:
        assert self._wake is not None
        while True:
            timeout = self._real_wait_s(self.next_deadline())
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
            self.run_due(self._clock.now_ms())

    async def close(self) -> None:
        if is_manual(self._clock):
            self._clock.remove_listener(self)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
