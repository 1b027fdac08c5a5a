"""Crash points: make the broker process die as `kill -9` would at a chosen step of ending a transaction.

The transaction coordinator names the steps (coordinator/transaction/crash_points.py) and
calls its hook as it passes them; an armed point sends SIGKILL to the broker's own process, so nothing
unwritten is flushed (no checkpoints, producer snapshots or clean-shutdown marker) and what was already
written stays, as with a real crash. A point fires once and is then disarmed; points live in the running
broker only. Only a broker that owns its process (`minikafka serve`) may be armed: an in-process broker
would take the test process down with it.
"""

from __future__ import annotations

import os
import signal
import sys

import structlog
from minikafka.broker.wire.services import BrokerServices
from minikafka.coordinator.transaction.crash_points import CRASH_POINTS

_log = structlog.get_logger("minikafka.crash_points")


class CrashPointError(ValueError):
    """An unknown crash point, or crash points asked of a broker that does not own its process."""


class CrashPoints:
    def __init__(self, kills_process: bool = False) -> None:
        self.kills_process = kills_process
        self.armed: set[str] = set()

    def arm(self, point: object) -> str:
        if not isinstance(point, str) or point not in CRASH_POINTS:
            raise CrashPointError(f"unknown crash point {point!r}; one of {', '.join(CRASH_POINTS)}")
        if not self.kills_process:
            raise CrashPointError("crash points end the broker's process: run the broker as a subprocess "
                                  "(minikafka serve, Broker(mode='process'))")
        self.armed.add(point)
        _log.info("crash point armed", point=point)
        return point

    def disarm(self, point: str) -> bool:
        if point in self.armed:
            self.armed.discard(point)
            return True
        return False

    def clear(self) -> int:
        count = len(self.armed)
        self.armed.clear()
        return count

    def list(self) -> list[str]:
        return sorted(self.armed)

    def reach(self, point: str) -> None:
        """The coordinator's hook: die here if `point` is armed."""
        if point not in self.armed:
            return
        self.armed.discard(point)
        _log.warning("crash point reached: killing the broker process", point=point)
        # Only the log line is flushed, so a test can tell this exit from an unexpected one.
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def crash_points_of(services: BrokerServices) -> CrashPoints:
    """The node's crash points, for the control plane that arms them (coordinators see only `reach`)."""
    points = services.crash_points
    assert isinstance(points, CrashPoints), f"crash point hook is a {type(points).__name__}"
    return points
