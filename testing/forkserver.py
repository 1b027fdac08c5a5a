"""A fork server for `Broker(mode="process")`: one process imports the broker once, then forks a child per
broker start, and the child runs `minikafka serve` (broker/__main__.py's `main`) with the start's arguments.

Why: spawning `python -m minikafka.broker serve` pays the interpreter's start and the broker's imports
(a few hundred ms) on every start; a fork of a process that already holds them starts serving in a few ms.

What a child is, compared with a spawned `minikafka serve`:
- the same code path: `main(argv)` parses the same arguments, builds the config from the caller's
  environment (sent with each request, as a spawned process inherits it) in the caller's working
  directory, binds, loads its data directory, logs to its log file (standard output and error), and ends
  through `_exit_without_teardown` with the same exit codes; SIGTERM and SIGINT stop it cleanly, SIGKILL
  is a crash;
- nothing shared: the server never starts an event loop or a thread (checked before every fork), so a
  child starts from imported modules only; its standard streams are the log file and /dev/null and every
  other descriptor is closed; siblings share no memory after the fork (copy-on-write);
- forked ahead of its start: once its codecs are compiled the server keeps one spare child, forked while
  idle and waiting on a pipe for its request, so a start does not wait for the fork; before it waits, the
  spare copies the pages of the server's memory a start writes (testing/cowpages.py), which the start
  would otherwise copy one page fault at a time (1,900 faults, 7-9 ms of a 13-17 ms start). The server
  finds those pages once, before its first spare, with a scout: a child started as a broker with the
  kit's usual arguments, asked one ApiVersions, its pagemap read, then killed;
- its parent is the fork server, so the caller cannot `waitpid` it: `ForkedProcess` watches it through a
  pidfd (exit, signals) and asks the server for its exit status once it has exited.

The server dies with its caller: it reads requests from a pipe whose end of file means the caller is
gone, then kills its remaining children; the children also get SIGKILL from the kernel when the server
dies (PR_SET_PDEATHSIG), so no broker outlives the test process that started it.

Requests (one JSON line on the server's standard input, one JSON line answered on its standard output):
{"op": "spawn", "argv": [...], "log": path, "cwd": dir, "env": {...}} -> {"pid": N};
{"op": "reap", "pid": N} -> {"code": exit code as Popen's returncode (-9 after SIGKILL)}, asked once the
pidfd shows the exit; {"op": "prepare"} -> {"prepared": true, "pages_copied_ahead": N} once the idle-time
codec compiling and the scout are done.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from typing import IO, Any

# `MINIKAFKA_FORK_SERVER=0` (or false/no/off) makes process-mode brokers spawn `minikafka serve` again.
ENV_SWITCH = "MINIKAFKA_FORK_SERVER"
_PR_SET_PDEATHSIG = 1


def enabled_by_environment() -> bool:
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in ("0", "false", "no", "off")


def supported() -> bool:
    """Linux only: the children are watched through pidfds and die with the server through prctl."""
    return sys.platform == "linux" and hasattr(os, "pidfd_open") and hasattr(signal, "pidfd_send_signal")


class ForkServerError(RuntimeError):
    """The fork server could not be started or stopped answering."""


# --- the caller's side ------------------------------------------------------------------------------


def _interpreter_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables a process's environment acts through before `main` runs (the interpreter's and the
    dynamic loader's): a child forked from a server started under other values would not honour them."""
    return {key: value for key, value in environ.items() if key.startswith(("PYTHON", "LD_"))}


