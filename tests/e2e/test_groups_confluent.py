"""Consumer groups with confluent-kafka (librdkafka) against a real minikafka process."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from tests.support.clients import new_topic  # noqa: E402
from tests.support.groups import split_evenly  # noqa: E402
from tests.support.names import unique_topic  # noqa: E402
from tests.support.produce import SEND_AT_ONCE, numbered, produce  # noqa: E402
from tests.support.waiting import poll_until  # noqa: E402

pytestmark = pytest.mark.timeout(120)

class Member:
    """A consumer plus what its rebalance callbacks saw."""

    def __init__(self, bootstrap: str, group: str, topic: str, **extra: object) -> None:
        self.assigned: set[int] = set()
        self.assign_calls = 0
        self.revoked: list[set[int]] = []
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000,
        }
        config.update(extra)
        self.cooperative = config.get("partition.assignment.strategy") == "cooperative-sticky"
        self.consumer = Consumer(config)
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        self.messages: list[tuple[int, int]] = []

    def _on_assign(self, consumer, partitions) -> None:
        self.assign_calls += 1
        self.assigned |= {p.partition for p in partitions}

    def _on_revoke(self, consumer, partitions) -> None:
        lost = {p.partition for p in partitions}
        self.revoked.append(lost)
        self.assigned -= lost

    def poll(self, timeout: float = 0.05) -> None:
        msg = self.consumer.poll(timeout)
        if msg is not None and msg.error() is None:
            self.messages.append((msg.partition(), msg.offset()))

    def close(self) -> None:
        self.consumer.close()


def settle(members: list[Member], predicate, timeout: float = 30.0, message: str = "assignment") -> None:
    def step() -> bool:
        for member in members:
            member.poll()
        return predicate()

    poll_until(step, timeout=timeout, interval=0, message=message)


@pytest.fixture
def members() -> Iterator[list[Member]]:
    made: list[Member] = []
    yield made
    for member in made:
        with contextlib.suppress(Exception):
            member.close()


def test_split_rebalance_and_leave(group_broker, members) -> None:
    bootstrap = group_broker.bootstrap_servers
    topic = new_topic(bootstrap, 4, "grp")
    group = unique_topic("g")
    members += [Member(bootstrap, group, topic), Member(bootstrap, group, topic)]
    settle(members, lambda: split_evenly(m.assigned for m in members), message="two consumers to split 4 partitions")
    members.append(Member(bootstrap, group, topic))
    settle(members, lambda: split_evenly(m.assigned for m in members), message="three consumers to split 4 partitions")
    leaving = members.pop(0)
    leaving.close()
    settle(members, lambda: split_evenly(m.assigned for m in members), message="partitions of the leaver to move")


def test_committed_offsets_survive_restart(group_broker, members) -> None:
    bootstrap = group_broker.bootstrap_servers
    topic = new_topic(bootstrap, 1, "grp")
    produce(bootstrap, topic, numbered(10), keys=numbered(10, "k"), partition=0,
            **{"enable.idempotence": False, **SEND_AT_ONCE})
    group = unique_topic("g")
    first = Member(bootstrap, group, topic)
    members.append(first)
    settle(members, lambda: len(first.messages) >= 10, message="first consumer to read 10 messages")
    first.consumer.commit(offsets=[TopicPartition(topic, 0, 6)], asynchronous=False)
    members.remove(first)
    first.close()
    group_broker.restart()
    second = Member(bootstrap, group, topic)
    members.append(second)
    committed = second.consumer.committed([TopicPartition(topic, 0)], timeout=15)
    assert committed[0].offset == 6
    settle(members, lambda: len(second.messages) >= 4, message="second consumer to resume")
    assert second.messages[0] == (0, 6)
    assert [offset for _, offset in second.messages] == [6, 7, 8, 9]


def test_cooperative_sticky(group_broker, members) -> None:
    bootstrap = group_broker.bootstrap_servers
    topic = new_topic(bootstrap, 4, "grp")
    group = unique_topic("g")
    strategy = {"partition.assignment.strategy": "cooperative-sticky"}
    first = Member(bootstrap, group, topic, **strategy)
    members.append(first)
    settle(members, lambda: first.assigned == {0, 1, 2, 3}, message="first consumer to own everything")
    second = Member(bootstrap, group, topic, **strategy)
    members.append(second)
    settle(members, lambda: split_evenly(m.assigned for m in members), message="cooperative rebalance")
    # Incremental: the first consumer gave up only what moved, never its whole assignment.
    assert first.revoked and all(len(r) < 4 for r in first.revoked)
    assert first.assigned <= {0, 1, 2, 3} and len(first.assigned) == 2


def test_static_member_rejoins_without_rebalance(group_broker, members) -> None:
    bootstrap = group_broker.bootstrap_servers
    topic = new_topic(bootstrap, 4, "grp")
    group = unique_topic("g")
    a = Member(bootstrap, group, topic, **{"group.instance.id": "static-a", "session.timeout.ms": 30000})
    b = Member(bootstrap, group, topic, **{"group.instance.id": "static-b", "session.timeout.ms": 30000})
    members += [a, b]
    settle(members, lambda: split_evenly(m.assigned for m in members), message="static members to split")
    before_a, b_calls, b_revokes = set(a.assigned), b.assign_calls, len(b.revoked)
    members.remove(a)
    a.close()  # static members do not send LeaveGroup
    again = Member(bootstrap, group, topic, **{"group.instance.id": "static-a", "session.timeout.ms": 30000})
    members.append(again)
    settle(members, lambda: again.assigned == before_a, message="static member to get its partitions back")
    for _ in range(30):  # b keeps polling: no rebalance may reach it
        b.poll(0.05)
        again.poll(0.05)
    assert b.assign_calls == b_calls and len(b.revoked) == b_revokes


def test_admin_describe_list_delete(group_broker, members) -> None:
    bootstrap = group_broker.bootstrap_servers
    topic = new_topic(bootstrap, 4, "grp")
    group = unique_topic("g")
    member = Member(bootstrap, group, topic)
    members.append(member)
    settle(members, lambda: member.assigned == {0, 1, 2, 3})
    member.consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups().result(15)
    states = {g.group_id: g.state for g in listed.valid}
    assert states[group].name == "STABLE"
    description = admin.describe_consumer_groups([group])[group].result(15)
    assert description.state.name == "STABLE" and len(description.members) == 1
    assigned = {tp.partition for tp in description.members[0].assignment.topic_partitions}
    assert assigned == {0, 1, 2, 3}
    with pytest.raises(Exception, match=r"NON_EMPTY_GROUP|not empty"):
        admin.delete_consumer_groups([group])[group].result(15)
    members.remove(member)
    member.close()
    admin.delete_consumer_groups([group])[group].result(15)
    listed = admin.list_consumer_groups().result(15)
    assert group not in {g.group_id for g in listed.valid}


CHILD = textwrap.dedent("""
    import sys
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "session.timeout.ms": 3000,
                  "heartbeat.interval.ms": 300, "auto.offset.reset": "earliest"})
    c.subscribe([sys.argv[3]], on_assign=lambda c, ps: print("assigned", len(ps), flush=True))
    while True:
        c.poll(0.1)
""")


def test_killed_consumer_is_removed_after_session_timeout(group_broker, members) -> None:
    bootstrap = group_broker.bootstrap_servers
    topic = new_topic(bootstrap, 4, "grp")
    group = unique_topic("g")
    child = subprocess.Popen([sys.executable, "-c", CHILD, bootstrap, group, topic], stdout=subprocess.PIPE)
    try:
        survivor = Member(bootstrap, group, topic, **{"session.timeout.ms": 3000})
        members.append(survivor)
        settle(members, lambda: len(survivor.assigned) == 2, message="survivor to share with the child")
        child.kill()
        child.wait(10)
        settle(
            members,
            lambda: survivor.assigned == {0, 1, 2, 3},
            timeout=30,
            message="killed member to be expired and its partitions reassigned",
        )
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
