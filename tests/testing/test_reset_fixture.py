"""The plugin's clean slates: `minikafka_reset` (the session broker reset before each test), `unique_topic`
deleting its own topic after its test, and the clean-up of two tests sharing one broker at the same time
touching only what each owns."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from minikafka.testing import Broker
from minikafka.testing.plugin import SessionSharing

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.e2e

DEADLINE_S = 30.0

RESET_TESTS = '''
from confluent_kafka import Consumer, Producer

def test_first_leaves_things_behind(minikafka_reset):
    bootstrap = minikafka_reset.bootstrap_servers
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce("left-behind", b"v")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "left-behind-group",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["left-behind"])
    assert consumer.poll(30).value() == b"v"
    consumer.commit(asynchronous=False)
    consumer.close()
    minikafka_reset.add_fault("Metadata", "NOT_COORDINATOR", count=None, topic="never-used")

def test_second_starts_clean(minikafka_reset, minikafka_session):
    assert minikafka_reset is minikafka_session
    state = minikafka_reset.state()
    assert (state["topics"], state["groups"]) == ({}, {})

def test_own_topic_is_deleted_after_its_test(minikafka_session, unique_topic):
    producer = Producer({"bootstrap.servers": minikafka_session.bootstrap_servers})
    producer.produce(unique_topic, b"v")
    assert producer.flush(30) == 0
    assert unique_topic in minikafka_session.state()["topics"]
    minikafka_session.add_fault("Metadata", "NOT_COORDINATOR", count=None, topic="never-used")
    with open("own-topic.txt", "w") as out:
        out.write(unique_topic)

def test_after_it_the_topic_is_gone(minikafka_session):
    with open("own-topic.txt") as seen:
        assert seen.read() not in minikafka_session.state()["topics"]
    assert minikafka_session.faults() == []
'''


@pytest.mark.parametrize("mode", ["inprocess", "process"])
def test_reset_fixture_and_unique_topic_clean_up(pytester: pytest.Pytester, mode: str) -> None:
    pytester.makepyfile(test_user=RESET_TESTS)
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", f"--minikafka-mode={mode}",
                                           timeout=240)
    result.assert_outcomes(passed=4)


@pytest.fixture(scope="module")
def shared() -> Iterator[Broker]:
    with Broker() as broker:
        yield broker


def _produce(broker: Broker, topic: str) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce(topic, b"v")
    assert producer.flush(DEADLINE_S) == 0


def test_concurrent_tests_clean_up_only_their_own(shared: Broker) -> None:
    """Two users of one broker, as two tests running at once: each on its own thread, the first ends (its
    clean-up: deleting its unique topic, removing the fault rules it added) while the second is still
    running, whose topic, data and rules must be left as they were."""
    sharing = SessionSharing()
    first, second = object(), object()
    second_started = threading.Event()
    first_cleaned = threading.Event()
    outcome: dict[str, object] = {}

    def first_test() -> None:
        watermark = sharing.fault_watermark(shared)
        sharing.own(first, "topic-first")
        second_started.wait(DEADLINE_S)
        _produce(shared, "topic-first")
        shared.add_fault("Produce", "NOT_LEADER_OR_FOLLOWER", count=None, topic="topic-first")
        shared.add_fault("Metadata", "NOT_COORDINATOR", count=None, topic="never-used")
        # Its end: unique_topic's clean-up, then the fault rules'.
        shared.delete_topic("topic-first")
        sharing.release(first)
        outcome["first removed"] = sharing.remove_faults_of(first, shared, watermark)
        first_cleaned.set()

    def second_test() -> None:
        watermark = sharing.fault_watermark(shared)
        sharing.own(second, "topic-second")
        sharing.own(second, "group-second")
        _produce(shared, "topic-second")
        shared.add_fault("Fetch", "NOT_LEADER_OR_FOLLOWER", count=None, topic="topic-second")
        shared.add_fault("JoinGroup", "COORDINATOR_NOT_AVAILABLE", count=None, group_id="group-second")
        second_started.set()
        first_cleaned.wait(DEADLINE_S)
        outcome["second saw"] = (sorted(shared.state()["topics"]),
                                 [(rule["topic"], rule["group_id"]) for rule in shared.faults()])
        shared.delete_topic("topic-second")
        sharing.release(second)
        outcome["second removed"] = sharing.remove_faults_of(second, shared, watermark)

    threads = [threading.Thread(target=first_test), threading.Thread(target=second_test)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE_S * 2)
    assert outcome["first removed"] == 2
    assert outcome["second saw"] == (["topic-second"], [("topic-second", None), (None, "group-second")])
    assert outcome["second removed"] == 2
    assert shared.faults() == []
    assert shared.state()["topics"] == {}
