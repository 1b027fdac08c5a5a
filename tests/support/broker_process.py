"""A broker subprocess with its own data dir; restartable, killable with -9, for the soak and fuzz harnesses.

Tests start their brokers with minikafka.testing.Broker (tests/support/brokers.py). The harnesses keep this
driver for what the kit does not do: kill a broker while it is still starting (soak), start it under an
address-space limit or from another source tree through PYTHONPATH (fuzz).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from minikafka.testing.broker import wait_for_exit

READY_DEADLINE_S = 20.0


class BrokerProcess:
    """A broker subprocess with its own data dir; restartable, killable with -9, for the soak and fuzz harnesses.

Tests start their brokers with minikafka.testing.Broker (tests/support/brokers.py). The harnesses keep this
driver for what the kit does not do: kill a broker while it is still starting (soak), start it under an
address-space limit or from another source tree through PYTHONPATH (fuzz).
"""

    ready_deadline_s = READY_DEADLINE_S
    extra_args: tuple[str, ...] = ()  # more `serve` flags, e.g. ("--trace", path)

    def __init__(self, data_dir: Path, log_dir: Path, overrides: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.log_dir = log_dir
        self.overrides = dict(overrides or {})
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, **overrides: str) -> BrokerProcess:
        self.overrides.update(overrides)
        self.starts += 1
        self.log_path = log_path = self.log_dir / f"broker-{self.starts}.log"
        # Reuse the port across restarts so clients configured with the old address reconnect.
        args = [sys.executable, "-m", "minikafka.broker", "serve", "--host", "127.0.0.1",
                "--port", str(self.port), "--data-dir", str(self.data_dir), "--log-format", "json"]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        args += self.extra_args
        with open(log_path, "wb") as log_file:
            self.process = subprocess.Popen(args, stdout=log_file, stderr=subprocess.STDOUT, **self._popen_options())
        self.port = self._wait_ready(log_path)
        return self

    def _popen_options(self) -> dict[str, Any]:
        """Extra subprocess.Popen arguments (environment, limits) for subclasses."""
        return {}

    def _wait_ready(self, log_path: Path) -> int:
        deadline = time.monotonic() + self.ready_deadline_s
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"broker exited with {self.process.returncode}:\n{log_path.read_text()}")
            for line in log_path.read_text(errors="replace").splitlines():
                if '"broker ready"' in line:
                    return int(json.loads(line)["port"])
            time.sleep(0.02)
        raise TimeoutError(f"broker not ready after {self.ready_deadline_s}s:\n{log_path.read_text()}")

    def stop(self, timeout: float = 15.0) -> int:
        """Graceful stop with SIGTERM; returns the exit code."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGTERM)
        try:
            return wait_for_exit(self.process, timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
            raise

    def kill9(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            wait_for_exit(self.process, 10)

    def restart(self, *, hard: bool = False, **overrides: str) -> BrokerProcess:
        if hard:
            self.kill9()
        else:
            self.stop()
        return self.start(**overrides)

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.log_dir.glob("broker-*.log")))
