"""`Broker`: a minikafka broker for tests, in this process (its own thread and event loop) or as a subprocess.

    with Broker({"num.partitions": 3}) as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})

It listens on 127.0.0.1, on a free port unless one is given, with a fresh temporary data directory unless
one is given (only a directory it made itself is removed on exit; it is made in memory, /dev/shm, where
that has room and TMPDIR is not set: see scratch). `restart()` keeps the data and the
port (`restart(hard=True)` kills it first); `kill()` stops it as a crash would, so the next start goes through
crash recovery. `stop()` returns the exit code.

In-process mode runs `BrokerServer` on a thread of its own with a new event loop (uvloop's when installed;
the global event loop policy is left alone, so the caller's loop, pytest-asyncio's included, is untouched).
Its structlog lines go to `log_file` (see logroute). Process mode runs `python -m minikafka.broker serve`
with JSON logs into `log_file` and its admin listener on a free port (`admin_listener=False`: none, as
`minikafka serve` runs by default) and any more `serve_args` (`("--trace", path)`), and reads both ports
from its `broker ready` line. That process is forked from this process's fork server (testing/forkserver.py,
Linux), which has the broker imported, unless `fork_server=False` or MINIKAFKA_FORK_SERVER=0 asks for a
freshly spawned interpreter; a start while the server still imports is spawned too (`fork_server=True`
waits for it). `logs()` holds every start's lines, `run_log()` the latest start's; `pid` and
`alive` say where it runs and whether it still does.

The control plane (`add_fault`, `faults`, `remove_fault`, `clear_faults`, `state`, `wait_for`,
`wait_until_lso`, `advance_clock`, `clock`, `metrics`, `trace`, `delete_topic`, `reset`) works in both modes:
in-process it runs on the broker's event loop thread, in process mode it goes over the HTTP admin API. Crash points
(`add_crash_point`) kill the broker's process, so they need mode="process".
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import weakref
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Protocol, TextIO, TypeVar

import structlog
from minikafka.broker.config.config import BrokerConfig, build_config
from minikafka.broker.control.faults import FaultSpecError, fault_table
from minikafka.testing.logroute import route_current_thread, unroute_current_thread
from minikafka.testing.scratch import make_scratch_directory

if TYPE_CHECKING:
    from minikafka.broker.server import BrokerServer
    from minikafka.broker.wire.services import BrokerServices

T = TypeVar("T")
Mode = Literal["inprocess", "process"]
MODES: tuple[Mode, ...] = ("inprocess", "process")
HOST = "127.0.0.1"
_READY_POLL_S = 0.01
_FIRST_READY_POLL_S = 0.0005
_FORKED_READY_POLL_S = 0.001  # a forked child is ready in 15-20 ms: a late look costs a start 5%
# After a kill the broker's remaining tasks are cancelled so their memory is freed; they cannot touch
# the disk any more (the logs are closed), so this bound only limits how long kill() may take.
_DRAIN_AFTER_CRASH_S = 5.0
_WAIT_POLL_S = 0.01
_MAX_HTTP_WAIT_S = 60.0  # the admin API's longest /state/wait
ADMIN_PORT_KEY = "admin.listener.port"
SCHEMA_REGISTRY_PORT_KEY = "schema.registry.port"


class BrokerError(RuntimeError):
    """The broker could not be started or stopped; the message holds the end of its log."""


def _property_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"  # Kafka's spelling; str(True) would be "True"
    if isinstance(value, list | tuple):
        return ",".join(str(item) for item in value)
    return str(value)


def _new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop as `minikafka serve` uses, created directly so no global policy is installed."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def _log_tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class _InProcessBroker:
    """One run of BrokerServer on its own thread; started once, then stopped or crashed once."""

    def __init__(self, config: BrokerConfig, log_sink: TextIO) -> None:
        self.config = config
        self.log_sink = log_sink
        self.port = 0
        self.admin_port: int | None = None
        self.schema_registry_url: str | None = None
        self._loop = _new_event_loop()
        self._server: BrokerServer | None = None
        self._ready = threading.Event()
        self._start_error: BaseException | None = None
        self._crashed = False
        self._thread = threading.Thread(target=self._run, name=f"minikafka-broker-{id(self):x}", daemon=True)

    def start(self, timeout: float) -> int:
        self._thread.start()
        if not self._ready.wait(timeout):
            # Still starting (a huge data dir being recovered): stop it rather than leaving a thread behind.
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)
            raise BrokerError(f"in-process broker not ready after {timeout}s")
        if self._start_error is not None:
            self._thread.join(timeout)
            raise BrokerError(f"in-process broker failed to start: {self._start_error!r}") from self._start_error
        return self.port

    def _run(self) -> None:
        route_current_thread(self.log_sink)
        loop = self._loop
        loop.set_exception_handler(self._log_loop_error)
        try:
            try:
                loop.run_until_complete(self._boot())
            except BaseException as exc:  # handed to start(), which raises it in the caller's thread
                self._start_error = exc
                return
            finally:
                self._ready.set()
            loop.run_forever()
            self._cancel_remaining_tasks()
        finally:
            loop.close()
            unroute_current_thread()

    async def _boot(self) -> None:
        from minikafka.broker.server import BrokerServer

        for key in self.config.unknown_keys:
            structlog.get_logger("minikafka").warning("unknown configuration key ignored", key=key)
        server = BrokerServer(self.config)
        await server.start()
        self._server = server
        self.port = server.bound_port
        self.admin_port = server.admin_port
        self.schema_registry_url = server.schema_registry_url

    def call(self, operation: Callable[[BrokerServer], T], timeout: float) -> T:
        """Run `operation` on the broker's event loop thread, where its state may be touched, and return
        what it returns (or raise what it raises)."""
        server = self._server
        if server is None or not self._thread.is_alive():
            raise BrokerError("the broker is not running")

        async def run() -> T:
            return operation(server)

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout)

    def call_async(self, operation: Callable[[BrokerServer], Coroutine[Any, Any, T]], timeout: float) -> T:
        """`call` for an operation that is a coroutine (stopping a node waits for its connections)."""
        server = self._server
        if server is None or not self._thread.is_alive():
            raise BrokerError("the broker is not running")
        return asyncio.run_coroutine_threadsafe(operation(server), self._loop).result(timeout)

    def _log_loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """Keep asyncio's complaints about this loop in the broker's log, not in the caller's logging."""
        message = context.get("message", "")
        exception = context.get("exception")
        self.log_sink.write(json.dumps({"event": "event loop error", "message": str(message),
                                        "exception": repr(exception) if exception else None}) + "\n")
        self.log_sink.flush()

    def _cancel_remaining_tasks(self) -> None:
        """Unwind what is left, as asyncio.run does; after a crash only memory and sockets are touched."""
        loop = self._loop
        tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            loop.run_until_complete(asyncio.wait(tasks, timeout=_DRAIN_AFTER_CRASH_S))
        with contextlib.suppress(RuntimeError):
            loop.run_until_complete(loop.shutdown_asyncgens())

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    @property
    def pid(self) -> int:
        return os.getpid()

    def stop(self, timeout: float) -> int:
        """Kafka's controlled shutdown: BrokerServer.shutdown() flushes, checkpoints, marks a clean stop."""
        if not self._thread.is_alive():
            return 0
        assert self._server is not None
        future = asyncio.run_coroutine_threadsafe(self._server.shutdown(), self._loop)
        try:
            future.result(timeout)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout + _DRAIN_AFTER_CRASH_S)
        return 0

    def kill(self, timeout: float) -> None:
        if not self._thread.is_alive():
            return
        self._loop.call_soon_threadsafe(self._crash)
        self._thread.join(timeout + _DRAIN_AFTER_CRASH_S)

    def _crash(self) -> None:
        """What `kill -9` leaves, at a point between two event loop callbacks (storage calls are synchronous,
        so a crash never lands inside one of them here).

        Everything already handed to write(2) stays, as the kernel keeps it when a process dies: minikafka
        writes log data with os.write, unbuffered. Lost: whatever is only in memory, the producer state
        snapshots, the recovery-point and log-start checkpoints and the clean-shutdown marker, none of which
        is written: the files are closed with LogManager.close(clean=False). The listener is closed at once
        and the loop stopped; clients see their connections drop when the remaining tasks are cancelled.
        """
        self._crashed = True
        if self._server is not None:
            self._server.abort()  # its listeners go now, so the port is free for restart()
        self._loop.stop()


