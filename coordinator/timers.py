"""Deadline timers of the coordinators, driven by the injectable clock.

Each timer has a key (re-scheduling a key replaces its deadline) and a callback. One asyncio task
sleeps until the earliest deadline (`clock.now_ms()`-based) and runs what is due; tests may call
`run_due(now_ms)` directly after moving a fake clock instead of waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
from collections.abc import Callable, Hashable
from typing import Any

_log = logging.getLogger("minikafka.coordinator.timers")


class Timers:
    def __init__(self, clock: Any) -> None:
        self._clock = clock
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
            self._task = asyncio.create_task(self._run(), name="coordinator-timers")

    async def _run(self) -> None:
        assert self._wake is not None
        while True:
            deadline = self.next_deadline()
            timeout = None if deadline is None else max(0.0, (deadline - self._clock.now_ms()) / 1000)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
            self.run_due(self._clock.now_ms())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
