"""A broker subprocess for the fuzzer and the recorder: started, watched (exit code, RSS), killed."""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

# Restarts recover every partition a run created: tens of thousands of them take minutes.
READY_DEADLINE_S = 180.0
_CRASH_LINE = re.compile(r"memory allocation of \d+ bytes failed|panicked at|Fatal Python error|Segmentation fault")


class FuzzBroker:
    """`python -m minikafka.broker serve` on a free port, json logs to a file, restartable on the same data."""

    def __init__(self, data_dir: Path, log_dir: Path, *, overrides: dict[str, str] | None = None,
                 pythonpath: str | None = None, address_space_limit_mb: int = 0) -> None:
        self.data_dir = data_dir
        self.log_dir = log_dir
        self.overrides = dict(overrides or {})
        # Lets a run target another tree (an older commit unpacked elsewhere) than the installed one.
        self.pythonpath = pythonpath
        self.address_space_limit_mb = address_space_limit_mb
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.log_path = log_dir / "broker-0.log"

    def _limit_address_space(self) -> None:
        # A single frame once made the broker resident at 24 GB: cap it so a run cannot take the machine.
        limit = self.address_space_limit_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    def start(self) -> FuzzBroker:
        self.starts += 1
        self.log_path = self.log_dir / f"broker-{self.starts}.log"
        args = [sys.executable, "-m", "minikafka.broker", "serve", "--host", "127.0.0.1", "--port", str(self.port),
                "--data-dir", str(self.data_dir), "--log-format", "json"]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        env = dict(os.environ)
        if self.pythonpath:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [self.pythonpath, env.get("PYTHONPATH")]))
        preexec = self._limit_address_space if self.address_space_limit_mb else None
        with open(self.log_path, "wb") as log_file:
            self.process = subprocess.Popen(args, stdout=log_file, stderr=subprocess.STDOUT, env=env,
                                            preexec_fn=preexec)
        self.port = self._wait_ready()
        return self

    def _wait_ready(self) -> int:
        deadline = time.monotonic() + READY_DEADLINE_S
        assert self.process is not None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"broker exited with {self.process.returncode}:\n{self.log_tail()}")
            for line in self.log_path.read_text(errors="replace").splitlines():
                if '"broker ready"' in line:
                    return int(json.loads(line)["port"])
            time.sleep(0.05)
        raise TimeoutError(f"broker not ready after {READY_DEADLINE_S}s:\n{self.log_tail()}")

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def exit_code(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def rss_bytes(self) -> int:
        try:
            return int(psutil.Process(self.pid).memory_info().rss)
        except psutil.Error:
            return 0

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self, timeout: float = 15.0) -> int:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def crash_reason(self) -> str:
        """The native runtime's last words (Rust's allocation failure or panic, a fatal Python error), if any."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        found = [line.strip() for line in text.splitlines() if _CRASH_LINE.search(line)]
        return found[-1][:300] if found else ""

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""
