"""Fault injection for the exactly-once tests (option `test.failpoints`); inert unless that option is set.

Each failpoint fires at most once per flag file, created with O_EXCL, so the task or query Spark
retries afterwards runs normally; the flag's existence also proves to a test that the fault happened.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

from minikafka.pipeline.options import Failpoint

HANG_LIMIT_S = 600.0


class InjectedFailure(RuntimeError):
    """Raised by a failpoint with action "raise"."""


def maybe_fail(failpoints: Iterable[Failpoint], point: str, *, partition: int | None = None,
               batch: int | None = None) -> None:
    for failpoint in failpoints:
        if failpoint.point != point:
            continue
        if failpoint.partition is not None and failpoint.partition != partition:
            continue
        if failpoint.batch is not None and failpoint.batch != batch:
            continue
        try:
            os.close(os.open(failpoint.flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            continue  # already fired once
        if failpoint.action == "exit":
            # A crash: no finally blocks, no abort of the open transaction, no reply to Spark.
            os._exit(17)
        if failpoint.action == "hang":
            # Wait for the test to kill the whole process (the driver), then give up.
            deadline = time.monotonic() + HANG_LIMIT_S
            while time.monotonic() < deadline:
                time.sleep(0.5)
        raise InjectedFailure(f"injected failure at {point} (partition={partition}, batch={batch})")
