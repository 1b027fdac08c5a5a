"""The modules a plain start imports, kept in checked-in lists so an addition is deliberate.

A broker's start-up time is mostly imports: a subsystem that only some configurations use (KIP-848
groups, share groups, SASL, ACLs, the admin listener, the inspector, pcap, the flight recorder's file,
telemetry, quotas, the schema registry...) is imported where it is configured or first used, not at the
top of a module every start imports. Each case runs in a fresh interpreter, starts a broker with no
configuration, waits for its first ApiVersions answer and prints the minikafka modules then imported.

A module that appears or disappears fails the test with the difference: if the change is deliberate,
rewrite the lists with `MINIKAFKA_WRITE_START_MODULES=1 .venv/bin/pytest tests/testing/test_start_imports.py`
and commit them with the change.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

_LISTS = Path(__file__).parent / "start_modules"
_WRITE = os.environ.get("MINIKAFKA_WRITE_START_MODULES") == "1"

_ANSWERED = """
import socket, struct, sys, time
def answered(port):
    request = struct.pack(">hhih", 18, 0, 7, 5) + b"check"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(struct.pack(">i", len(request)) + request)
            return len(sock.recv(8)) >= 8
    except OSError:
        return False
def report():
    print(*sorted(name for name in sys.modules if name == "minikafka" or name.startswith("minikafka.")), sep="\\n")
    print("# hypothesis imported:", "hypothesis" in sys.modules and sys.modules["hypothesis"] is not None)
"""

_IN_PROCESS = _ANSWERED + """
from minikafka.testing import Broker
broker = Broker().start()
assert answered(broker.port)
report()
broker.close()
"""

_SERVE = _ANSWERED + """
import os, tempfile, threading
probe = socket.socket()
probe.bind(("127.0.0.1", 0))
port = probe.getsockname()[1]
probe.close()
def wait_then_report():
    deadline = time.monotonic() + 30
    while not answered(port) and time.monotonic() < deadline:
        time.sleep(0.01)
    report()
    sys.stdout.flush()
    os._exit(0)
threading.Thread(target=wait_then_report, daemon=True).start()
from minikafka.broker.__main__ import main
main(["serve", "--port", str(port), "--data-dir", tempfile.mkdtemp(), "--log-level", "warning"])
"""


@pytest.mark.parametrize(("case", "script"), [("inprocess", _IN_PROCESS), ("serve", _SERVE)])
def test_a_plain_start_imports_the_listed_modules_only(case: str, script: str) -> None:
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert "# hypothesis imported: False" in lines  # kio's strategies wait for Hypothesis (protocol/kio_import.py)
    imported = [line for line in lines if not line.startswith("#")]
    listed_file = _LISTS / f"{case}.txt"
    if _WRITE:
        listed_file.write_text("\n".join(imported) + "\n")
    listed = listed_file.read_text().split()
    added = sorted(set(imported) - set(listed))
    gone = sorted(set(listed) - set(imported))
    assert not added and not gone, (f"a plain {case} start now imports {added} and no longer {gone}; if deliberate, "
                                    f"rewrite {listed_file.name} (see this module's docstring)")
