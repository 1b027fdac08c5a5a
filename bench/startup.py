"""Start-up to the first ApiVersions answer, by mode, as issue 50 states its targets:

    .venv/bin/python bench/startup.py [--starts N] [--rows forked-later,serve,...]

- inprocess fresh: a fresh interpreter from `import minikafka.testing` to the first answer of its first
  `Broker()` (target 150 ms);
- inprocess fresh -rich: the same as where rich is not installed (structlog imports it when it is: 100 ms
  here; printed only where rich is installed);
- inprocess pytest -rich: the same, rich absent, after pytest's and pytest-asyncio's imports (untimed), as
  where a test suite starts its first broker (150 ms);
- inprocess later: `Broker()` in this process once the broker is imported and one start made (20 ms);
- process spawn: `Broker(mode="process", fork_server=False)`, a fresh `python -m minikafka.broker serve`;
- process first: a fresh interpreter's first `Broker(mode="process")`: it starts the fork server and, since
  that server is still importing, is spawned (a tree from before that change waited for the server);
- process forked later: later starts from the fork server, once it has compiled its codecs and found the
  pages a start writes, which each spare child copies ahead of its start (20 ms);
- serve: `python -m minikafka.broker serve --port P` spawned to its first answer (200 ms).
Each start uses a fresh temporary data directory. It also times the broker's imports in a fresh interpreter,
and the part of them spent creating dataclasses. Figures are printed, never asserted.

On a loaded machine wall time mostly measures the wait for a core, so the process rows also print the CPU
time the broker process had used when it answered and how long it had waited for a core (its main thread's
/proc/PID/schedstat), and for a forked broker that was the server's spare the part of that CPU it had used
before the start was asked (copying ahead the pages a start writes); the in-process fresh row prints that
interpreter's CPU time. Python compiles minikafka's modules on every start when it may not write bytecode
(PYTHONDONTWRITEBYTECODE, as in some CI shells); a wheel install carries its bytecode, so the note printed
says which case was run.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from minikafka.testing import Broker, Mode

if "fork_server" in inspect.signature(Broker).parameters:
    from minikafka.testing import forkserver
else:  # an A/B run against a tree from before the fork server
    forkserver = None  # type: ignore[assignment]

from bench import api_versions_answered, free_port  # bench/ is the script's folder, so it is on sys.path

_ANSWER_DEADLINE_S = 10.0
_SERVE_POLL_S = 0.0005




def _process_cpu_ms(pid: int) -> float:
    """CPU time a live process's main thread has run so far, in ms, from /proc/PID/schedstat (nanoseconds;
    /proc/PID/stat counts 10 ms ticks); NaN once it is gone. The broker's other threads (libuv's) do not
    run before its first answer."""
    try:
        return int(open(f"/proc/{pid}/schedstat").read().split()[0]) / 1e6
    except OSError:
        return float("nan")


def _process_queued_ms(pid: int) -> float:
    """How long the process's main thread has waited for a core so far, in ms (schedstat's second field):
    on a loaded machine most of a start's wall time."""
    try:
        return int(open(f"/proc/{pid}/schedstat").read().split()[1]) / 1e6
    except OSError:
        return float("nan")


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


