"""Start-up of the working tree against a commit, the two started in turn so a slow spell of the shared
machine falls on both:

    .venv/bin/python bench/ab_startup.py [--base REV] [--rounds 10]

Each round starts, for each tree, a fresh interpreter that imports `minikafka.testing` and starts an
in-process `Broker()` to its first ApiVersions answer (issue 50's 150 ms target), and a spawned
`python -m minikafka.broker serve` to its first answer (its 200 ms target). The base code is unpacked into a
temporary folder (the soak harness's unpack_code) and put first on PYTHONPATH; both run under this
interpreter, with their bytecode written first (one unmeasured start each). Printed: the medians of wall
time and of the CPU the measured process used (figures only, nothing asserted).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for the soak harness's unpack_code
from startup import FRESH_START  # noqa: E402

from bench import api_versions_answered, free_port  # noqa: E402 - bench/ is the script's folder, on sys.path
from tests.soak.harness import unpack_code  # noqa: E402

_DEADLINE_S = 10.0


def _environment(python_path: Path | None) -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    if python_path is not None:
        environment["PYTHONPATH"] = str(python_path)
    return environment


def fresh_in_process(python_path: Path | None) -> tuple[float, float]:
    """(wall ms, CPU ms) from `import minikafka.testing` to the first answer, in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-c", FRESH_START.replace("MODE", repr("inprocess"))],
                         env=_environment(python_path), cwd=tempfile.gettempdir(), capture_output=True, text=True,
                         check=True)
    wall, cpu = out.stdout.split()[-2:]
    return float(wall), float(cpu)


def serve(python_path: Path | None) -> tuple[float, float]:
    """(wall ms, CPU ms of its main thread) from spawning `minikafka serve` to its first answer."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="minikafka-ab-startup-") as data_dir:
        started = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-m", "minikafka.broker", "serve", "--port", str(port),
                                    "--data-dir", data_dir], env=_environment(python_path),
                                   cwd=tempfile.gettempdir(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + _DEADLINE_S
            while not api_versions_answered(port):
                if time.monotonic() > deadline or process.poll() is not None:
                    raise TimeoutError(f"no ApiVersions answer within {_DEADLINE_S} s")
                time.sleep(0.0005)
            wall = (time.perf_counter() - started) * 1000
            cpu = int(Path(f"/proc/{process.pid}/schedstat").read_text().split()[0]) / 1e6
            return wall, cpu
        finally:
            process.terminate()
            process.wait(_DEADLINE_S)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="HEAD", help="the commit to compare with (default HEAD)")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="minikafka-ab-startup-code-") as code_dir:
        unpacked, base_path = unpack_code(args.base, Path(code_dir))
        trees: dict[str, Path | None] = {f"base ({args.base})": base_path, "working tree": None}
        print(f"base: {unpacked}; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
        runs: dict[tuple[str, str], list[tuple[float, float]]] = {
            (name, what): [] for name in trees for what in ("in-process", "serve")}
        for python_path in trees.values():  # writes each tree's bytecode; not measured
            fresh_in_process(python_path)
            serve(python_path)
        for _ in range(args.rounds):
            for name, python_path in trees.items():
                runs[(name, "in-process")].append(fresh_in_process(python_path))
                runs[(name, "serve")].append(serve(python_path))
    for (name, what), measured in runs.items():
        print(f"{what:10} {name:24} median {statistics.median(w for w, _ in measured):7.1f} ms wall, "
              f"{statistics.median(c for _, c in measured):7.1f} ms CPU ({args.rounds} rounds)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
