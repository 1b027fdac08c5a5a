"""Start-up of minikafka.testing.Broker: from start() to the first ApiVersions answer, in both modes.

    .venv/bin/python bench/startup.py [--starts N]

In-process is measured after import (the broker modules are imported, and one warm-up start made, before
the clock runs), as issue 11 states its target (20 ms); process mode from spawning
`python -m minikafka.broker serve` (100 ms target). Each start uses a fresh temporary data directory.
Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import time

from minikafka.testing import Broker, Mode

from bench import api_versions_answered  # bench/ is the script's folder, so it is on sys.path

_ANSWER_DEADLINE_S = 10.0


def _start_to_first_answer(mode: Mode) -> float:
    """Milliseconds from Broker.start() to the first ApiVersions answer; the broker is closed afterwards."""
    broker = Broker(mode=mode)
    try:
        started = time.perf_counter()
        broker.start()
        deadline = time.monotonic() + _ANSWER_DEADLINE_S
        while not api_versions_answered(broker.port):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no ApiVersions answer within {_ANSWER_DEADLINE_S} s")
        return (time.perf_counter() - started) * 1000
    finally:
        broker.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=10, help="starts measured per mode (default 10)")
    args = parser.parse_args()
    import minikafka.broker.server  # noqa: F401 - in-process start-up is measured after import

    first = _start_to_first_answer("inprocess")
    print(f"inprocess first start in this process (not counted below): {first:.1f} ms")
    for mode in ("inprocess", "process"):
        times = [_start_to_first_answer(mode) for _ in range(args.starts)]
        print(f"{mode:9} start to first ApiVersions answer over {args.starts} starts: median "
              f"{statistics.median(times):.1f} ms, min {min(times):.1f} ms, max {max(times):.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
