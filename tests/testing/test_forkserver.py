"""Process-mode brokers forked from the fork server (testing/forkserver.py) are `minikafka serve` processes as
spawned ones are: the same descriptors and threads, their own log, exit codes and signals, the caller's
environment; the server and its children end with the test process; MINIKAFKA_FORK_SERVER=0 spawns."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from minikafka.testing import Broker, BrokerError, forkserver, scratch
from minikafka.testing.forkserver import supported

pytestmark = pytest.mark.skipif(not supported(), reason="the fork server needs Linux (pidfd, prctl)")

_DEADLINE_S = 20.0


@pytest.fixture(autouse=True)
def _server_ready() -> None:
    """A start is spawned while the fork server still imports: these tests are about forked ones."""
    forkserver.shared_server().wait_ready()


def _parent_pid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


# Inode numbers, and the temporary directory a Broker made: wherever scratch put it, its name differs per Broker.
_NUMBERED = re.compile("|".join([r"\[\d+\]", *(re.escape(root) + "/[^/]+"
                                                for root in (scratch.MEMORY_ROOT, tempfile.gettempdir()))]))


def _shape(pid: int) -> tuple[list[str], int]:
    """What a process holds, without numbers that differ between runs: its descriptors' kinds and paths
    (a temporary directory's name cut off) and how many threads it runs."""
    kinds = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with_ids = os.readlink(f"/proc/{pid}/fd/{fd}")
        kinds.append(re.sub(_NUMBERED, "", with_ids))
    return sorted(kinds), len(os.listdir(f"/proc/{pid}/task"))


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _wait_until(condition: object, what: str) -> None:
    deadline = time.monotonic() + _DEADLINE_S
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {_DEADLINE_S} s: {what}")
        time.sleep(0.01)


def test_a_forked_broker_holds_what_a_spawned_one_holds() -> None:
    with Broker(mode="process", fork_server=True) as forked, Broker(mode="process", fork_server=False) as spawned:
        assert _parent_pid(spawned.pid) == os.getpid()
        assert _parent_pid(forked.pid) not in (os.getpid(), 1)  # the fork server's child
        assert _shape(forked.pid) == _shape(spawned.pid)


def _children_of(pid: int) -> set[int]:
    children = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(FileNotFoundError, IndexError):
                if _parent_pid(int(entry)) == pid:
                    children.add(int(entry))
    return children


def _holds_a_socket(pid: int) -> bool:
    with contextlib.suppress(FileNotFoundError):
        return any(os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:") for fd in os.listdir(f"/proc/{pid}/fd"))
    return False


def _spare_beside(broker: Broker) -> int:
    """The one spare child the fork server forks, once its codecs are compiled, next to `broker`: the child
    that holds no socket (every broker, this worker's other ones included, listens on one)."""
    forkserver.shared_server().prepare()
    server_pid = _parent_pid(broker.pid)
    spares: set[int] = set()

    def spare_forked() -> bool:
        spares.update(pid for pid in _children_of(server_pid) if not _gone(pid) and not _holds_a_socket(pid))
        return bool(spares)

    _wait_until(spare_forked, "the server forks a spare child")
    (spare,) = spares
    return spare


def test_a_start_takes_the_spare_child_forked_while_the_server_was_idle() -> None:
    """Once its codecs are compiled the server forks the next start's child ahead of it (off the start's
    path); that child becomes a broker like any other, with what a spawned one holds."""
    with Broker(mode="process") as first:
        spare = _spare_beside(first)
        with Broker(mode="process") as second, Broker(mode="process", fork_server=False) as spawned:
            assert second.pid == spare
            assert _shape(second.pid) == _shape(spawned.pid)
            assert second.logs().count("broker ready") == 1


def _state_and_minor_faults(pid: int) -> tuple[str, int]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return fields[0], int(fields[7])


def _done_copying(spare: int) -> Callable[[], bool]:
    """A condition for `_wait_until`: the spare is asleep (in its read of the request pipe) and has taken no
    fault since the previous look."""
    looks: list[tuple[str, int]] = []

    def settled() -> bool:
        look = _state_and_minor_faults(spare)
        unchanged = bool(looks) and look[0] == "S" and looks[-1] == look
        looks.append(look)
        return unchanged

    return settled


def test_a_spare_copies_the_pages_a_start_writes_before_its_start() -> None:
    """The server's scout broker finds the pages of the server's memory a start writes; each spare copies
    them before it waits, so its start takes few copy-on-write faults (about 170 against 1,900 here)."""
    pages = forkserver.shared_server().prepare()
    assert pages > 0, "the scout found no page a start writes"
    with Broker(mode="process") as first:
        spare = _spare_beside(first)
        _wait_until(_done_copying(spare), "the spare copies the pages ahead")
        _, before = _state_and_minor_faults(spare)
        with Broker(mode="process") as second:
            assert second.pid == spare
            faults_in_start = _state_and_minor_faults(second.pid)[1] - before
            assert second.logs().count("broker ready") == 1
    assert faults_in_start < pages // 4, (faults_in_start, pages)


def test_a_spare_killed_while_it_waited_is_replaced_by_a_fork() -> None:
    with Broker(mode="process") as first:
        spare = _spare_beside(first)
        os.kill(spare, signal.SIGKILL)
        _wait_until(lambda: _gone(spare), "the spare dies")
        with Broker(mode="process") as second:
            assert second.pid != spare
            assert _parent_pid(second.pid) == _parent_pid(first.pid)
            assert second.logs().count("broker ready") == 1


def test_siblings_are_separate_brokers_and_stop_cleanly() -> None:
    with Broker(mode="process") as first, Broker(mode="process") as second:
        assert first.pid != second.pid and first.port != second.port
        first.add_fault("Produce", "NOT_LEADER_OR_FOLLOWER")
        assert second.faults() == []
        assert first.stop() == 0
        assert second.alive
        assert "broker ready" in first.run_log() and first.run_log() not in second.logs()
        assert (first.data_dir / ".kafka_cleanshutdown").exists()


def test_kill_is_sigkill_and_the_exit_code_reaches_the_caller() -> None:
    with Broker(mode="process") as broker:
        pid = broker.pid
        os.kill(pid, 9)
        assert broker.wait_exited() == -9
        assert not (broker.data_dir / ".kafka_cleanshutdown").exists()
        broker.start()
        assert broker.pid != pid and broker.alive


def test_a_child_that_exits_at_start_reports_its_exit_code() -> None:
    broker = Broker(mode="process", serve_args=("--log-level", "loud"))
    with pytest.raises(BrokerError, match="exited with 2"):
        broker.start()


def test_the_callers_environment_and_directory_reach_the_child(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    monkeypatch.setenv("MINIKAFKA_NUM_PARTITIONS", "5")  # config from the environment, as Kafka's images read it
    monkeypatch.chdir(tmp_path)
    with Broker(mode="process", data_dir="relative-data", log_file="broker.log") as broker:
        assert (tmp_path / "relative-data" / "meta.properties").exists()
        assert Path(f"/proc/{broker.pid}/cwd").resolve() == tmp_path.resolve()
        ready = next(json.loads(line) for line in broker.run_log().splitlines() if '"broker ready"' in line)
        assert ready["port"] == broker.port
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("defaults")])["defaults"].result(15)
        assert len(admin.list_topics("defaults", timeout=15).topics["defaults"].partitions) == 5


def test_the_environment_variable_turns_forking_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINIKAFKA_FORK_SERVER", "0")
    with Broker(mode="process") as broker:
        assert _parent_pid(broker.pid) == os.getpid()


_ORPHAN_CHECK = """
import os, sys
from minikafka.testing import Broker
broker = Broker(mode="process", fork_server=True).start()
with open(f"/proc/{broker.pid}/stat") as stat:
    server = int(stat.read().rsplit(")", 1)[1].split()[1])
print(server, broker.pid, flush=True)
sys.stdin.read()  # until killed
"""


def test_the_server_and_its_children_end_with_the_test_process() -> None:
    caller = subprocess.Popen([sys.executable, "-c", _ORPHAN_CHECK], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert caller.stdout is not None
        server, broker = (int(pid) for pid in caller.stdout.readline().split())
        assert not _gone(server) and not _gone(broker)
    finally:
        caller.kill()  # no atexit, no clean-up: the server sees its pipe close
        caller.wait()
    _wait_until(lambda: _gone(server), "the fork server exits")
    _wait_until(lambda: _gone(broker), "its broker dies")


def test_a_changed_interpreter_environment_is_honoured_by_spawning(monkeypatch: pytest.MonkeyPatch) -> None:
    """PYTHONPATH, PYTHONMALLOC, LD_PRELOAD... act before `main` runs, so a forked child could not honour a
    change of them since the server started: that broker is spawned."""
    with Broker(mode="process") as before:
        assert _parent_pid(before.pid) != os.getpid()
    monkeypatch.setenv("PYTHONMALLOC", "malloc")
    with Broker(mode="process") as broker:
        assert _parent_pid(broker.pid) == os.getpid()
        assert "PYTHONMALLOC=malloc" in Path(f"/proc/{broker.pid}/environ").read_text().split("\0")


def test_standard_output_reaches_the_log_as_a_spawned_brokers_does() -> None:
    """`--trace -` writes to standard output: a forked broker's lines land in its log, flushed at its exit
    at the latest, as a spawned one's."""
    from confluent_kafka.admin import AdminClient

    for fork in (True, False):
        with Broker(mode="process", serve_args=("--trace", "-"), fork_server=fork) as broker:
            AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=15)
            assert broker.stop() == 0
            assert '"Metadata"' in broker.logs()


def test_the_server_compiles_every_accepted_version_newest_first() -> None:
    """What clients send is often older than the newest (librdkafka 2.16: Produce v10, Fetch v16, ...): the
    server compiles every version a handler accepts, each API's newest first, then every API's next older
    one, so a child finds the codecs of any client compiled."""
    from minikafka.broker.handlers import all_handler_modules

    newest = forkserver._codecs_to_prepare()
    older = forkserver._older_codecs_to_prepare()
    accepted = {(int(module.API_KEY), version) for module in all_handler_modules()
                for version in range(module.VERSIONS.min, module.VERSIONS.max + 1)}
    assert len(set(newest) | set(older)) == len(newest) + len(older)  # none twice
    assert accepted <= set(newest) | set(older)
    depth = {pair: max_version - pair[1] for module in all_handler_modules()
             for pair in older if pair[0] == int(module.API_KEY) for max_version in [module.VERSIONS.max]}
    assert [depth[pair] for pair in older] == sorted(depth[pair] for pair in older)
    assert (0, 10) in older and (1, 16) in older  # librdkafka 2.16's Produce and Fetch


_FIRST_STARTS = """
import os
from minikafka.testing import Broker, forkserver
def parent(pid):
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])
with Broker(mode="process") as first:  # the server has just been started: still importing
    print(parent(first.pid) == os.getpid(), flush=True)
forkserver.shared_server().wait_ready()
with Broker(mode="process") as later, Broker(mode="process", fork_server=True) as asked:
    print(parent(later.pid) != os.getpid(), parent(asked.pid) == parent(later.pid) != os.getpid(), flush=True)
"""


def test_a_start_while_the_server_imports_is_spawned_and_later_ones_are_forked() -> None:
    """A session's first process-mode broker does not wait for the server's imports (a lone broker would
    pay them for nothing); once the server is ready, starts fork. `fork_server=True` always forks."""
    result = subprocess.run([sys.executable, "-c", _FIRST_STARTS], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["True", "True", "True"]