class ForkServer:
    """The caller's handle on one fork server process; requests are serialised by a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner_pid = os.getpid()
        self._started_under = _interpreter_environment(os.environ)
        self._process = subprocess.Popen(
            [sys.executable, "-m", "minikafka.testing.forkserver"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=None, close_fds=True)
        assert self._process.stdin is not None and self._process.stdout is not None
        self._requests: IO[bytes] = self._process.stdin
        self._answers: IO[bytes] = self._process.stdout
        self._ready = False  # its imports may still run: the first request waits for its ready line

    def ready_now(self) -> bool:
        """Whether the server has finished its imports, without waiting for it (a start meanwhile is spawned)."""
        if self._ready:
            return True
        if not self._lock.acquire(blocking=False):
            return False  # another thread is waiting for it
        try:
            readable, _, _ = select.select([self._answers], [], [], 0)
            if readable:
                self._wait_ready()
            return self._ready
        finally:
            self._lock.release()

    def wait_ready(self) -> None:
        """Wait until the server has finished its imports (the first request would)."""
        with self._lock:
            self._wait_ready()

    def _wait_ready(self) -> None:
        if self._ready:
            return
        ready = self._answers.readline()
        if json.loads(ready or b"{}").get("ready") is not True:
            self._process.kill()
            self._process.wait()
            raise ForkServerError(f"the fork server did not start (exit code {self._process.poll()})")
        self._ready = True

    def forks_as_spawned(self) -> bool:
        """Whether a child forked now is what a spawned interpreter would be: the variables that act on the
        interpreter (PYTHONPATH, PYTHONMALLOC, LD_PRELOAD, ...) are still those the server started under.
        When a test changed them, the kit spawns that broker instead."""
        return _interpreter_environment(os.environ) == self._started_under

    @property
    def pid(self) -> int:
        """The server process's: its children are the brokers it forked and the spare waiting for a start."""
        return self._process.pid

    @property
    def usable(self) -> bool:
        """Still running, and in the process that started it (a forked caller gets a server of its own)."""
        return self._owner_pid == os.getpid() and self._process.poll() is None

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._wait_ready()
            try:
                self._requests.write(json.dumps(request).encode() + b"\n")
                self._requests.flush()
                line = self._answers.readline()
            except OSError as exc:
                raise ForkServerError(f"the fork server stopped answering: {exc}") from None
        if not line:
            raise ForkServerError(f"the fork server exited with {self._process.poll()}")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise ForkServerError(answer["error"])
        return answer

    def spawn(self, argv: list[str], log_path: str) -> ForkedProcess:
        """A child running `minikafka serve` with `argv` (the arguments after `python -m minikafka.broker`),
        its standard output and error appended to `log_path`."""
        answer = self._ask({"op": "spawn", "argv": argv, "log": log_path, "cwd": os.getcwd(),
                            "env": dict(os.environ)})
        return ForkedProcess(self, int(answer["pid"]), argv)

    def reap(self, pid: int) -> int:
        return int(self._ask({"op": "reap", "pid": pid})["code"])

    def prepare(self) -> int:
        """Wait until the server has compiled every codec it compiles while idle and found the pages a start
        writes (benchmarks of warm starts): how many pages each spare copies ahead of its start."""
        return int(self._ask({"op": "prepare"})["pages_copied_ahead"])

    def close(self) -> None:
        """End of file on its requests: the server kills the children still running and exits."""
        if self._owner_pid != os.getpid():
            return
        with contextlib.suppress(OSError):
            self._requests.close()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        with contextlib.suppress(OSError):
            self._answers.close()


