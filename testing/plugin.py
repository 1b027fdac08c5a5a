"""The minikafka pytest plugin, loaded through the `pytest11` entry point wherever minikafka is installed.

Fixtures:
- `minikafka_session`: one broker for the whole session (under pytest-xdist: one per worker process, each
  on its own free port with its own temporary data directory).
- `minikafka_bootstrap`: that broker's "127.0.0.1:PORT".
- `minikafka`: a fresh broker for one test; `@pytest.mark.minikafka(config={...})` sets its config.
- `schema_registry_url`: the "http://127.0.0.1:PORT" of the schema registry (docs/schema-registry.md) of
  the test's `minikafka` broker if it uses one, else of the session broker (emptied before each test in
  in-process mode). A broker serves the registry only when a test asks for this fixture.
- `minikafka_reset`: the session broker, reset to its first-start state (`Broker.reset()`) before this test:
  a clean slate for the price of a few milliseconds, for tests that do not run concurrently with others
  on the same broker.
- `unique_topic`, `unique_group`: names no other test (or xdist worker) uses, for tests sharing the session
  broker; `unique_name("prefix")` makes more. After the test, its `unique_topic` is deleted from the session
  broker, and the fault rules it added are removed: only its own, so tests running concurrently on the
  same broker are not disturbed (a rule naming none of a test's names belongs to whichever test ends first).
Options: `--minikafka-mode inprocess|process` (ini `minikafka_mode`), and ini `minikafka_config` (lines of
`key=value`) for every broker the fixtures start; a marker's config wins over it.

A failed test's report shows the end of the log of each minikafka broker it used.

Brokers run in-process by default, on a thread with its own event loop, so async tests (pytest-asyncio)
and the broker never share a loop. The broker is imported only when a fixture is used. In process mode the
brokers are forked from a fork server (testing/forkserver.py) started with the session, so its imports
overlap with collection; MINIKAFKA_FORK_SERVER=0 spawns them instead.
"""

from __future__ import annotations

import itertools
import os
import re
import threading
import warnings
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from minikafka.testing.broker import Broker, Mode

_MARKER = "minikafka"
_REGISTRY_FIXTURE = "schema_registry_url"
_MODES = ("inprocess", "process")
# Kafka's topic name limit is 249 characters; the test's name is cut so the random suffix always fits.
_NAME_PART_MAX = 80
_names = itertools.count()
# Broker log lines shown under a failed test's report.
_LOG_LINES = 50


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("minikafka", "minikafka broker fixtures")
    group.addoption("--minikafka-mode", choices=_MODES, default=None,
                    help="run the fixtures' brokers in this process (inprocess, the default) or as subprocesses")
    parser.addini("minikafka_mode", "inprocess or process, as --minikafka-mode", default="inprocess")
    parser.addini("minikafka_config", "broker config (Kafka key names), one key=value a line, for every broker "
                  "the minikafka fixtures start", type="linelist", default=[])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "minikafka(config=None, mode=None): config (a dict of Kafka key names) and mode for the "
                   "test's own `minikafka` broker")


def pytest_sessionstart(session: pytest.Session) -> None:
    """In process mode, start the fork server now: its imports run while pytest collects. Not in the
    pytest-xdist controller, which runs no test: each worker starts its own."""
    config = session.config
    controls_xdist_workers = not hasattr(config, "workerinput") and bool(config.getoption("numprocesses", None))
    if _mode(config) != "process" or controls_xdist_workers:
        return
    from minikafka.testing import forkserver

    if forkserver.enabled_by_environment() and forkserver.supported():
        forkserver.shared_server()


def pytest_runtest_setup(item: pytest.Item) -> None:
    fixturenames = getattr(item, "fixturenames", ())
    if item.get_closest_marker(_MARKER) is not None and "minikafka" not in fixturenames:
        warnings.warn(pytest.PytestWarning(
            f"{item.nodeid}: @pytest.mark.minikafka configures the `minikafka` fixture, which this test does not "
            "use (the session broker's config comes from the minikafka_config ini option)"), stacklevel=1)


