"""A broker subprocess for the fuzzer and the recorder: started, watched (exit code, RSS), killed."""

from __future__ import annotations

import os
import re
import resource
from pathlib import Path
from typing import Any

import psutil

from tests.support.broker_process import BrokerProcess

READY_DEADLINE_S = 180.0
_CRASH_LINE = re.compile(r"memory allocation of \d+ bytes failed|panicked at|Fatal Python error|Segmentation fault")


class FuzzBroker(BrokerProcess):
    """The tests' broker subprocess, watched for the fuzzer: exit code, RSS, the runtime's last words; optionally
    run from another tree and under an address-space limit."""

    # Restarts recover every partition a run created: tens of thousands of them take minutes.
    ready_deadline_s = READY_DEADLINE_S

    def __init__(self, data_dir: Path, log_dir: Path, *, overrides: dict[str, str] | None = None,
                 pythonpath: str | None = None, address_space_limit_mb: int = 0) -> None:
        super().__init__(data_dir, log_dir, overrides)
        # Lets a run target another tree (an older commit unpacked elsewhere) than the installed one.
        self.pythonpath = pythonpath
        self.address_space_limit_mb = address_space_limit_mb
        self.log_path = log_dir / "broker-0.log"

    def _limit_address_space(self) -> None:
        # A single frame once made the broker resident at 24 GB: cap it so a run cannot take the machine.
        limit = self.address_space_limit_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    def _popen_options(self) -> dict[str, Any]:
        env = dict(os.environ)
        if self.pythonpath:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [self.pythonpath, env.get("PYTHONPATH")]))
        return {"env": env, "preexec_fn": self._limit_address_space if self.address_space_limit_mb else None}

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
        self.kill9()

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