class ForkedProcess:
    """A fork server's child, with the part of `subprocess.Popen` the testing kit uses (pid, poll, wait,
    send_signal, kill, returncode): exits and signals go through a pidfd, so the pid is never reused
    under it; the exit status comes from the server, its parent."""

    def __init__(self, server: ForkServer, pid: int, args: list[str]) -> None:
        self.server = server
        self.pid = pid
        self.args = args
        self.returncode: int | None = None
        self._pidfd: int | None = os.pidfd_open(pid)  # the server reaps it only when asked: it is still there
        self._collecting = threading.Lock()  # one reap, whichever thread sees the exit first

    def _exited(self, timeout: float | None) -> bool:
        assert self._pidfd is not None
        readable, _, _ = select.select([self._pidfd], [], [], timeout)
        return bool(readable)

    def _collect(self) -> int:
        with self._collecting:
            if self.returncode is None:
                self.returncode = self.server.reap(self.pid)
            return self.returncode

    def __del__(self) -> None:
        # Closed only here: a thread still selecting on it must not find its number reused.
        pidfd, self._pidfd = self._pidfd, None
        if pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(pidfd)

    def poll(self) -> int | None:
        if self.returncode is None and self._exited(0):
            return self._collect()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is not None:
            return self.returncode
        if not self._exited(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self._collect()

    def send_signal(self, signum: int) -> None:
        if self.returncode is None and self._pidfd is not None:  # as Popen: no signal to a reaped process
            with contextlib.suppress(ProcessLookupError):  # exited, not yet reaped: as Popen, nothing to do
                signal.pidfd_send_signal(self._pidfd, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


_server: ForkServer | None = None
_server_lock = threading.Lock()


def shared_server() -> ForkServer:
    """This process's fork server, started on first use (that start pays the broker's imports once; call it
    early, as the pytest plugin does in process mode, and the imports overlap with other work: it returns
    before the server is ready)."""
    global _server
    with _server_lock:
        if _server is None or not _server.usable:
            _server = ForkServer()
        return _server


@atexit.register
def _close_shared_server() -> None:
    if _server is not None:
        _server.close()


# --- the server's side ------------------------------------------------------------------------------


# Every module of these packages is imported by the server, also those a start loads only when configured
# or first used (the lazy subsystems: admin listener, recorder, SASL, KIP-848, ...): the server pays for
# them once, and a child whose start or first requests need one finds it imported.
_PRELOADED_PACKAGES = ("minikafka.protocol", "minikafka.storage", "minikafka.coordinator", "minikafka.broker")


def _preload() -> None:
    """Imports only: no event loop, no thread, no socket. The entry point first, which also keeps
    hypothesis and rich out as it does in a spawned broker."""
    import importlib
    import pkgutil

    import minikafka.broker.__main__  # noqa: F401

    for package_name in _PRELOADED_PACKAGES:
        package = importlib.import_module(package_name)
        for module in pkgutil.walk_packages(package.__path__, prefix=f"{package_name}."):
            with contextlib.suppress(ImportError):  # an optional dependency missing: a child imports it as usual
                importlib.import_module(module.name)
    # What a start asks of the standard library on its first use: binding resolves the host with idna.
    import encodings.idna  # noqa: F401

    _rehearse()

    with contextlib.suppress(ImportError):
        import uvloop  # noqa: F401


def _rehearse() -> None:
    """Build once what every start builds the same way and caches: the command line's parser, the handler
    registry's version ranges, the configuration's regular expressions, the host name codec binding uses
    (pure computations, nothing of a broker run: no file, socket, loop or thread)."""
    import tempfile
    from pathlib import Path

    from minikafka.broker.__main__ import _parser
    from minikafka.broker.config.config import build_config
    from minikafka.broker.handlers import HANDLER_INDEX, all_handler_modules
    from minikafka.broker.wire.registry import Registry

    _parser()
    all_handler_modules()  # a broker imports each at its API's first request; its children find them imported
    config = build_config(overrides=[], host="127.0.0.1", port=0,
                          data_dir=Path(tempfile.gettempdir()) / "never-created")
    Registry(HANDLER_INDEX, config.kafka_version, client_telemetry=config.client_telemetry_enabled)
    "127.0.0.1".encode("idna")


def _codecs_to_prepare() -> list[tuple[int, int]]:
    """(api key, version) pairs whose codecs the server compiles while it waits for requests, the
    first request of a connection (ApiVersions, every version) first, then the newest version of every
    API the broker serves (what the Java client and kafka-python send)."""
    from minikafka.broker.handlers import all_handler_modules
    from minikafka.protocol.api_keys import ApiKey

    pairs = [(int(ApiKey.API_VERSIONS), version) for version in range(5)]
    pairs += [(int(module.API_KEY), module.VERSIONS.max) for module in all_handler_modules()]
    return list(dict.fromkeys(pairs))


def _older_codecs_to_prepare() -> list[tuple[int, int]]:
    """Every other version the broker accepts, compiled after `_codecs_to_prepare`'s: librdkafka 2.16 sends
    older ones (Produce v10, Fetch v16, JoinGroup v5, FindCoordinator v2, AddPartitionsToTxn v0, ...), and a
    child compiling them paid about 12 ms each, 140 ms of CPU for one produce-and-consume test. Newer first,
    every API's next older version before any API's older still (2 s of the server's idle time, 21 MB)."""
    from minikafka.broker.handlers import all_handler_modules

    newest = set(_codecs_to_prepare())
    ranges = [(int(module.API_KEY), module.VERSIONS.min, module.VERSIONS.max) for module in all_handler_modules()]
    deepest = max(high - low for _key, low, high in ranges)
    pairs = [(key, high - depth) for depth in range(1, deepest + 1) for key, low, high in ranges
             if high - depth >= low]
    return [pair for pair in dict.fromkeys(pairs) if pair not in newest]


def _prepare_codec(api_key: int, version: int) -> None:
    from minikafka.broker.observe.metrics import prepare_error_counter
    from minikafka.protocol.codec import load_request_schema, prepare, response_class
    from minikafka.protocol.errors import InvalidRequest
    from minikafka.protocol.render import has_records

    with contextlib.suppress(InvalidRequest):  # a version kio lacks: the broker's answer is built elsewhere
        prepare(api_key, version)
        answer_cls = response_class(api_key, version)
        prepare_error_counter(answer_cls)
        # The flight recorder (on by default) asks both classes whether they carry record batches.
        has_records(load_request_schema(api_key, version))
        has_records(answer_cls)


def _run_child(request: dict[str, Any]) -> None:
    """In the forked child: become a `minikafka serve` process and never return."""
    code = 1
    try:
        _die_with_parent()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as the interpreter sets it at start
        os.chdir(request["cwd"])  # first: the log path may be relative to it
        log_fd = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null_fd = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null_fd, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.closerange(3, os.sysconf("SC_OPEN_MAX") if os.sysconf("SC_OPEN_MAX") > 0 else 4096)
        _reopen_standard_streams()
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["minikafka", *request["argv"]]
        from minikafka.broker.__main__ import main

        code = main(list(request["argv"]))  # ends the process itself (_exit_without_teardown)
    except SystemExit as exit_:  # argparse's errors, as the interpreter would report them
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _reopen_standard_streams() -> None:
    """The streams a spawned interpreter would open on the log file: standard output block-buffered (written
    through under PYTHONUNBUFFERED or -u, which the server shares with its caller, see forks_as_spawned),
    standard error line-buffered, as Python opens them on a file."""
    encoding = sys.stdout.encoding
    unbuffered = bool(getattr(sys.stdout, "write_through", False))  # the server was started with -u or not
    sys.stdin = open(0, encoding=encoding, closefd=False)  # noqa: SIM115 - the process's own stream
    stdout = io.FileIO(1, "w", closefd=False)
    if unbuffered:
        sys.stdout = io.TextIOWrapper(stdout, encoding=encoding, write_through=True)
    else:
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(stdout), encoding=encoding)
    stderr = io.FileIO(2, "w", closefd=False)
    sys.stderr = io.TextIOWrapper(stderr if unbuffered else io.BufferedWriter(stderr), encoding=encoding,
                                  errors="backslashreplace", line_buffering=True, write_through=unbuffered)


def _die_with_parent() -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the server died between the fork and the prctl
        os._exit(1)


def _fork(request: dict[str, Any]) -> int:
    if threading.active_count() != 1:
        raise RuntimeError("the fork server has a thread: a child would inherit its locks")
    pid = os.fork()
    if pid == 0:
        _run_child(request)  # the server's request and answer pipes, fds 0 and 1, are replaced there
    return pid


class _Spare:
    """A child forked ahead of the next spawn request, waiting for it on a pipe of its own: the fork and the
    child's copy-on-write faults happen while the server is idle, not in a start. Before it waits it copies
    the pages a start writes (`copy_ahead`, found by the server's scout, see testing/cowpages.py): 1,900
    faults and 7-9 ms of a start otherwise. It is the same fork a request would make, only earlier; it does
    nothing else before its request arrives (no file, socket, loop or thread), and dies with the server like
    every child."""

    def __init__(self, copy_ahead: list[tuple[int, int]]) -> None:
        if threading.active_count() != 1:
            raise RuntimeError("the fork server has a thread: a child would inherit its locks")
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(write_end)
            _die_with_parent()
            if copy_ahead:
                from minikafka.testing import cowpages

                cowpages.copy_ahead(copy_ahead)
            request = _read_request(read_end)
            if request is None:  # the server closed the pipe without a request: it is going away
                os._exit(0)
            _run_child(request)
        os.close(read_end)
        self.pid = pid
        self._write_end = write_end

    def hand_over(self, request: dict[str, Any]) -> int | None:
        """Give the spare its request; its pid, which from now on is a broker like any other child. None if
        the spare is gone (killed while it waited): it is reaped, and the caller forks as without a spare."""
        payload = json.dumps(request).encode()
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(self._write_end, view):]
        except BrokenPipeError:
            with contextlib.suppress(OSError):
                os.waitpid(self.pid, 0)
            return None
        finally:
            os.close(self._write_end)
        return self.pid

    def dismiss(self) -> None:
        os.close(self._write_end)  # the spare reads end of file and exits
        with contextlib.suppress(OSError):
            os.waitpid(self.pid, 0)