def _mode(config: pytest.Config, requested: object = None) -> Mode:
    mode = requested or config.getoption("--minikafka-mode") or config.getini("minikafka_mode") or "inprocess"
    if mode not in _MODES:
        raise pytest.UsageError(f"minikafka mode must be one of {', '.join(_MODES)}, not {mode!r}")
    return mode  # type: ignore[return-value]  # checked just above


def _ini_config(config: pytest.Config) -> dict[str, object]:
    settings: dict[str, object] = {}
    for line in config.getini("minikafka_config"):
        key, sep, value = str(line).partition("=")
        if not sep or not key.strip():
            raise pytest.UsageError(f"minikafka_config: expected key=value, got {line!r}")
        settings[key.strip()] = value.strip()
    return settings


# The brokers a failed test used, so their log can be shown in its report.
_session_broker_key = pytest.StashKey["Broker"]()
_test_broker_key = pytest.StashKey["Broker"]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    if report.failed:
        used = []
        if {"minikafka_session", "minikafka_bootstrap"} & set(getattr(item, "fixturenames", ())):
            used.append(("session", item.config.stash.get(_session_broker_key, None)))
        used.append(("test", item.stash.get(_test_broker_key, None)))
        for name, broker in used:
            if broker is not None:
                report.sections.append((f"minikafka {name} broker log (last {_LOG_LINES} lines, {broker.log_file})",
                                        broker.log_tail(_LOG_LINES)))
    return report


def _wants_schema_registry(items: object) -> bool:
    return any(_REGISTRY_FIXTURE in getattr(item, "fixturenames", ()) for item in items)  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def minikafka_session(request: pytest.FixtureRequest) -> Iterator[Broker]:
    """One broker for the session (per xdist worker); share it through unique_topic and unique_group."""
    from minikafka.testing.broker import Broker

    pytestconfig = request.config
    registry = _wants_schema_registry(request.session.items)
    with Broker(_ini_config(pytestconfig), mode=_mode(pytestconfig), schema_registry=registry) as broker:
        pytestconfig.stash[_session_broker_key] = broker
        try:
            yield broker
        finally:
            del pytestconfig.stash[_session_broker_key]


class SessionSharing:
    """What each test sharing the session broker owns, so its clean-up touches nothing else: the names
    `unique_name` made for it (topics, groups, transactional ids) while it runs. Tests may run
    concurrently (threads, or async tests interleaved by a plugin), hence the lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owners: dict[str, object] = {}

    def own(self, test: object, name: str) -> None:
        with self._lock:
            self._owners[name] = test

    def release(self, test: object) -> None:
        with self._lock:
            self._owners = {name: owner for name, owner in self._owners.items() if owner is not test}

    def owned_by_another(self, test: object, names: Iterable[object]) -> bool:
        with self._lock:
            return any(self._owners.get(name, test) is not test for name in names if isinstance(name, str))

    @staticmethod
    def fault_watermark(broker: Broker) -> int:
        """The newest rule's id: the rules a test adds from now on have higher ones."""
        return max((rule["id"] for rule in broker.faults()), default=0)

    def remove_faults_of(self, test: object, broker: Broker, watermark: int) -> int:
        """Remove the rules added since `watermark` that name no topic, group or transactional id another
        running test owns; returns how many."""
        removed = 0
        for rule in broker.faults():
            if rule["id"] > watermark and not self.owned_by_another(
                    test, (rule["topic"], rule["group_id"], rule["transactional_id"])):
                removed += broker.remove_fault(rule["id"])
        return removed


_sharing = SessionSharing()


def _running_session_broker(request: pytest.FixtureRequest) -> Broker | None:
    if not {"minikafka_session", "minikafka_bootstrap", "minikafka_reset"} & set(request.fixturenames):
        return None
    broker = request.config.stash.get(_session_broker_key, None)
    # `alive` too: a session broker a crash point ended has nothing left to clean up.
    return broker if broker is not None and broker.running and broker.alive else None