def _services(server: BrokerServer) -> BrokerServices:
    if server.services is None:
        raise BrokerError("the broker is not running")
    return server.services


# Subprocess brokers still running; killed at interpreter exit so a Broker that was never closed (a test
# process ending early) leaves no broker behind holding its port and data dir.
_live_subprocesses: weakref.WeakSet[subprocess.Popen[bytes]] = weakref.WeakSet()


@atexit.register
def _kill_leftover_subprocesses() -> None:
    for process in list(_live_subprocesses):
        if process.poll() is None:
            process.kill()


class _Process(Protocol):
    """What the kit uses of a broker process: a `subprocess.Popen`, or a fork server's `ForkedProcess`."""

    pid: int
    returncode: int | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, signum: int) -> None: ...

    def kill(self) -> None: ...


ForkPolicy = Literal["spawn", "fork", "fork-when-ready"]


def _fork_policy(requested: bool | None) -> ForkPolicy:
    """`fork_server=True` forks (waiting for the server's imports if need be); by default a start forks when
    the server is ready and is spawned while it still imports, as it does at a session's first start: a
    lone process-mode broker then costs a spawn (0.4 s here), not the server's start (1 s)."""
    from minikafka.testing import forkserver

    if not forkserver.supported():
        return "spawn"
    if requested is None:
        return "fork-when-ready" if forkserver.enabled_by_environment() else "spawn"
    return "fork" if requested else "spawn"