# How the testing kit starts a process-mode broker by default (testing/broker.py, _SubprocessBroker): the
# scout's start takes the path most starts take.
_SCOUT_ARGS = ("--host", "127.0.0.1", "--port", "0", "--log-format", "json", "--admin-port", "0")
_SCOUT_DEADLINE_S = 3.0  # about 40 ms here; the server answers no request meanwhile
_SCOUT_POLL_S = 0.001


def _scout_written_pages() -> list[tuple[int, int]]:
    """Which of the server's pages a start writes: a child forked as for a spawn request starts a broker
    (its own temporary directory and log), answers one ApiVersions from the server, is stopped, and its
    pagemap read; then it is killed. Empty when the broker does not start or answer in time."""
    import tempfile
    import time

    from minikafka.testing import cowpages

    within = cowpages.writable_private_ranges()
    with tempfile.TemporaryDirectory(prefix="minikafka-scout-") as directory:
        log_path = os.path.join(directory, "broker.log")
        pid = _fork({"argv": ["serve", *_SCOUT_ARGS, "--data-dir", os.path.join(directory, "data")],
                     "log": log_path, "cwd": directory, "env": dict(os.environ)})
        exited = False  # and reaped: its pid may be another process's by now
        try:
            deadline = time.monotonic() + _SCOUT_DEADLINE_S
            port = None
            while port is None and time.monotonic() < deadline:
                exited = os.waitpid(pid, os.WNOHANG) != (0, 0)
                if exited:
                    return []
                port = _ready_port(log_path)
                time.sleep(_SCOUT_POLL_S)
            if port is None or not _api_versions_answered(port, deadline - time.monotonic()):
                return []
            os.kill(pid, signal.SIGSTOP)  # its pages as they were at the answer
            return cowpages.written_ranges(pid, within)
        finally:
            if not exited:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)


