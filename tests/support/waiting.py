"""Waiting for a condition with a deadline, never a fixed sleep."""

from __future__ import annotations

import time


def poll_until(predicate, timeout: float = 15.0, interval: float = 0.05, message: str = "condition"):
    """Call `predicate` until it returns a truthy value or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)
