"""Start-up of minikafka.testing.Broker: from start() to the first ApiVersions answer, in both modes.

    .venv/bin/python bench/startup.py [--starts N]

In-process is measured after import (the broker modules are imported, and one warm-up start made, before
the clock runs), as issue 11 states its target (20 ms); process mode from spawning
`python -m minikafka.broker serve` (100 ms target). Each start uses a fresh temporary data directory.
It also times the broker's imports in a fresh interpreter, and the part of them spent creating dataclasses.
Figures are printed, never asserted.

On a loaded machine wall time mostly measures the wait for a core, so process mode also prints the CPU
time the broker process had used when it answered (utime + stime from /proc, 10 ms ticks). Python
compiles minikafka's modules on every start when it may not write bytecode (PYTHONDONTWRITEBYTECODE, as
in some CI shells); a wheel install carries its bytecode, so the note printed says which case was run.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

from minikafka.testing import Broker, Mode

from bench import api_versions_answered  # bench/ is the script's folder, so it is on sys.path

_ANSWER_DEADLINE_S = 10.0


_CLOCK_TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def _children_cpu_ms() -> float:
    """CPU time (user + system) of this process's live children, in ms: the broker subprocess."""
    pid = os.getpid()
    try:
        children = open(f"/proc/{pid}/task/{pid}/children").read().split()  # noqa: SIM115 - read at once
    except OSError:
        return float("nan")
    total = 0
    for child in children:
        try:
            fields = open(f"/proc/{child}/stat").read().rsplit(")", 1)[1].split()  # noqa: SIM115
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of stat(5)
    return total * _CLOCK_TICK_MS


def _bytecode_state() -> str:
    import importlib.util

    import minikafka.broker.server as server

    if os.path.exists(importlib.util.cache_from_source(server.__file__)):
        return "cached"
    if sys.flags.dont_write_bytecode:
        return "absent and not written (PYTHONDONTWRITEBYTECODE): every start compiles them"
    return "absent (the first start writes it)"


def _interpreter_floor() -> tuple[float, float]:
    """(wall ms, CPU ms) of a bare interpreter importing what the broker cannot start without; rich and
    hypothesis are kept out as the broker's entry point does."""
    code = "import sys; sys.modules['rich'] = sys.modules['hypothesis'] = None; import asyncio, uvloop, structlog"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    wall_ms = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall_ms, (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000


# Run in a fresh interpreter: the broker's imports as `python -m minikafka.broker serve` makes them before
# it binds, timed, with the time spent creating dataclasses (Python 3.11 compiles each generated method with
# exec) summed by a wrapper around dataclasses' class processor, in that subprocess only.
_IMPORT_PROFILE = """
import dataclasses, time
spent = [0.0, 0]
process_class = dataclasses._process_class
def timed(*args, **kwargs):
    started = time.perf_counter()
    try:
        return process_class(*args, **kwargs)
    finally:
        spent[0] += time.perf_counter() - started
        spent[1] += 1
dataclasses._process_class = timed
started = time.perf_counter()
import minikafka.broker.__main__, minikafka.broker.server
from minikafka.broker.handlers import all_handler_modules
all_handler_modules()
print((time.perf_counter() - started) * 1000, spent[0] * 1000, spent[1])
"""


def _import_profile() -> tuple[float, float, int]:
    """(ms importing the broker's modules in a fresh interpreter, ms of it creating dataclasses, how many)."""
    out = subprocess.run([sys.executable, "-c", _IMPORT_PROFILE], check=True, capture_output=True, text=True)
    imports_ms, dataclasses_ms, count = out.stdout.split()
    return float(imports_ms), float(dataclasses_ms), int(count)


def _start_to_first_answer(mode: Mode) -> tuple[float, float]:
    """(wall ms from Broker.start() to the first ApiVersions answer, CPU ms the broker subprocess had used by
    then, NaN in-process); the broker is closed afterwards."""
    broker = Broker(mode=mode)
    try:
        started = time.perf_counter()
        broker.start()
        deadline = time.monotonic() + _ANSWER_DEADLINE_S
        while not api_versions_answered(broker.port):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no ApiVersions answer within {_ANSWER_DEADLINE_S} s")
        wall_ms = (time.perf_counter() - started) * 1000
        return wall_ms, _children_cpu_ms() if mode == "process" else float("nan")
    finally:
        broker.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=10, help="starts measured per mode (default 10)")
    args = parser.parse_args()
    import minikafka.broker.server  # noqa: F401 - in-process start-up is measured after import

    first, _cpu = _start_to_first_answer("inprocess")
    print(f"inprocess first start in this process (not counted below): {first:.1f} ms")
    print(f"bytecode of minikafka's modules: {_bytecode_state()}; load average {os.getloadavg()[0]:.2f} on "
          f"{os.cpu_count()} cores")
    floor = [_interpreter_floor() for _ in range(args.starts)]
    print(f"{'floor':9} python importing asyncio, uvloop and structlog, over {args.starts} runs: median "
          f"{statistics.median([wall for wall, _cpu in floor]):.1f} ms wall, "
          f"{statistics.median([cpu for _wall, cpu in floor]):.0f} ms CPU")
    imports = [_import_profile() for _ in range(args.starts)]
    print(f"{'imports':9} the broker's modules in a fresh interpreter, over {args.starts} runs: median "
          f"{statistics.median([total for total, _dc, _n in imports]):.1f} ms, of which creating its "
          f"{imports[0][2]} dataclasses {statistics.median([dc for _t, dc, _n in imports]):.1f} ms")
    for mode in ("inprocess", "process"):
        runs = [_start_to_first_answer(mode) for _ in range(args.starts)]
        times = [wall for wall, _cpu in runs]
        print(f"{mode:9} start to first ApiVersions answer over {args.starts} starts: median "
              f"{statistics.median(times):.1f} ms, min {min(times):.1f} ms, max {max(times):.1f} ms")
        if mode == "process":
            cpu = [cpu for _wall, cpu in runs]
            print(f"{'':9} CPU time of the broker process by its first answer: median "
                  f"{statistics.median(cpu):.0f} ms, min {min(cpu):.0f} ms, max {max(cpu):.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