def _ready_port(log_path: str) -> int | None:
    """The port of the scout's `broker ready` line, once it is there."""
    from minikafka.testing.broker import broker_ready_line

    with contextlib.suppress(OSError), open(log_path, "rb") as log:
        ready = broker_ready_line(log.read().decode(errors="replace"))
        return None if ready is None else int(ready["port"])
    return None


def _api_versions_answered(port: int, timeout: float) -> bool:
    """ApiVersions v3, as librdkafka and the Java client open a connection with, answered under its
    correlation id."""
    import socket
    import struct

    correlation_id = 1
    client_id = b"minikafka-scout"
    header = struct.pack(">hhih", 18, 3, correlation_id, len(client_id)) + client_id + b"\x00"
    body = bytes([len(client_id) + 1]) + client_id + bytes([2]) + b"1" + b"\x00"  # compact strings, no tags
    request = header + body
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=max(timeout, 0.001)) as connection:
            connection.sendall(struct.pack(">i", len(request)) + request)
            answer = b""
            while len(answer) < 8:
                chunk = connection.recv(65536)
                if not chunk:
                    return False
                answer += chunk
    except OSError:
        return False
    return struct.unpack(">i", answer[4:8])[0] == correlation_id


def _read_request(fd: int) -> dict[str, Any] | None:
    """The spare's request: the whole pipe up to its end of file (the server writes it, then closes)."""
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    os.close(fd)
    return json.loads(b"".join(chunks)) if chunks else None


