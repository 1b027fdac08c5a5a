"""Consumer groups with aiokafka against a real minikafka process."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import time

import pytest

aiokafka = pytest.importorskip("aiokafka")
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # noqa: E402
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # noqa: E402
from aiokafka.structs import OffsetAndMetadata  # noqa: E402

from tests.support.groups import split_evenly  # noqa: E402
from tests.support.names import unique_topic  # noqa: E402

pytestmark = pytest.mark.timeout(120)


async def wait_for(predicate, timeout: float = 30.0, message: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        await asyncio.sleep(0.05)


async def create_topic(bootstrap: str, partitions: int = 4) -> str:
    topic = unique_topic("grp")
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()
    return topic


async def consumer(bootstrap: str, group: str, topic: str, **extra) -> AIOKafkaConsumer:
    settings = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 300, "metadata_max_age_ms": 1000}
    settings.update(extra)
    c = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **settings,
    )
    await c.start()
    return c


def partitions(c: AIOKafkaConsumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


async def test_split_rebalance_and_leave(group_broker) -> None:
    bootstrap = group_broker.bootstrap_servers
    topic = await create_topic(bootstrap)
    group = unique_topic("g")
    consumers = [await consumer(bootstrap, group, topic), await consumer(bootstrap, group, topic)]
    try:
        await wait_for(lambda: split_evenly(map(partitions, consumers)), message="two consumers to split")
        consumers.append(await consumer(bootstrap, group, topic))
        await wait_for(lambda: split_evenly(map(partitions, consumers)), message="three consumers to split")
        await consumers.pop(0).stop()
        await wait_for(lambda: split_evenly(map(partitions, consumers)), message="partitions to move after a leave")
    finally:
        for c in consumers:
            await c.stop()


async def test_committed_offsets_survive_restart(group_broker) -> None:
    bootstrap = group_broker.bootstrap_servers
    topic = await create_topic(bootstrap, partitions=1)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False)
    await producer.start()
    for i in range(10):
        await producer.send_and_wait(topic, f"v{i}".encode(), partition=0)
    await producer.stop()
    group = unique_topic("g")
    first = await consumer(bootstrap, group, topic)
    try:
        await wait_for(lambda: partitions(first) == {0}, message="assignment")
        await first.commit({TopicPartition(topic, 0): OffsetAndMetadata(6, "")})
    finally:
        await first.stop()
    group_broker.restart()
    second = await consumer(bootstrap, group, topic)
    try:
        assert await second.committed(TopicPartition(topic, 0)) == 6
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 4 and time.monotonic() < deadline:
            batch = await second.getmany(timeout_ms=200)
            for records in batch.values():
                got += [r.offset for r in records]
        assert got == [6, 7, 8, 9]
    finally:
        await second.stop()


async def test_static_member_rejoins_without_rebalance(group_broker) -> None:
    bootstrap = group_broker.bootstrap_servers
    topic = await create_topic(bootstrap)
    group = unique_topic("g")
    a = await consumer(bootstrap, group, topic, group_instance_id="static-a", session_timeout_ms=30000)
    b = await consumer(bootstrap, group, topic, group_instance_id="static-b", session_timeout_ms=30000)
    try:
        await wait_for(lambda: split_evenly(map(partitions, [a, b])), message="static members to split")
        before_a, generation = partitions(a), b._coordinator.generation
        await a.stop()  # a static member does not leave the group on close
        a = await consumer(bootstrap, group, topic, group_instance_id="static-a", session_timeout_ms=30000)
        await wait_for(lambda: partitions(a) == before_a, message="static member to get its partitions back")
        await asyncio.sleep(1.0)  # b heartbeats meanwhile; a rebalance would bump its generation
        assert b._coordinator.generation == generation
        assert partitions(b) == set(range(4)) - before_a
    finally:
        await a.stop()
        await b.stop()


async def test_admin_describe_and_list(group_broker) -> None:
    bootstrap = group_broker.bootstrap_servers
    topic = await create_topic(bootstrap)
    group = unique_topic("g")
    c = await consumer(bootstrap, group, topic)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await wait_for(lambda: partitions(c) == {0, 1, 2, 3}, message="assignment")
        listed = await admin.list_consumer_groups()
        assert (group, "consumer") in [tuple(g[:2]) for g in listed]
        described = await admin.describe_consumer_groups([group])
        groups = described[0].groups
        assert groups[0][1] == group and groups[0][2] == "Stable"
        offsets_before = await admin.list_consumer_group_offsets(group)
        assert offsets_before == {}
        await c.commit({TopicPartition(topic, 2): OffsetAndMetadata(0, "meta")})
        offsets = await admin.list_consumer_group_offsets(group)
        assert offsets[TopicPartition(topic, 2)].offset == 0
    finally:
        await admin.close()
        await c.stop()


CHILD = textwrap.dedent("""
    import asyncio, sys
    from aiokafka import AIOKafkaConsumer
    async def main():
        c = AIOKafkaConsumer(sys.argv[3], bootstrap_servers=sys.argv[1], group_id=sys.argv[2],
                             session_timeout_ms=3000, heartbeat_interval_ms=300, metadata_max_age_ms=1000)
        await c.start()
        while True:
            await c.getmany(timeout_ms=100)
    asyncio.run(main())
""")


async def test_killed_consumer_is_removed_after_session_timeout(group_broker) -> None:
    bootstrap = group_broker.bootstrap_servers
    topic = await create_topic(bootstrap)
    group = unique_topic("g")
    child = subprocess.Popen([sys.executable, "-c", CHILD, bootstrap, group, topic])
    survivor = None
    try:
        survivor = await consumer(bootstrap, group, topic, session_timeout_ms=3000)
        await wait_for(lambda: len(partitions(survivor)) == 2, message="survivor to share with the child")
        child.kill()
        child.wait(10)
        await wait_for(lambda: partitions(survivor) == {0, 1, 2, 3}, message="killed member to expire")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        if survivor is not None:
            await survivor.stop()
