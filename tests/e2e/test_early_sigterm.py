"""A SIGTERM at any moment after start-up begins is a clean shutdown: the signal handlers are in place
before the port opens, so a harness that stops a broker the moment it answers still gets exit code 0,
the `broker stopped` line and the clean-shutdown marker."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

TRIES = 6


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_until_listening(port: int, process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert process.poll() is None, "the broker exited before listening"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listened on {port}"
            time.sleep(0.002)  # as tight as a harness that signals at once


@pytest.mark.parametrize("attempt", range(TRIES))
def test_sigterm_the_moment_the_port_opens_is_a_clean_shutdown(tmp_path: Path, attempt: int) -> None:
    port = _free_port()
    data_dir = tmp_path / "data"
    log_path = tmp_path / "broker.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "minikafka.broker", "serve", "--host", "127.0.0.1",
                                    "--port", str(port), "--data-dir", str(data_dir), "--log-format", "json"],
                                   stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            _wait_until_listening(port, process)
            os.kill(process.pid, signal.SIGTERM)
            code = process.wait(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    lines = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
    assert code == 0, lines[-5:]
    assert lines[-1]["event"] == "broker stopped", lines[-5:]
    assert (data_dir / ".kafka_cleanshutdown").exists()