def _children_cpu_ms(parent: int) -> dict[int, float]:
    """CPU ms each child of `parent` has used so far: the fork server's spare among them."""
    cpu = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) == parent:
                        cpu[int(entry)] = _process_cpu_ms(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return cpu


def _start_to_first_answer(mode: Mode, fork_server: bool | None = None) -> tuple[float, float]:
    """(wall ms from Broker.start() to the first ApiVersions answer, CPU ms the broker process had used by
    then, NaN in-process); the broker is closed afterwards. A forked broker's CPU before its request (the
    spare's copying ahead, see testing/cowpages.py) is noted apart, in `_before_request`."""
    broker = Broker(mode=mode) if fork_server is None else Broker(mode=mode, fork_server=fork_server)
    server_pid = forkserver.shared_server().pid if fork_server and hasattr(forkserver.ForkServer, "pid") else None
    spent_before = _children_cpu_ms(server_pid) if server_pid is not None else {}
    try:
        started = time.perf_counter()
        broker.start()
        deadline = time.monotonic() + _ANSWER_DEADLINE_S
        while not api_versions_answered(broker.port):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no ApiVersions answer within {_ANSWER_DEADLINE_S} s")
        wall_ms = (time.perf_counter() - started) * 1000
        if mode == "process":
            _queued.append(_process_queued_ms(broker.pid))
            if broker.pid in spent_before:  # a spare, forked before this start
                _before_request.append(spent_before[broker.pid])
        return wall_ms, _process_cpu_ms(broker.pid) if mode == "process" else float("nan")
    finally:
        broker.close()


# Run in a fresh interpreter: from `import minikafka.testing` to the first answer of its first broker, with
# the ApiVersions request written by hand (the bench's helpers would import more than a user's test does).
FRESH_START = """
import time
started = time.perf_counter()
cpu_started = time.process_time()
from minikafka.testing import Broker
broker = Broker(mode=MODE).start()
import socket, struct
request = struct.pack(">hhih", 18, 0, 7, 5) + b"bench"
with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
    sock.sendall(struct.pack(">i", len(request)) + request)
    assert len(sock.recv(8)) >= 8
print((time.perf_counter() - started) * 1000, (time.process_time() - cpu_started) * 1000)
broker.close()
"""


# What a pytest session has imported before its first test starts a broker: pytest and pytest-asyncio (the
# asyncio plugin users of an asyncio client have; it imports asyncio), before `import minikafka.testing`.
_PYTEST_IMPORTS = "import pytest, pytest_asyncio, _pytest.python\n"


def _fresh_interpreter_start(mode: Mode, *, without_rich: bool = False, under_pytest: bool = False
                             ) -> tuple[float, float]:
    """(wall ms, CPU ms of that interpreter, its broker thread included; NaN in process mode, where the
    broker's CPU is another process's). `without_rich`: as in an environment without rich installed
    (structlog imports it at its own import when it is; the import fails as when it is absent).
    `under_pytest`: pytest's own imports made first, outside the timing."""
    code = FRESH_START.replace("MODE", repr(mode))
    if under_pytest:
        code = _PYTEST_IMPORTS + code
    if without_rich:
        code = "import sys; sys.modules['rich'] = None\n" + code
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    wall_ms, cpu_ms = out.stdout.split()[-2:]
    return float(wall_ms), float(cpu_ms) if mode == "inprocess" else float("nan")


def _serve_to_first_answer() -> tuple[float, float]:
    """(wall ms from spawning `python -m minikafka.broker serve` to its first answer, its CPU ms by then)."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="minikafka-startup-") as data_dir:
        started = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-m", "minikafka.broker", "serve", "--port", str(port),
                                    "--data-dir", data_dir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + _ANSWER_DEADLINE_S
            while not api_versions_answered(port):
                if time.monotonic() > deadline or process.poll() is not None:
                    raise TimeoutError(f"no ApiVersions answer within {_ANSWER_DEADLINE_S} s")
                time.sleep(_SERVE_POLL_S)
            wall_ms = (time.perf_counter() - started) * 1000
            _queued.append(_process_queued_ms(process.pid))
            return wall_ms, _process_cpu_ms(process.pid)
        finally:
            process.terminate()
            process.wait(_ANSWER_DEADLINE_S)


# Wait-for-a-core figures of the process rows' starts, and the CPU forked brokers had used before their
# request, reported and cleared by _report.
_queued: list[float] = []
_before_request: list[float] = []


def _report(name: str, what: str, runs: list[tuple[float, float]], target_ms: float | None) -> None:
    walls = [wall for wall, _cpu in runs]
    cpus = [cpu for _wall, cpu in runs if cpu == cpu]  # NaN in-process
    line = (f"{name:22} {what}, {len(runs)} starts: median {statistics.median(walls):.1f} ms wall (min "
            f"{min(walls):.1f}, max {max(walls):.1f})")
    if cpus:
        line += f", CPU {statistics.median(cpus):.1f} ms"
    if _before_request:
        line += (f" (of which {statistics.median(_before_request):.1f} ms before the start was asked, in the "
                 f"{len(_before_request)} starts that took a spare)")
        _before_request.clear()
    if _queued:
        line += f", waiting for a core {statistics.median(_queued):.1f} ms"
        _queued.clear()
    if target_ms is not None:
        line += f"; target {target_ms:.0f} ms: {'met' if statistics.median(walls) <= target_ms else 'NOT met'}"
    print(line)


ROWS = ("floor", "imports", "inprocess-fresh", "inprocess-fresh-no-rich", "inprocess-pytest", "inprocess-later",
        "spawn", "forked-first", "forked-later", "serve")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=10, help="starts measured per mode (default 10)")
    parser.add_argument("--rows", default=",".join(ROWS),
                        help=f"the rows to measure, of {','.join(ROWS)} (default all)")
    args = parser.parse_args()
    rows = {row.strip() for row in args.rows.split(",") if row.strip()}
    if unknown := rows - set(ROWS):
        parser.error(f"unknown rows: {', '.join(sorted(unknown))}")
    starts = args.starts
    print(f"bytecode of minikafka's modules: {_bytecode_state()}; load average {os.getloadavg()[0]:.2f} on "
          f"{os.cpu_count()} cores")
    if "floor" in rows:
        floor = [_interpreter_floor() for _ in range(starts)]
        print(f"{'floor':22} python importing asyncio, uvloop and structlog, over {starts} runs: median "
              f"{statistics.median([wall for wall, _cpu in floor]):.1f} ms wall, "
              f"{statistics.median([cpu for _wall, cpu in floor]):.0f} ms CPU")
    if "imports" in rows:
        imports = [_import_profile() for _ in range(starts)]
        print(f"{'imports':22} the broker's modules in a fresh interpreter, over {starts} runs: median "
              f"{statistics.median([total for total, _dc, _n in imports]):.1f} ms, of which creating its "
              f"{imports[0][2]} dataclasses {statistics.median([dc for _t, dc, _n in imports]):.1f} ms")
    if "inprocess-fresh" in rows:
        fresh = [_fresh_interpreter_start("inprocess") for _ in range(starts)]
        _report("inprocess fresh", "import minikafka.testing to the first answer", fresh, 150)
    if "inprocess-fresh-no-rich" in rows and importlib.util.find_spec("rich") is not None:
        # rich is not the broker's: here it comes with a development tool (import-linter), in a user's test
        # process with whatever brought it; structlog imports it either way.
        bare = [_fresh_interpreter_start("inprocess", without_rich=True) for _ in range(starts)]
        _report("inprocess fresh -rich", "the same where rich is not installed", bare, 150)
    if "inprocess-pytest" in rows:
        # Where a test suite starts its first broker: pytest and its asyncio plugin imported (asyncio among
        # them), rich absent as in the row above.
        in_session = [_fresh_interpreter_start("inprocess", without_rich=True, under_pytest=True)
                      for _ in range(starts)]
        _report("inprocess pytest -rich", "the same after pytest's own imports", in_session, 150)
    if "inprocess-later" in rows:
        _start_to_first_answer("inprocess")  # the warm-up start: later starts are measured after it
        later = [_start_to_first_answer("inprocess") for _ in range(starts)]
        _report("inprocess later", "Broker().start() to the first answer", later, 20)
    if "spawn" in rows:
        spawned = [_start_to_first_answer("process", fork_server=False if forkserver else None)
                   for _ in range(starts)]
        _report("process spawn", "fork_server=False", spawned, None)
    if forkserver is not None and forkserver.supported():
        if "forked-first" in rows:
            first = [_fresh_interpreter_start("process") for _ in range(starts)]
            _report("process first", "a fresh interpreter's first, starting the fork server meanwhile",
                    first, None)
        if "forked-later" in rows:
            _start_to_first_answer("process", fork_server=True)
            copied_ahead = forkserver.shared_server().prepare()  # None from a tree before the copying ahead
            _queued.clear()  # the warm-up start's
            _before_request.clear()
            forked = [_start_to_first_answer("process", fork_server=True) for _ in range(starts)]
            _report("process forked later", "from the fork server", forked, 20)
            if copied_ahead is not None:
                print(f"{'':22} each spare child copied {copied_ahead} pages ahead of its start "
                      f"({copied_ahead * os.sysconf('SC_PAGE_SIZE') / 2**20:.1f} MiB)")
    if "serve" in rows:
        served = [_serve_to_first_answer() for _ in range(starts)]
        _report("serve", "python -m minikafka.broker serve to the first answer", served, 200)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
