"""Consumer groups with kafka-python against a real minikafka process."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
import threading
import time

import pytest

kafka = pytest.importorskip("kafka")
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import NewTopic  # noqa: E402
from kafka.structs import OffsetAndMetadata  # noqa: E402

from tests.support.groups import split_evenly  # noqa: E402
from tests.support.names import unique_topic  # noqa: E402
from tests.support.waiting import poll_until  # noqa: E402

pytestmark = pytest.mark.timeout(120)

POLL_MS = 2000  # see Polled


@pytest.fixture
def consumers():
    made: list[KafkaConsumer] = []
    yield made
    for c in made:
        with contextlib.suppress(Exception):
            c.close()


def create_topic(bootstrap: str, partitions: int = 4) -> str:
    topic = unique_topic("grp")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    finally:
        admin.close()
    return topic


def consumer(bootstrap: str, group: str, topic: str, **extra) -> KafkaConsumer:
    settings = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 300}
    settings.update(extra)
    return KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        metadata_max_age_ms=1000,
        **settings,
    )


def partitions(c: KafkaConsumer | Polled) -> set[int]:
    return {tp.partition for tp in c.assignment()}


class Polled:
    """A consumer polled continuously by its own thread.

    kafka-python 3.0.12 mishandles a JoinGroup/SyncGroup that completes after poll() returned: it
    either sends a fresh JoinGroup (a leader doing that in a Stable group forces a rebalance, as
    Kafka does, so short polls of several consumers from one thread rebalance forever) or never
    applies the result and leaves heartbeats disabled until the session expires. This happens
    against Kafka too; one thread per consumer with long polls (POLL_MS) avoids it.
    """

    def __init__(self, c: KafkaConsumer) -> None:
        self.consumer = c
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(timeout_ms=POLL_MS)

    def assignment(self):
        return self.consumer.assignment()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def settle(consumers: list, predicate, timeout: float = 30.0, message: str = "assignment"):
    def step():
        for c in consumers:
            if isinstance(c, KafkaConsumer):
                c.poll(timeout_ms=POLL_MS)
        return predicate()

    return poll_until(step, timeout=timeout, interval=0.05, message=message)


def test_split_rebalance_and_leave(group_broker, consumers) -> None:
    bootstrap = group_broker.bootstrap_servers
    topic = create_topic(bootstrap)
    group = unique_topic("g")
    consumers += [Polled(consumer(bootstrap, group, topic)), Polled(consumer(bootstrap, group, topic))]
    settle(consumers, lambda: split_evenly(map(partitions, consumers)), message="two consumers to split")
    consumers.append(Polled(consumer(bootstrap, group, topic)))
    settle(consumers, lambda: split_evenly(map(partitions, consumers)), message="three consumers to split")
    consumers.pop(0).close()
    settle(consumers, lambda: split_evenly(map(partitions, consumers)), message="partitions to move after a leave")


def test_committed_offsets_survive_restart(group_broker, consumers) -> None:
    bootstrap = group_broker.bootstrap_servers
    topic = create_topic(bootstrap, partitions=1)
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False)
    for i in range(10):
        producer.send(topic, f"v{i}".encode(), partition=0)
    producer.flush(15)
    producer.close()
    group = unique_topic("g")
    first = consumer(bootstrap, group, topic)
    consumers.append(first)
    settle(consumers, lambda: partitions(first) == {0})
    first.commit({TopicPartition(topic, 0): OffsetAndMetadata(6, "", -1)})
    consumers.remove(first)
    first.close()
    group_broker.restart()
    second = consumer(bootstrap, group, topic)
    consumers.append(second)
    assert second.committed(TopicPartition(topic, 0)) == 6
    got: list[int] = []

    def read_four() -> bool:
        for records in second.poll(timeout_ms=POLL_MS).values():
            got.extend(r.offset for r in records)
        return len(got) >= 4

    poll_until(read_four, timeout=30, interval=0, message="resume from the committed offset")
    assert got == [6, 7, 8, 9]


def test_static_member_rejoins_without_rebalance(group_broker, consumers) -> None:
    bootstrap = group_broker.bootstrap_servers
    topic = create_topic(bootstrap)
    group = unique_topic("g")
    a = Polled(consumer(bootstrap, group, topic, group_instance_id="static-a", session_timeout_ms=30000))
    b = Polled(consumer(bootstrap, group, topic, group_instance_id="static-b", session_timeout_ms=30000))
    consumers += [a, b]
    settle(consumers, lambda: split_evenly(map(partitions, consumers)), message="static members to split")
    before_a = partitions(a)
    generation = b.consumer._coordinator._generation.generation_id
    consumers.remove(a)
    a.close()
    again = Polled(consumer(bootstrap, group, topic, group_instance_id="static-a", session_timeout_ms=30000))
    consumers.append(again)
    settle(
        consumers, lambda: partitions(again) == before_a, message="static member to get its partitions back"
    )
    deadline = time.monotonic() + 1.0  # b keeps heartbeating; a rebalance would bump its generation
    while time.monotonic() < deadline:
        assert b.consumer._coordinator._generation.generation_id == generation
        time.sleep(0.05)
    assert partitions(b) == set(range(4)) - before_a


def test_admin_describe_list_delete(group_broker, consumers) -> None:
    bootstrap = group_broker.bootstrap_servers
    topic = create_topic(bootstrap)
    group = unique_topic("g")
    c = consumer(bootstrap, group, topic)
    consumers.append(c)
    settle(consumers, lambda: partitions(c) == {0, 1, 2, 3})
    c.commit({TopicPartition(topic, 1): OffsetAndMetadata(0, "", -1)})
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        listed = admin.list_groups()
        assert any(g["group_id"] == group for g in listed)
        stable = admin.list_groups(states_filter=["Stable"])
        assert any(g["group_id"] == group and g["group_state"] == "Stable" for g in stable)
        described = admin.describe_groups([group])[group]
        assert described["group_state"] == "Stable" and len(described["members"]) == 1
        assert admin.delete_groups([group])[group] == "NonEmptyGroupError"
        consumers.remove(c)
        c.close()
        assert admin.delete_groups([group])[group] == "OK"
        assert not any(g["group_id"] == group for g in admin.list_groups())
    finally:
        admin.close()


CHILD = textwrap.dedent("""
    import sys
    from kafka import KafkaConsumer
    c = KafkaConsumer(sys.argv[3], bootstrap_servers=sys.argv[1], group_id=sys.argv[2],
                      session_timeout_ms=3000, heartbeat_interval_ms=300, metadata_max_age_ms=1000)
    while True:
        c.poll(timeout_ms=2000)
""")


def test_killed_consumer_is_removed_after_session_timeout(group_broker, consumers) -> None:
    bootstrap = group_broker.bootstrap_servers
    topic = create_topic(bootstrap)
    group = unique_topic("g")
    child = subprocess.Popen([sys.executable, "-c", CHILD, bootstrap, group, topic])
    try:
        survivor = Polled(consumer(bootstrap, group, topic, session_timeout_ms=3000))
        consumers.append(survivor)
        settle(consumers, lambda: len(partitions(survivor)) == 2, message="survivor to share with the child")
        child.kill()
        child.wait(10)
        settle(consumers, lambda: partitions(survivor) == {0, 1, 2, 3}, message="killed member to expire")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
