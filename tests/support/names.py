"""Names no other test (or xdist worker) uses."""

from __future__ import annotations

import os
import time


def unique_topic(prefix: str = "t") -> str:
    return f"{prefix}-{os.getpid()}-{time.monotonic_ns()}"