@pytest.fixture(autouse=True)
def _minikafka_session_faults_cleared(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fault rules a test adds to the shared session broker end with that test, not in the next one; the
    rules of tests still running stay (SessionSharing)."""
    broker = _running_session_broker(request)
    watermark = _sharing.fault_watermark(broker) if broker is not None else 0
    yield
    broker = _running_session_broker(request)
    if broker is not None:
        _sharing.remove_faults_of(request.node, broker, watermark)


@pytest.fixture
def minikafka_bootstrap(minikafka_session: Broker) -> str:
    """The session broker's bootstrap servers, "127.0.0.1:PORT"."""
    return minikafka_session.bootstrap_servers


@pytest.fixture
def minikafka_reset(minikafka_session: Broker) -> Broker:
    """The session broker, reset before this test: no topic, group, transaction, ACL, dynamic config or
    fault rule left from earlier tests (Broker.reset()). Connections other fixtures keep open across tests
    see what docs/testing.md, "Reset between tests", describes."""
    minikafka_session.reset()
    return minikafka_session


@pytest.fixture
def minikafka(request: pytest.FixtureRequest) -> Iterator[Broker]:
    """A fresh broker for this test, configured by @pytest.mark.minikafka(config={...}, mode=...)."""
    from minikafka.testing.broker import Broker

    settings = _ini_config(request.config)
    mode_override: object = None
    marker = request.node.get_closest_marker(_MARKER)
    if marker is not None:
        marker_config = marker.kwargs.get("config", marker.args[0] if marker.args else None) or {}
        if not isinstance(marker_config, dict):
            raise pytest.UsageError(f"@pytest.mark.minikafka(config=...) takes a dict, not {marker_config!r}")
        settings.update(marker_config)
        mode_override = marker.kwargs.get("mode")
    registry = _REGISTRY_FIXTURE in request.fixturenames
    with Broker(settings, mode=_mode(request.config, mode_override), schema_registry=registry) as broker:
        request.node.stash[_test_broker_key] = broker
        yield broker


@pytest.fixture
def schema_registry_url(request: pytest.FixtureRequest) -> str:
    """The schema registry of the test's `minikafka` broker, or of the session broker (emptied first when it
    runs in this process; in process mode, use unique subject names)."""
    if "minikafka" in request.fixturenames:
        broker = request.getfixturevalue("minikafka")
    else:
        broker = request.getfixturevalue("minikafka_session")
        if broker.mode == "inprocess":
            broker.reset_schema_registry()
    url = broker.schema_registry_url
    assert url is not None, "the broker was started without its schema registry"
    return str(url)


def _slug(text: str) -> str:
    """Only characters valid in a topic name, and no dots (Kafka warns when '.' and '_' could collide)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")[:_NAME_PART_MAX] or "test"


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> Iterator[Callable[[str], str]]:
    """`unique_name("orders")` -> "orders-test_x-gw1-3-5f0c2a9e": test name, xdist worker, a counter, randomness."""
    test = _slug(request.node.name)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")

    def make(prefix: str) -> str:
        name = f"{_slug(prefix)}-{test}-{worker}-{next(_names)}-{os.urandom(4).hex()}"
        _sharing.own(request.node, name)
        return name

    yield make
    _sharing.release(request.node)


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest, unique_name: Callable[[str], str]) -> Iterator[str]:
    """A topic name no other test uses, so tests can share the session broker; the topic is deleted from the
    session broker after the test (that topic alone)."""
    name = unique_name("topic")
    yield name
    broker = _running_session_broker(request)
    if broker is not None:
        broker.delete_topic(name)


@pytest.fixture
def unique_group(unique_name: Callable[[str], str]) -> str:
    """A consumer group id no other test uses."""
    return unique_name("group")