class _SubprocessBroker:
    """`python -m minikafka.broker serve` with JSON logs appended to the log file: spawned, or forked by this
    process's fork server (testing/forkserver.py), which runs the same `main` in a child that has the
    broker's modules imported already."""

    def __init__(self, config: Mapping[str, str], host: str, port: int, data_dir: Path, log_path: Path,
                 admin_listener: bool = True, serve_args: Sequence[str] = (), fork: ForkPolicy = "spawn") -> None:
        self.args = [sys.executable, "-m", "minikafka.broker", "serve", "--host", host, "--port", str(port),
                     "--data-dir", str(data_dir), "--log-format", "json"]
        if admin_listener and ADMIN_PORT_KEY not in config:
            # The control plane (faults, state) reaches a subprocess over its admin listener.
            self.args += ["--admin-port", "0"]
        for key, value in config.items():
            self.args += ["--override", f"{key}={value}"]
        self.args += serve_args
        self.log_path = log_path
        self.fork = fork
        self.forked = False  # whether the running one was forked
        self.process: _Process | None = None
        self.admin_port: int | None = None
        self.schema_registry_url: str | None = None

    def _launch(self) -> _Process:
        self.forked = False
        if self.fork != "spawn":
            from minikafka.testing.forkserver import shared_server

            server = shared_server()  # started now if it was not: ready for the next start
            if server.forks_as_spawned() and (self.fork == "fork" or server.ready_now()):
                self.log_path.touch()  # read for the ready line before the child has opened it
                self.forked = True
                return server.spawn(self.args[3:], str(self.log_path))
        with open(self.log_path, "ab") as log_file:
            process = subprocess.Popen(self.args, stdout=log_file, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL)
        _live_subprocesses.add(process)
        return process

    def start(self, timeout: float) -> int:
        start_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        self.process = process = self._launch()
        deadline = time.monotonic() + timeout
        poll_s = _FIRST_READY_POLL_S
        while time.monotonic() < deadline:
            port = self._ready_port(start_offset)
            if port is not None:
                return port
            if process.poll() is not None:
                raise BrokerError(f"broker exited with {process.returncode}:\n{_log_tail(self.log_path)}")
            time.sleep(poll_s)
            # A forked broker is ready within milliseconds, a spawned one after its imports: look often at
            # first, then back off so a slow start does not spin on a shared machine.
            poll_s = min(poll_s * 2, _FORKED_READY_POLL_S if self.forked else _READY_POLL_S)
        self.kill(timeout)
        raise BrokerError(f"broker not ready after {timeout}s:\n{_log_tail(self.log_path)}")

    def _ready_port(self, start_offset: int) -> int | None:
        with open(self.log_path, "rb") as log_file:
            log_file.seek(start_offset)
            ready = broker_ready_line(log_file.read().decode(errors="replace"))
        if ready is None:
            return None
        admin_port = ready.get("admin_port")
        self.admin_port = admin_port if isinstance(admin_port, int) else None
        self.schema_registry_url = ready.get("schema_registry_url")
        return int(ready["port"])

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int:
        assert self.process is not None  # set by start(), before the Broker counts it as running
        return self.process.pid

    def stop(self, timeout: float) -> int:
        process = self.process
        if process is None:
            return 0
        code = process.poll()
        if code is not None:
            return code
        process.send_signal(signal.SIGTERM)
        try:
            return wait_for_exit(process, timeout)
        except subprocess.TimeoutExpired:
            self.kill(timeout)
            raise BrokerError(f"broker did not stop within {timeout}s; killed:\n{_log_tail(self.log_path)}") from None

    def kill(self, timeout: float) -> None:
        process = self.process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL)
            wait_for_exit(process, timeout)


