"""`minikafka probe` (the containers' health check) as a command: its exit code and its one line."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from minikafka.testing import Broker

pytestmark = pytest.mark.e2e

RUN_TIMEOUT_S = 60


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return (self.out + self.err).splitlines()


def probe(*args: str) -> Run:
    done = subprocess.run([sys.executable, "-m", "minikafka.broker", "probe", *args], capture_output=True,
                          text=True, timeout=RUN_TIMEOUT_S)
    return Run(done.returncode, done.stdout, done.stderr)


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker() as running:
        yield running


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port bound but never listened on: connections to it are refused, and no one else can take it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def test_a_serving_broker_exits_0_with_one_line(broker: Broker) -> None:
    run = probe("--bootstrap-server", broker.bootstrap_servers, "--timeout", "30")
    assert run.code == 0, run
    assert run.err == ""
    assert len(run.lines) == 1 and run.out.startswith(f"{broker.bootstrap_servers} is serving: "), run


def test_a_closed_port_exits_1_with_one_line(closed_port: int) -> None:
    run = probe("--bootstrap-server", f"127.0.0.1:{closed_port}")
    assert run.code == 1, run
    assert run.out == ""
    assert run.lines == [f"minikafka probe: cannot connect to 127.0.0.1:{closed_port}: Connection refused"], run


def _serve_one(listener: socket.socket, answer: bytes) -> None:
    connection, _address = listener.accept()
    with connection:
        connection.recv(4096)
        connection.sendall(answer)


@pytest.mark.parametrize("answer", [
    pytest.param(b"", id="closes-without-answering"),
    pytest.param(b"\x00\x00\x00\x06\x00\x00\x00\x01\xff\xff", id="frame-that-does-not-decode"),
    pytest.param(b"HTTP/1.1 400 Bad Request\r\n\r\n", id="not-kafka"),
])
def test_a_peer_that_does_not_answer_apiversions_exits_1_with_one_line(answer: bytes) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        server = threading.Thread(target=_serve_one, args=(listener, answer), daemon=True)
        server.start()
        run = probe("--bootstrap-server", f"127.0.0.1:{listener.getsockname()[1]}")
        server.join(RUN_TIMEOUT_S)
    assert run.code == 1, run
    assert run.out == "" and len(run.lines) == 1 and run.err.startswith("minikafka probe: "), run
    assert "Traceback" not in run.err


def test_a_peer_that_never_answers_exits_1_after_the_timeout() -> None:
    # The kernel completes the connection from the listen backlog; nothing ever reads or answers.
    with socket.create_server(("127.0.0.1", 0)) as listener:
        run = probe("--bootstrap-server", f"127.0.0.1:{listener.getsockname()[1]}", "--timeout", "0.5")
    assert run.code == 1, run
    assert run.out == "" and len(run.lines) == 1 and "timed out" in run.err, run


@pytest.mark.parametrize("args", [
    pytest.param(("--bootstrap-server", "nohost"), id="no-port"),
    pytest.param(("--bootstrap-server", "nohost:"), id="empty-port"),
    pytest.param(("--bootstrap-server", ":9092"), id="no-host"),
    pytest.param(("--bootstrap-server", "127.0.0.1:99999"), id="port-too-big"),
    pytest.param(("--bootstrap-server", "127.0.0.1:0"), id="port-0"),
    pytest.param(("--bootstrap-server=127.0.0.1:-5",), id="negative-port"),
    pytest.param(("--bootstrap-server", "127.0.0.1:http"), id="port-not-a-number"),
    pytest.param((), id="no-bootstrap-server"),
    pytest.param(("--bootstrap-server", "127.0.0.1:9092", "--timeout", "soon"), id="timeout-not-a-number"),
    pytest.param(("--bootstrap-server", "127.0.0.1:9092", "--timeout", "0"), id="timeout-0"),
    pytest.param(("--bootstrap-server", "127.0.0.1:9092", "extra"), id="extra-argument"),
])
def test_bad_arguments_exit_2_with_one_line_on_stderr(args: tuple[str, ...]) -> None:
    run = probe(*args)
    assert run.code == 2, run
    assert run.out == ""
    assert len(run.lines) == 1 and run.err.startswith("minikafka probe: error: "), run
