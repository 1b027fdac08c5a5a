"""The pytest plugin, as a user meets it: pytest (run by pytester in a subprocess) loads it from the entry
point, and a test file uses its fixtures and marker with real clients, alone, under `-n 2` and in async tests."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.e2e

# Each test records the names and ports it saw, one line per test, so the run as a whole can be checked
# for collisions across tests and xdist workers.
USER_TESTS = '''
import json
import os
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

def record(**seen):
    with open(os.environ["SEEN_FILE"], "a") as out:
        out.write(json.dumps(seen) + "\\n")

def round_trip(bootstrap, topic, group):
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b"hello")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    message = consumer.poll(30)
    consumer.close()
    assert message is not None and message.error() is None and message.value() == b"hello"

@pytest.mark.parametrize("n", range(4))
def test_session_broker(n, minikafka_bootstrap, minikafka_session, unique_topic, unique_group, unique_name):
    assert minikafka_bootstrap == minikafka_session.bootstrap_servers
    assert unique_topic != unique_group and unique_name("x") != unique_name("x")
    round_trip(minikafka_bootstrap, unique_topic, unique_group)
    record(kind="session", port=minikafka_session.port, topic=unique_topic, group=unique_group,
           worker=os.environ.get("PYTEST_XDIST_WORKER", "main"))

@pytest.mark.minikafka(config={"num.partitions": 3})
def test_marker_configures_own_broker(minikafka, minikafka_session, unique_topic, unique_group):
    assert minikafka.port != minikafka_session.port
    round_trip(minikafka.bootstrap_servers, unique_topic, unique_group)
    metadata = AdminClient({"bootstrap.servers": minikafka.bootstrap_servers}).list_topics(unique_topic, timeout=10)
    assert len(metadata.topics[unique_topic].partitions) == 3
    record(kind="own", port=minikafka.port, topic=unique_topic, group=unique_group,
           worker=os.environ.get("PYTEST_XDIST_WORKER", "main"))

def test_own_broker_has_default_config(minikafka, unique_topic):
    producer = Producer({"bootstrap.servers": minikafka.bootstrap_servers})
    producer.produce(unique_topic, b"v")
    assert producer.flush(30) == 0
    metadata = AdminClient({"bootstrap.servers": minikafka.bootstrap_servers}).list_topics(unique_topic, timeout=10)
    assert len(metadata.topics[unique_topic].partitions) == 1
'''

ASYNC_USER_TEST = '''
import asyncio
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

@pytest.mark.asyncio
async def test_async_round_trip(minikafka_bootstrap, unique_topic, unique_group):
    producer = AIOKafkaProducer(bootstrap_servers=minikafka_bootstrap)
    await producer.start()
    await producer.send_and_wait(unique_topic, b"async")
    await producer.stop()
    consumer = AIOKafkaConsumer(unique_topic, bootstrap_servers=minikafka_bootstrap, group_id=unique_group,
                                auto_offset_reset="earliest")
    await consumer.start()
    try:
        message = await asyncio.wait_for(consumer.getone(), 30)
    finally:
        await consumer.stop()
    assert message.value == b"async"

@pytest.mark.asyncio
@pytest.mark.minikafka(config={"num.partitions": 2})
async def test_async_with_own_broker(minikafka, unique_topic):
    producer = AIOKafkaProducer(bootstrap_servers=minikafka.bootstrap_servers)
    await producer.start()
    try:
        await producer.send_and_wait(unique_topic, b"v")
        assert len(await producer.partitions_for(unique_topic)) == 2
    finally:
        await producer.stop()
'''


def _require_xdist() -> None:
    if importlib.util.find_spec("xdist") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("pytest-xdist is not installed (it is in the test extra)")
        pytest.skip("pytest-xdist is not installed")


def _run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, list[dict[str, object]]]:
    pytester.makepyfile(test_user=USER_TESTS)
    seen_file = pytester.path / "seen.jsonl"
    pytester.makeini("[pytest]\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SEEN_FILE", str(seen_file))
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=240)
    seen = [json.loads(line) for line in seen_file.read_text().splitlines()] if seen_file.exists() else []
    return result, seen


def _check_names(seen: list[dict[str, object]]) -> None:
    topics = [entry["topic"] for entry in seen]
    groups = [entry["group"] for entry in seen]
    assert len(set(topics)) == len(topics) == 5
    assert len(set(groups)) == len(groups) == 5


@pytest.mark.parametrize("mode", ["inprocess", "process"])
def test_fixtures_and_marker(pytester: pytest.Pytester, mode: str) -> None:
    result, seen = _run(pytester, f"--minikafka-mode={mode}")
    result.assert_outcomes(passed=6)
    _check_names(seen)
    session_ports = {entry["port"] for entry in seen if entry["kind"] == "session"}
    assert len(session_ports) == 1, "one session broker for the whole run"


def test_under_xdist_each_worker_has_its_own_session_broker(pytester: pytest.Pytester) -> None:
    _require_xdist()
    result, seen = _run(pytester, "-n", "2")
    result.assert_outcomes(passed=6)
    _check_names(seen)
    workers = {entry["worker"] for entry in seen}
    assert workers <= {"gw0", "gw1"}
    ports_by_worker = {
        worker: {entry["port"] for entry in seen if entry["kind"] == "session" and entry["worker"] == worker}
        for worker in workers
    }
    assert all(len(ports) == 1 for ports in ports_by_worker.values() if ports)
    session_ports = [ports for ports in ports_by_worker.values() if ports]
    if len(session_ports) == 2:  # xdist may hand every session test to one worker
        assert session_ports[0] != session_ports[1]


def test_async_tests_with_pytest_asyncio(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_async_user=ASYNC_USER_TEST)
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=240)
    result.assert_outcomes(passed=2)


def test_marker_without_the_fixture_warns(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_warn='''
import pytest

@pytest.mark.minikafka(config={"num.partitions": 3})
def test_uses_session_broker(minikafka_bootstrap):
    assert minikafka_bootstrap.startswith("127.0.0.1:")
''')
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=240)
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*@pytest.mark.minikafka configures the `minikafka` fixture*"])


def test_ini_config_applies_to_the_session_broker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ini='''
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

def test_session_broker_uses_ini_config(minikafka_bootstrap, unique_topic):
    producer = Producer({"bootstrap.servers": minikafka_bootstrap})
    producer.produce(unique_topic, b"v")
    assert producer.flush(30) == 0
    metadata = AdminClient({"bootstrap.servers": minikafka_bootstrap}).list_topics(unique_topic, timeout=10)
    assert len(metadata.topics[unique_topic].partitions) == 4
''')
    pytester.makeini("[pytest]\nminikafka_config =\n    num.partitions=4\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=240)
    result.assert_outcomes(passed=1)


def test_plugin_is_registered_from_the_entry_point(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest_subprocess("--fixtures", "-p", "no:cacheprovider", timeout=120)
    result.stdout.fnmatch_lines(["*minikafka_session*", "*unique_topic*"])


def test_a_failed_test_shows_the_broker_logs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fails='''
def test_fails(minikafka, minikafka_bootstrap):
    assert minikafka.bootstrap_servers == minikafka_bootstrap, "two different brokers"
''')
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=240)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*minikafka session broker log (last 50 lines*", "*broker ready*",
                                 "*minikafka test broker log (last 50 lines*", "*broker ready*"])


def test_faults_added_to_the_session_broker_end_with_their_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fault_scope='''
def test_adds_a_lasting_fault(minikafka_session):
    minikafka_session.add_fault(api="Metadata", error="NOT_COORDINATOR", count=None, topic="never-used")
    assert len(minikafka_session.faults()) == 1

def test_runs_after_and_sees_none(minikafka_session):
    assert minikafka_session.faults() == []
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", timeout=240)
    result.assert_outcomes(passed=2)


@pytest.mark.parametrize("mode", ["inprocess", "process"])
def test_schema_registry_url_fixture(pytester: pytest.Pytester, mode: str) -> None:
    pytester.makepyfile(test_registry='''
import json
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

RECORD = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})

def test_session_registry(schema_registry_url, minikafka_session, unique_name):
    assert schema_registry_url == minikafka_session.schema_registry_url
    client = SchemaRegistryClient({"url": schema_registry_url})
    client.register_schema(unique_name("s"), Schema(RECORD, "AVRO"))

def test_session_registry_again(schema_registry_url, minikafka_session):
    subjects = SchemaRegistryClient({"url": schema_registry_url}).get_subjects()
    assert subjects == [] if minikafka_session.mode == "inprocess" else len(subjects) == 1

def test_own_brokers_registry(minikafka, schema_registry_url):
    assert schema_registry_url == minikafka.schema_registry_url
    assert SchemaRegistryClient({"url": schema_registry_url}).get_subjects() == []

def test_without_the_fixture_no_registry(minikafka):
    assert minikafka.schema_registry_url is None
''')
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--minikafka-mode={mode}", timeout=240)
    result.assert_outcomes(passed=4)


def test_process_mode_starts_the_fork_server_with_the_session_and_forks_from_it(pytester: pytest.Pytester) -> None:
    from minikafka.testing.forkserver import supported

    if not supported():
        pytest.skip("the fork server needs Linux")
    pytester.makepyfile(test_forked="""
from pathlib import Path

from minikafka.testing import forkserver


def test_server_started_before_any_fixture():
    assert forkserver._server is not None
    # A start while the server still imports is spawned: the next test's broker is to be forked.
    forkserver._server.wait_ready()


def test_own_broker_is_a_child_of_the_server(minikafka):
    stat = Path(f"/proc/{minikafka.pid}/stat").read_text()
    assert int(stat.rsplit(")", 1)[1].split()[1]) == forkserver._server._process.pid
""")
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--minikafka-mode=process", timeout=240)
    result.assert_outcomes(passed=2)


def test_process_mode_under_xdist_forks_in_each_worker(pytester: pytest.Pytester) -> None:
    _require_xdist()
    result, seen = _run(pytester, "-n", "2", "--minikafka-mode=process")
    result.assert_outcomes(passed=6)
    _check_names(seen)