class _Server:
    """The server's state: its children (killed when the caller goes) and the codecs still to compile."""

    def __init__(self) -> None:
        self.requests = _LineReader(os.fdopen(0, "rb", buffering=0))
        self.answers = os.fdopen(1, "wb", buffering=0)
        self.children: set[int] = set()
        self.to_prepare = _codecs_to_prepare()
        self.older_to_prepare = _older_codecs_to_prepare()
        # Forked once the newest codecs are compiled, and again once the older ones are (a spare forked
        # earlier compiles the rest itself when its broker needs them).
        self.spare: _Spare | None = None
        # The pages of this server's memory a start writes, found by `_scout_written_pages` before the first
        # spare is forked; every spare copies them ahead of its start.
        self.written_pages: list[tuple[int, int]] | None = None

    def answer(self, payload: dict[str, Any]) -> None:
        self.answers.write(json.dumps(payload).encode() + b"\n")

    def prepare_first_request(self) -> None:
        """ApiVersions, every version: the first request of every connection, so of every broker's first answer."""
        first_key = self.to_prepare[0][0]
        while self.to_prepare and self.to_prepare[0][0] == first_key:
            _prepare_codec(*self.to_prepare.pop(0))

    def prepare_while_idle(self) -> None:
        """The rest of the codecs one at a time while no request waits: a request waits for one at most.
        A spare child for the next start once the newest are compiled; once the older ones are too, the
        spare is forked again so that it has them."""
        while self.to_prepare and not self.requests.ready():
            _prepare_codec(*self.to_prepare.pop(0))
        if self.to_prepare or self.requests.ready():
            return
        if self.spare is None:
            self._fork_spare()
        while self.older_to_prepare and not self.requests.ready():
            _prepare_codec(*self.older_to_prepare.pop(0))
            if not self.older_to_prepare and self.spare is not None:
                self.spare.dismiss()  # forked without the older codecs
                self.spare = None
        if self.spare is None and not self.requests.ready():
            self._fork_spare()

    def _fork_spare(self) -> None:
        import gc

        gc.freeze()  # what was compiled since the last freeze: no collection in a child copies its pages
        self.spare = _Spare(self.pages_a_start_writes())

    def pages_a_start_writes(self) -> list[tuple[int, int]]:
        """Found once, by a scout broker (about 40 ms of the server's time, while no request waits); none
        when the scout could not be forked or run (starts then fault as without it)."""
        if self.written_pages is None:
            import gc

            gc.freeze()  # as before a spare's fork: the scout's collections leave the server's objects alone
            try:
                self.written_pages = _scout_written_pages()
            except (OSError, RuntimeError):
                self.written_pages = []
        return self.written_pages

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request["op"]
        if op == "spawn":
            spare, self.spare = self.spare, None
            pid = spare.hand_over(request) if spare is not None else None
            if pid is None:
                pid = _fork(request)
            self.children.add(pid)
            return {"pid": pid}
        if op == "reap":
            pid = int(request["pid"])
            _, status = os.waitpid(pid, 0)
            self.children.discard(pid)
            return {"code": os.waitstatus_to_exitcode(status)}
        if op == "prepare":  # finish compiling the codecs now (a benchmark measuring warm children)
            for pending in (self.to_prepare, self.older_to_prepare):
                while pending:
                    _prepare_codec(*pending.pop(0))
            if self.spare is not None:
                self.spare.dismiss()  # forked before some of them
                self.spare = None
            from minikafka.testing.cowpages import page_count

            return {"prepared": True, "pages_copied_ahead": page_count(self.pages_a_start_writes())}
        return {"error": f"unknown request {op!r}"}

    def kill_children(self) -> None:
        if self.spare is not None:
            self.spare.dismiss()
        for pid in self.children:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)


def serve() -> int:
    """The server's loop: one request a line on fd 0, one answer a line on fd 1, until end of file."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the caller, which closes this server
    _preload()
    import gc

    gc.freeze()  # the imported modules: no collection in a child walks (and so copies) their pages
    server = _Server()
    server.prepare_first_request()
    server.answer({"ready": True})
    try:
        while True:
            server.prepare_while_idle()
            line = server.requests.next_line()
            if line is None:
                return 0  # the caller is gone
            try:
                server.answer(server.handle(json.loads(line)))
            except (OSError, RuntimeError, KeyError, ValueError) as exc:
                server.answer({"error": f"{type(exc).__name__}: {exc}"})
    finally:
        server.kill_children()  # no broker outlives the caller


class _LineReader:
    """Lines from an unbuffered binary stream; buffered readers would be inherited half-read by children."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.pending = b""

    def ready(self) -> bool:
        """A line, or the end of the stream, can be read without waiting."""
        return b"\n" in self.pending or bool(select.select([self.stream], [], [], 0)[0])

    def next_line(self) -> bytes | None:
        """The next line; None at the end of the stream (the caller is gone)."""
        while b"\n" not in self.pending:
            chunk = self.stream.read(65536)
            if not chunk:
                return None
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return line


if __name__ == "__main__":
    sys.exit(serve())
