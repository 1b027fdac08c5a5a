"""`wait_for_exit` returns a process's exit code as it exits and raises TimeoutExpired as Popen.wait does."""

from __future__ import annotations

import subprocess
import sys

import pytest
from minikafka.testing.broker import wait_for_exit


def test_returns_the_exit_code_of_a_process_that_exits() -> None:
    process = subprocess.Popen([sys.executable, "-c", "import sys, time; time.sleep(0.05); sys.exit(3)"])
    assert wait_for_exit(process, 20) == 3
    assert wait_for_exit(process, 0) == 3, "an exited process answers at once"


def test_raises_timeout_expired_for_a_process_still_running() -> None:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            wait_for_exit(process, 0.2)
        assert process.poll() is None
    finally:
        process.kill()
        assert wait_for_exit(process, 20) == -9