def broker_ready_line(log_text: str) -> dict[str, Any] | None:
    """The `broker ready` line of a broker's JSON log (its port, admin port, schema registry URL), once
    there is one."""
    for line in log_text.splitlines():
        if '"broker ready"' in line:
            with contextlib.suppress(ValueError):
                ready = json.loads(line)
                if isinstance(ready, dict) and isinstance(ready.get("port"), int):
                    return ready
    return None


def wait_for_exit(process: _Process, timeout: float) -> int:
    """`process.wait(timeout)` woken by the exit itself: Popen's wait polls with sleeps growing to 50 ms,
    which would round a broker's ~25 ms stop up to 30-60 ms in every test that stops one."""
    if process.poll() is not None or not hasattr(os, "pidfd_open"):
        return process.wait(timeout)
    try:
        pidfd = os.pidfd_open(process.pid)
    except OSError:  # kernels before 5.3, or the process was already reaped
        return process.wait(timeout)
    try:
        select.select([pidfd], [], [], timeout)
    finally:
        os.close(pidfd)
    return process.wait(0.5 if process.poll() is None else 0)


class Broker:
    """A minikafka broker for tests; a context manager. See the module docstring."""

    def __init__(
        self,
        config: Mapping[str, object] | None = None,
        *,
        mode: Mode = "inprocess",
        port: int = 0,
        data_dir: str | os.PathLike[str] | None = None,
        log_file: str | os.PathLike[str] | None = None,
        timeout: float = 30.0,
        nodes: int = 1,
        admin_listener: bool = True,
        serve_args: Sequence[str] = (),
        schema_registry: bool = False,
        fork_server: bool | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        if serve_args and mode != "process":
            raise ValueError("serve_args are command-line arguments of `minikafka serve`: use mode='process'")
        self.mode: Mode = mode
        self.config = {str(key): _property_value(value) for key, value in (config or {}).items()}
        if nodes != 1:
            self.config["minikafka.nodes"] = str(nodes)
        if schema_registry:
            self.config.setdefault(SCHEMA_REGISTRY_PORT_KEY, "0")
        self.timeout = timeout
        self._requested_port = port
        self._admin_listener = admin_listener
        self._serve_args = tuple(serve_args)
        self._fork_server = fork_server
        self._port = 0
        self._workdir: Path | None = None  # made by us, removed by close()
        self._given_data_dir = Path(data_dir) if data_dir is not None else None
        self._given_log_file = Path(log_file) if log_file is not None else None
        self._data_dir: Path | None = None
        self._log_path: Path | None = None
        self._log_sink: TextIO | None = None
        self._run_log_start = 0  # where the latest start's lines begin in the log file
        self._running: _InProcessBroker | _SubprocessBroker | None = None
        self._config_checked = False

    # --- where it is ---------------------------------------------------------------------

    @property
    def port(self) -> int:
        if not self._port:
            raise BrokerError("the broker has not been started")
        return self._port

    @property
    def bootstrap_servers(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def data_dir(self) -> Path:
        if self._data_dir is None:
            raise BrokerError("the broker has not been started")
        return self._data_dir

    @property
    def log_file(self) -> Path:
        if self._log_path is None:
            raise BrokerError("the broker has not been started")
        return self._log_path

    @property
    def running(self) -> bool:
        """Started and not stopped or killed since (a process that died on its own still counts: see `alive`)."""
        return self._running is not None

    @property
    def alive(self) -> bool:
        """Running, and its process (or, in-process, its thread) is still up: False after a crash too."""
        return self._running is not None and self._running.alive

    @property
    def pid(self) -> int:
        """The process the broker runs in: the subprocess's id in process mode, this process's in-process."""
        if self._running is None:
            raise BrokerError("the broker is not running")
        return self._running.pid

    def logs(self) -> str:
        """Everything the broker logged so far, over all its starts."""
        return self.log_file.read_text(errors="replace") if self._log_path and self._log_path.exists() else ""

    def run_log(self) -> str:
        """What the broker logged since its latest start (after a restart, the recovery it went through)."""
        if self._log_path is None or not self._log_path.exists():
            return ""
        with open(self._log_path, "rb") as log:
            log.seek(self._run_log_start)
            return log.read().decode(errors="replace")

    def log_tail(self, lines: int = 40) -> str:
        return _log_tail(self._log_path, lines) if self._log_path is not None else ""

    # --- control plane: faults and state (docs/control-plane.md) ------------------------

    @property
    def admin_url(self) -> str | None:
        """The admin listener's "http://127.0.0.1:PORT" (always on in process mode; in-process only when
        admin.listener.port is configured), for tools in other languages; None when it is off."""
        admin_port = self._running.admin_port if self._running is not None else None
        return f"http://{HOST}:{admin_port}" if admin_port is not None else None

    @property
    def schema_registry_url(self) -> str | None:
        """The schema registry's "http://127.0.0.1:PORT" (docs/schema-registry.md) when it was asked for
        (`schema_registry=True`, or schema.registry.port in the config); None otherwise."""
        return self._running.schema_registry_url if self._running is not None else None

    def reset_schema_registry(self) -> None:
        """Forget every subject, schema, config and mode (ids go on growing); in-process mode only."""
        if not isinstance(self._running, _InProcessBroker):
            raise BrokerError("reset_schema_registry needs a running in-process broker")

        def reset(server: BrokerServer) -> None:
            if server.schema_registry is None:
                raise BrokerError("this broker serves no schema registry")
            server.schema_registry.reset()

        self._running.call(reset, self.timeout)

    def add_fault(self, api: str | int, error: str | int | None = None, *, count: int | None = 1,
                  delay_ms: int | None = None, drop: Literal["before", "after"] | None = None,
                  throttle_ms: int | None = None, topic: str | None = None, partition: int | None = None,
                  group_id: str | None = None, transactional_id: str | None = None,
                  client_id: str | None = None) -> dict[str, Any]:
        """Make the next `count` requests of `api` (None: all, until removed) that match the filters fail
        with `error`, wait `delay_ms`, lose their connection (`drop`) or carry `throttle_ms`. Names are
        Kafka's ("Produce", "NOT_LEADER_OR_FOLLOWER"), numbers work too. Returns the rule, with its "id".
        A bad rule raises FaultSpecError (a ValueError). Rules end with the broker run: restart() clears them.
        """
        optional = {"error": error, "delay_ms": delay_ms, "drop": drop, "throttle_ms": throttle_ms, "topic": topic,
                    "partition": partition, "group_id": group_id, "transactional_id": transactional_id,
                    "client_id": client_id}
        spec: dict[str, Any] = {"api": api, "count": count}
        spec.update((key, value) for key, value in optional.items() if value is not None)
        if isinstance(self._running, _InProcessBroker):
            return self._running.call(lambda server: fault_table(_services(server)).add(spec).to_json(), self.timeout)
        return self._admin("POST", "/faults", spec)["fault"]  # type: ignore[no-any-return]

    def faults(self) -> list[dict[str, Any]]:
        """The rules still active, oldest first, each with how often it fired and how often it still will."""
        if isinstance(self._running, _InProcessBroker):
            return self._running.call(lambda server: fault_table(_services(server)).list(), self.timeout)
        return self._admin("GET", "/faults")["faults"]  # type: ignore[no-any-return]

    def remove_fault(self, fault_id: int) -> bool:
        if isinstance(self._running, _InProcessBroker):
            return self._running.call(lambda server: fault_table(_services(server)).remove(fault_id), self.timeout)
        try:
            self._admin("DELETE", f"/faults/{int(fault_id)}")
        except KeyError:
            return False
        return True

    def clear_faults(self) -> int:
        """Remove every rule; returns how many there were."""
        if isinstance(self._running, _InProcessBroker):
            return self._running.call(lambda server: fault_table(_services(server)).clear(), self.timeout)
        return int(self._admin("DELETE", "/faults")["removed"])

    def state(self) -> dict[str, Any]:
        """A JSON-shaped snapshot: topics -> partitions (log start, high watermark, last stable offset, log
        end, segments, producers) and groups (state, generation, members, committed offsets)."""
        if isinstance(self._running, _InProcessBroker):
            from minikafka.broker.control.admin_http import state_snapshot

            return self._running.call(lambda server: state_snapshot(_services(server)), self.timeout)
        return self._admin("GET", "/state")

    # --- several nodes (docs/cluster.md) -------------------------------------------------------

    def cluster(self) -> dict[str, Any]:
        """Nodes (online, endpoints per listener) and every partition's leader, epoch, replicas and ISR."""
        if isinstance(self._running, _InProcessBroker):
            return self._running.call(lambda server: _services(server).cluster.snapshot(), self.timeout)
        return self._admin("GET", "/cluster")

    def node_port(self, node_id: int, listener: str | None = None) -> int:
        """The port a node listens on (its first listener unless named)."""
        [node] = [n for n in self.cluster()["nodes"] if n["node_id"] == node_id]
        endpoints = node["endpoints"]
        endpoint = endpoints[listener] if listener is not None else next(iter(endpoints.values()))
        return int(endpoint.rpartition(":")[2])

    def stop_node(self, node_id: int) -> None:
        """A node failure: its ports refuse, its connections drop, its leaderships move to the replicas up."""
        if isinstance(self._running, _InProcessBroker):
            self._running.call_async(lambda server: server.stop_node(node_id), self.timeout)
        else:
            self._admin("POST", f"/cluster/nodes/{int(node_id)}/stop")

    def start_node(self, node_id: int) -> None:
        if isinstance(self._running, _InProcessBroker):
            self._running.call_async(lambda server: server.start_node(node_id), self.timeout)
        else:
            self._admin("POST", f"/cluster/nodes/{int(node_id)}/start")

    def move_leader(self, topic: str, partition: int, node_id: int) -> dict[str, Any]:
        """Make a replica the partition's leader (its leader epoch goes up by one)."""
        if isinstance(self._running, _InProcessBroker):
            def move(server: BrokerServer) -> dict[str, Any]:
                state = _services(server).cluster.move_leader(topic, partition, node_id)
                return {"topic": topic, "partition": partition, "leader": state.leader,
                        "leader_epoch": state.leader_epoch, "replicas": list(state.replicas), "isr": list(state.isr)}
            return self._running.call(move, self.timeout)
        return self._admin("POST", f"/cluster/partitions/{urllib.parse.quote(topic, safe='')}/{int(partition)}/leader",
                           {"node": node_id})

    def delete_topic(self, name: str) -> bool:
        """Delete one topic as DeleteTopics does (ACLs and delete.topic.enable aside: this is a test's clean-up
        of its own topic); False when there was no such topic. Internal topics raise BrokerError."""
        if isinstance(self._running, _InProcessBroker):
            from minikafka.broker.control.admin_http import HttpError, delete_topic

            def delete(server: BrokerServer) -> bool:
                try:
                    delete_topic(_services(server), name)
                except HttpError as exc:
                    if exc.status == 404:
                        return False
                    raise BrokerError(str(exc)) from None
                return True

            return self._running.call(delete, self.timeout)
        try:
            self._admin("DELETE", f"/topics/{urllib.parse.quote(name, safe='')}")
        except KeyError:  # the admin API's 404
            return False
        return True

    def reset(self) -> dict[str, Any]:
        """Back to the first-start state without a restart, in a few milliseconds: every topic (and its files),
        group, transactional id, producer state, ACL, dynamic config, fault rule, crash point and recorded
        exchange gone; stopped nodes started again. The port, the cluster id, the config, the clock and open
        connections stay (docs/testing.md, "Reset between tests", says what connected clients see). Returns
        {"removed": {"topics": N, "groups": N, "transactional_ids": N}, "took_ms": T}."""
        if isinstance(self._running, _InProcessBroker):
            async def reset(server: BrokerServer) -> dict[str, Any]:
                return await server.reset()

            return self._running.call_async(reset, self.timeout)
        return self._admin("POST", "/reset")

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 10.0) -> dict[str, Any]:
        """Poll `state()` until `predicate(state)` is true and return that state; TimeoutError (with the last
        state seen) once `timeout` seconds have passed."""
        deadline = time.monotonic() + timeout
        for _ in range(int(timeout / _WAIT_POLL_S) + 2):  # the deadline ends it first
            state = self.state()
            if predicate(state):
                return state
            if time.monotonic() >= deadline:
                break
            time.sleep(_WAIT_POLL_S)
        raise TimeoutError(f"broker state did not satisfy the condition within {timeout}s; last state: "
                           f"{json.dumps(state)[:2000]}")

    def wait_until_lso(self, topic: str, partition: int, offset: int, timeout: float = 10.0) -> dict[str, Any]:
        """Wait until the last stable offset of topic-partition is at least `offset` (every transaction
        below it ended); returns that partition's state."""

        if isinstance(self._running, _SubprocessBroker) and timeout <= _MAX_HTTP_WAIT_S:
            # One request that the broker holds until the offset is reached, not a poll per 10 ms.
            query = urllib.parse.urlencode({"topic": topic, "partition": partition, "lso": offset,
                                            "timeout_ms": int(timeout * 1000)})
            answer = self._admin("GET", f"/state/wait?{query}", http_timeout=timeout + self.timeout)
            return answer["partition"]  # type: ignore[no-any-return]

        def reached(state: dict[str, Any]) -> bool:
            found = state["topics"].get(topic, {}).get("partitions", {}).get(str(partition))
            return found is not None and found["last_stable_offset"] >= offset

        state = self.wait_for(reached, timeout)
        return state["topics"][topic]["partitions"][str(partition)]  # type: ignore[no-any-return]

    def trace(self, limit: int | None = None, api: str | None = None, client_id: str | None = None,
              topic: str | None = None) -> list[dict[str, Any]]:
        """The flight recorder's newest `limit` (None: all it keeps, minikafka.trace.ring.size) request/response
        pairs, oldest first, filtered by API (Kafka's name, "EndTxn"), client id and topic named; each as a line
        of `--trace` (docs/debugging.md#flight-recorder-trace). An unknown API name raises ValueError; a broker
        started with minikafka.trace.ring.size=0 raises BrokerError."""
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be positive, not {limit}")
        if isinstance(self._running, _InProcessBroker):
            def recent(server: BrokerServer) -> list[dict[str, Any]]:
                from minikafka.broker.observe.recorder import flight_recorder

                recorder = flight_recorder(_services(server))
                if recorder is None:
                    raise BrokerError("the flight recorder is off (minikafka.trace.ring.size=0)")
                return recorder.recent(limit, api=api, client_id=client_id, topic=topic)

            return self._running.call(recent, self.timeout)
        query = {key: value for key, value in (("limit", limit), ("api", api), ("client_id", client_id),
                                               ("topic", topic)) if value is not None}
        path = "/trace" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        try:
            return self._admin("GET", path)["exchanges"]  # type: ignore[no-any-return]
        except FaultSpecError as exc:  # the admin API's 400
            raise ValueError(str(exc)) from None

    def clock(self) -> dict[str, Any]:
        """{"clock": "system" or "manual", "now_ms": the broker's time, "advanced_ms": how far a manual clock
        has been moved (None on the system clock)}."""
        if isinstance(self._running, _InProcessBroker):
            from minikafka.broker.control.admin_http import clock_snapshot

            return self._running.call(lambda server: clock_snapshot(_services(server)), self.timeout)
        return self._admin("GET", "/clock")

    def metrics(self) -> str:
        """The broker's Prometheus metrics in the text format GET /metrics serves (docs/debugging.md, "Metrics"); parse
        them with prometheus_client.parser.text_string_to_metric_families."""
        if isinstance(self._running, _InProcessBroker):
            from minikafka.broker.observe.prometheus import render

            return self._running.call(lambda server: render(_services(server)).decode(), self.timeout)
        url = self.admin_url
        if url is None:
            raise BrokerError("the broker is not running")
        import urllib.request  # in-process brokers never pay for the HTTP client's imports (~10 ms)

        with urllib.request.urlopen(url + "/metrics", timeout=self.timeout) as response:
            return response.read().decode()  # type: ignore[no-any-return]

    def advance_clock(self, ms: int) -> dict[str, Any]:
        """Move the broker's manual clock (config minikafka.clock=manual) `ms` forward, running every timeout
        it passes (sessions, transactions, expiry, retention, idle connections) before returning; returns
        clock(). A broker on the system clock raises BrokerError."""
        if isinstance(self._running, _InProcessBroker):
            from minikafka.broker.control.admin_http import HttpError, advance_clock

            try:
                return self._running.call(lambda server: advance_clock(_services(server), ms), self.timeout)
            except HttpError as exc:
                raise BrokerError(str(exc)) from None
        try:
            return self._admin("POST", "/clock/advance", {"ms": ms})
        except FaultSpecError as exc:  # the admin API's 400
            raise ValueError(str(exc)) from None

    def add_crash_point(self, point: str) -> None:
        """Make the broker process die as kill -9 would when ending a transaction passes `point`:
        after_prepare_commit, after_prepare_abort, after_first_marker, before_complete_commit or
        before_complete_abort. It fires once. mode="process" only; restart() brings the broker back."""
        if not isinstance(self._running, _SubprocessBroker):
            raise BrokerError("crash points kill the broker's process: use Broker(mode='process')")
        try:
            self._admin("POST", "/crash-points", {"point": point})
        except FaultSpecError as exc:
            raise ValueError(str(exc)) from None

    def crash_points(self) -> list[str]:
        """The crash points still armed."""
        if not isinstance(self._running, _SubprocessBroker):
            return []
        return self._admin("GET", "/crash-points")["armed"]  # type: ignore[no-any-return]

    def wait_exited(self, timeout: float | None = None) -> int:
        """Wait for a subprocess broker to exit (a crash point fired); returns its exit code (-9 after
        SIGKILL). The Broker then counts as stopped; start() or restart() runs it again on the same data."""
        runner = self._running
        if not isinstance(runner, _SubprocessBroker) or runner.process is None:
            raise BrokerError("only a running subprocess broker can be waited for")
        try:
            code = runner.process.wait(self.timeout if timeout is None else timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"the broker did not exit within {timeout}s") from None
        self._running = None
        return code

    def _admin(self, method: str, path: str, body: object = None,
               http_timeout: float | None = None) -> dict[str, Any]:
        url = self.admin_url
        if url is None:
            raise BrokerError("the broker is not running, or runs without its admin listener")
        data = json.dumps(body).encode() if body is not None else None
        import urllib.error
        import urllib.request

        request = urllib.request.Request(url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=http_timeout or self.timeout) as response:
                return json.loads(response.read())  # type: ignore[no-any-return]
        except urllib.error.HTTPError as exc:
            message = json.loads(exc.read() or b"{}").get("error", str(exc))
            if exc.code == 400:
                raise FaultSpecError(message) from None
            if exc.code == 404:
                raise KeyError(message) from None
            if exc.code == 408:
                raise TimeoutError(message) from None
            raise BrokerError(f"admin {method} {path}: HTTP {exc.code}: {message}") from None

    # --- life cycle ----------------------------------------------------------------------

    def start(self) -> Broker:
        if self._running is not None:
            raise BrokerError("the broker is already running")
        first_start = self._data_dir is None
        self._prepare_dirs()
        try:
            return self._start()
        except BaseException:
            if first_start:
                self.close()  # a Broker that never ran leaves no temporary directory behind
            raise

    def _start(self) -> Broker:
        assert self._data_dir is not None and self._log_path is not None
        # After the first start the port is fixed, so clients holding the old address reconnect.
        port = self._port or self._requested_port
        runner: _InProcessBroker | _SubprocessBroker
        if self._log_sink is not None:
            self._log_sink.flush()
        self._run_log_start = self._log_path.stat().st_size if self._log_path.exists() else 0
        if self.mode == "inprocess":
            config = self._build_config(port)
            if self._log_sink is None:
                self._log_sink = open(self._log_path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
            runner = _InProcessBroker(config, self._log_sink)
        else:
            if not self._config_checked:
                self._build_config(port)  # a bad value raises ConfigError here, not as a broker exit code
            runner = _SubprocessBroker(self.config, HOST, port, self._data_dir, self._log_path,
                                       self._admin_listener, self._serve_args, _fork_policy(self._fork_server))
        self._port = runner.start(self.timeout)
        self._running = runner
        if runner.schema_registry_url is not None:
            # Like the broker's port, the registry's stays the same across restarts.
            self.config[SCHEMA_REGISTRY_PORT_KEY] = runner.schema_registry_url.rpartition(":")[2]
        return self

    def _prepare_dirs(self) -> None:
        if self._data_dir is not None:
            return
        if self._given_data_dir is None or self._given_log_file is None:
            self._workdir = make_scratch_directory()
        self._data_dir = self._given_data_dir or self._workdir_path("data")
        self._data_dir.mkdir(parents=True, exist_ok=True)
        self._log_path = self._given_log_file or self._workdir_path("broker.log")
        self._log_path.parent.mkdir(parents=True, exist_ok=True)

    def _workdir_path(self, name: str) -> Path:
        assert self._workdir is not None
        return self._workdir / name

    def _build_config(self, port: int) -> BrokerConfig:
        config = build_config(overrides=[f"{key}={value}" for key, value in self.config.items()],
                              host=HOST, port=port, data_dir=self._data_dir)
        self._config_checked = True
        return config

    def stop(self) -> int:
        """Stop cleanly, as SIGTERM stops `minikafka serve`; returns its exit code (0 for a clean stop; the
        code it died with when a subprocess ended on its own; 0 when it was not running)."""
        runner, self._running = self._running, None
        return runner.stop(self.timeout) if runner is not None else 0

    def kill(self) -> None:
        """Stop as a crash would: SIGKILL for a subprocess; in-process, see _InProcessBroker._crash."""
        runner, self._running = self._running, None
        if runner is not None:
            runner.kill(self.timeout)

    def restart(self, *, hard: bool = False) -> Broker:
        """Stop (if running) and start again on the same port with the same data; `hard` kills it instead of
        stopping it, so the start goes through crash recovery."""
        if hard:
            self.kill()
        else:
            self.stop()
        return self.start()

    def close(self) -> None:
        """Stop, and remove the temporary directory if this Broker made one."""
        try:
            self.stop()
        finally:
            if self._log_sink is not None:
                self._log_sink.close()
                self._log_sink = None
            if self._workdir is not None:
                shutil.rmtree(self._workdir, ignore_errors=True)
                self._workdir = None
                # A later start() gets fresh directories again (on the same port).
                self._data_dir = self._log_path = None

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        where = self.bootstrap_servers if self._port else "not started"
        return f"<Broker {self.mode} {where} {'running' if self.running else 'stopped'}>"
