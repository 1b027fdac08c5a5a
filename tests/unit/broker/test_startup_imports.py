"""What a broker imports before its first answer (issue 11's start-up time; bench/startup.py measures it).

Modules for features a broker may never use (the log cleaner until its first run, the admin listener
unless configured) are imported when first needed. Each case runs a fresh interpreter that starts a
broker, gets one ApiVersions answer over a real socket, and lists the minikafka modules it imported.
The entry point keeps the garbage collector off while the broker's code is imported; the last cases
check that it is back on (with the imported code frozen out of it) once the broker serves, and for
the admin commands.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

_PROBE = r"""
import asyncio, json, socket, struct, sys
from pathlib import Path

from minikafka.broker.config.config import build_config
from minikafka.broker.server import BrokerServer


def api_versions_v0(port: int) -> int:
    body = struct.pack(">hhih", 18, 0, 7, 5) + b"probe"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed before the whole answer")
            data += chunk
    return struct.unpack(">i", data[4:8])[0]


async def main() -> None:
    server = BrokerServer(build_config(overrides=sys.argv[2:], port=0, data_dir=Path(sys.argv[1])))
    await server.start()
    try:
        correlation_id = await asyncio.get_running_loop().run_in_executor(None, api_versions_v0, server.bound_port)
        assert correlation_id == 7, correlation_id
        print("MODULES", json.dumps(sorted(name for name in sys.modules if name.startswith("minikafka."))))
    finally:
        await server.shutdown()


asyncio.run(main())
"""

TIMEOUT_S = 60


def _modules_at_first_answer(data_dir: Path, *overrides: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", _PROBE, str(data_dir), *overrides], capture_output=True,
                          text=True, timeout=TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr
    # The broker's own log lines share standard output.
    listing = [line for line in done.stdout.splitlines() if line.startswith("MODULES ")]
    assert len(listing) == 1, done.stdout
    return set(json.loads(listing[0].removeprefix("MODULES ")))


def test_a_plain_broker_answers_without_the_cleaner_or_the_admin_listener_code(tmp_path: Path) -> None:
    modules = _modules_at_first_answer(tmp_path / "data")
    assert "minikafka.broker.server" in modules and "minikafka.storage.manager" in modules
    assert "minikafka.storage.cleaner" not in modules
    assert "minikafka.broker.control.admin_http" not in modules
    assert "minikafka.broker.control.inspector" not in modules


def test_the_admin_listener_code_is_imported_when_the_listener_is_configured(tmp_path: Path) -> None:
    modules = _modules_at_first_answer(tmp_path / "data", "admin.listener.port=0")
    assert "minikafka.broker.control.admin_http" in modules
    assert "minikafka.storage.cleaner" not in modules


_GC_PROBE = r"""
import asyncio, gc, os, signal, sys

from minikafka.broker import __main__ as entry
from minikafka.broker.server import BrokerServer

print("IMPORTING collector on:", gc.isenabled(), flush=True)
started = BrokerServer.start


async def start_then_stop(self: BrokerServer) -> None:
    await started(self)
    print("SERVING collector on:", gc.isenabled(), "frozen:", gc.get_freeze_count() > 0, flush=True)
    asyncio.get_running_loop().call_soon(os.kill, os.getpid(), signal.SIGTERM)


BrokerServer.start = start_then_stop
sys.exit(entry.main(["serve", "--port", "0", "--data-dir", sys.argv[1], "--log-format", "json"]))
"""


def test_the_entry_point_collects_garbage_again_once_the_broker_is_imported(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _GC_PROBE, str(tmp_path / "data")], capture_output=True,
                          text=True, timeout=TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "IMPORTING collector on: False" in done.stdout
    assert "SERVING collector on: True frozen: True" in done.stdout


def test_the_admin_commands_run_with_the_collector_on(tmp_path: Path) -> None:
    probe = ("import gc, sys\nfrom minikafka.broker import __main__ as entry\nassert not gc.isenabled()\n"
             "code = entry.main(['txn-log', '--data-dir', sys.argv[1]])\nprint('collector on:', gc.isenabled())\n")
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True,
                          timeout=TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr
    assert "collector on: True" in done.stdout
