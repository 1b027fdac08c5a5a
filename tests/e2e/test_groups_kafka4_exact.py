"""Classic groups exact to Kafka 4, checked with the clients that found the differences.

- A commit that carries an older generation while the group completes a rebalance is
  ILLEGAL_GENERATION (Kafka 4's ClassicGroup.validateOffsetCommit checks the generation before the
  state); librdkafka's cooperative consumers commit during rebalances and expect that.
- OffsetDelete on a subscribed topic fails that topic's partitions only (OffsetMetadataManager.deleteOffsets).
- librdkafka's 0113 cooperative tests (wildcard subscription, unsubscribe) and its 0102 static
  member restart, under Kafka's default `group.initial.rebalance.delay.ms` (3000): the count of
  assignments and revocations each consumer sees is the one those tests expect from Kafka.
- Admin APIs as Kafka 4 answers them: ListGroups v5's type filter, authorized operations (KIP-430)
  as a broker without an authorizer reports them, and the older AlterConfigs API.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kafka import KafkaAdminClient, KafkaConsumer  # noqa: E402
from kafka import TopicPartition as KafkaPythonTopicPartition  # noqa: E402
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor  # noqa: E402
from kafka.errors import GroupSubscribedToTopicError, NoError  # noqa: E402

from tests.support.names import unique_topic  # noqa: E402
from tests.support.waiting import poll_until  # noqa: E402

pytestmark = pytest.mark.timeout(60)

FAST_GROUPS = {"group.min.session.timeout.ms": "1000"}
# Kafka's default: librdkafka's cooperative tests count rebalances that assume it.
KAFKA_DEFAULT_DELAY = {**FAST_GROUPS, "group.initial.rebalance.delay.ms": "3000"}


def create_topics(bootstrap: str, partitions: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, count, 1) for name, count in partitions.items()])
    for future in futures.values():
        future.result(15)


class Rebalances:
    """What a confluent-kafka consumer's rebalance callbacks saw, as librdkafka's DefaultRebalanceCb counts."""

    def __init__(self) -> None:
        self.assign_calls = 0
        self.nonempty_assign_calls = 0
        self.revoke_calls = 0
        self.lost_calls = 0
        self.owned: set[tuple[str, int]] = set()

    def on_assign(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        self.assign_calls += 1
        self.nonempty_assign_calls += bool(partitions)
        self.owned |= {(p.topic, p.partition) for p in partitions}

    def on_revoke(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        self.revoke_calls += 1
        self.owned -= {(p.topic, p.partition) for p in partitions}

    def on_lost(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        self.lost_calls += 1
        self.on_revoke(_consumer, partitions)


@pytest.fixture
def closing() -> Iterator[list[Any]]:
    """Consumers to close at the end, whatever the test did."""
    made: list[Any] = []
    yield made
    for consumer in reversed(made):
        with contextlib.suppress(Exception):
            consumer.close()


def cooperative_consumer(bootstrap: str, group: str, **extra: Any) -> Consumer:
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "partition.assignment.strategy": "cooperative-sticky",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 300,
    }
    config.update(extra)
    return Consumer(config)


def poll_all(consumers: list[Consumer], predicate: Callable[[], bool], timeout: float, message: str) -> None:
    def step() -> bool:
        for consumer in consumers:
            consumer.poll(0.05)
        return predicate()

    poll_until(step, timeout=timeout, interval=0, message=message)


class ParkablePoller:
    """Polls a kafka-python consumer from its own thread (kafka-python joins only inside poll) and can
    park it between polls, so the group waits for it in a join phase for as long as the test wants."""

    def __init__(self, consumer: KafkaConsumer) -> None:
        self.consumer = consumer
        self._park = threading.Event()
        self._parked = threading.Event()
        self._resume = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self._park.is_set():
                self._parked.set()
                self._resume.wait(30)
                self._park.clear()
                self._parked.clear()
                continue
            self.consumer.poll(timeout_ms=200)

    def park(self) -> None:
        self._resume.clear()
        self._park.set()
        assert self._parked.wait(10), "kafka-python poller did not park"

    def resume(self) -> None:
        self._resume.set()

    def close(self) -> None:
        self._stop.set()
        self._resume.set()
        self._thread.join(10)
        self.consumer.close()


def test_commit_with_an_older_generation_during_a_rebalance_is_illegal_generation(broker_factory, closing) -> None:
    """librdkafka commits with the generation it has while its JoinGroup is pending; that request is
    processed after the join completes, when the group is CompletingRebalance with a newer
    generation. Kafka answers ILLEGAL_GENERATION there, not REBALANCE_IN_PROGRESS."""
    broker = broker_factory(**FAST_GROUPS)
    bootstrap = broker.bootstrap_servers
    topic, other = unique_topic("commit"), unique_topic("commit-b")
    create_topics(bootstrap, {topic: 2, other: 1})
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(10):
        producer.produce(topic, value=b"v", partition=i % 2)
    assert producer.flush(15) == 0
    group = unique_topic("g")

    stats: dict[str, Any] = {}
    commits: list[tuple[KafkaError | None, list[TopicPartition]]] = []
    rebalances = Rebalances()
    leader = cooperative_consumer(
        bootstrap, group, **{"statistics.interval.ms": 100, "stats_cb": lambda s: stats.update(json.loads(s)),
                             "on_commit": lambda err, parts: commits.append((err, parts))})
    closing.append(leader)
    leader.subscribe([topic], on_assign=rebalances.on_assign, on_revoke=rebalances.on_revoke)
    poll_all([leader], lambda: len(rebalances.owned) == 2, 20, "the first consumer to own both partitions")

    follower = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             partition_assignment_strategy=[CooperativeStickyAssignor], session_timeout_ms=6000,
                             heartbeat_interval_ms=300, max_poll_interval_ms=30000, auto_offset_reset="earliest")
    follower.subscribe([topic])
    poller = ParkablePoller(follower)
    closing.append(poller)
    poll_all([leader], lambda: len(rebalances.owned) == 1 and len(follower.assignment()) == 1, 30,
             "the cooperative rebalance to give each consumer one partition")

    # The kafka-python member stops polling, so the group waits for it in the next join phase.
    poller.park()
    # Stats are snapshots: the last one can still show the previous rebalance's wait-join. Only one taken
    # after this subscribe counts; librdkafka stamps them with CLOCK_MONOTONIC microseconds, as
    # time.monotonic_ns reads it on Linux.
    subscribed_at_us = time.monotonic_ns() // 1000
    leader.subscribe([topic, other], on_assign=rebalances.on_assign, on_revoke=rebalances.on_revoke)

    def coordinator() -> dict[str, Any]:
        return stats.get("brokers", {}).get("GroupCoordinator", {})

    poll_all([leader], lambda: stats.get("ts", 0) > subscribed_at_us
             and stats.get("cgrp", {}).get("join_state") == "wait-join", 20,
             "the first consumer to wait in JoinGroup")
    (owned_partition,) = [p for t, p in rebalances.owned if t == topic]
    leader.commit(offsets=[TopicPartition(topic, owned_partition, 3)], asynchronous=True)
    # JoinGroup and OffsetCommit both on the wire: the broker takes the commit after the join completes.
    poll_all([leader], lambda: coordinator().get("waitresp_cnt", 0) >= 2, 20,
             "the commit to be sent behind the pending JoinGroup")
    poller.resume()
    poll_all([leader], lambda: bool(commits), 30, "the commit's result")

    err, parts = commits[0]
    codes = {p.error.code() for p in parts if p.error is not None} | ({err.code()} if err else set())
    assert codes == {KafkaError.ILLEGAL_GENERATION}, f"commit answered {err} / {[p.error for p in parts]}"
    # The group carries on, and a commit with the current generation is accepted.
    poll_all([leader], lambda: (topic, owned_partition) in rebalances.owned and (other, 0) in rebalances.owned
             and stats.get("cgrp", {}).get("join_state") == "steady", 30, "the rebalance to complete")
    assert leader.committed([TopicPartition(topic, owned_partition)], timeout=15)[0].offset < 0
    leader.commit(offsets=[TopicPartition(topic, owned_partition, 4)], asynchronous=False)
    assert leader.committed([TopicPartition(topic, owned_partition)], timeout=15)[0].offset == 4


def test_offset_delete_fails_only_the_subscribed_topics_partitions(broker_factory, closing) -> None:
    broker = broker_factory(**FAST_GROUPS)
    bootstrap = broker.bootstrap_servers
    subscribed, unsubscribed = unique_topic("sub"), unique_topic("unsub")
    create_topics(bootstrap, {subscribed: 2, unsubscribed: 1})
    group = unique_topic("g")
    rebalances = Rebalances()
    member = cooperative_consumer(bootstrap, group, **{"partition.assignment.strategy": "range"})
    closing.append(member)
    member.subscribe([subscribed], on_assign=rebalances.on_assign, on_revoke=rebalances.on_revoke)
    poll_all([member], lambda: len(rebalances.owned) == 2, 20, "the consumer to own its topic")
    member.commit(offsets=[TopicPartition(subscribed, 0, 5), TopicPartition(unsubscribed, 0, 7)],
                  asynchronous=False)

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        results = admin.delete_group_offsets(
            group, [KafkaPythonTopicPartition(subscribed, 0), KafkaPythonTopicPartition(unsubscribed, 0)]
        )
    finally:
        admin.close()
    assert results == {
        KafkaPythonTopicPartition(subscribed, 0): GroupSubscribedToTopicError,
        KafkaPythonTopicPartition(unsubscribed, 0): NoError,
    }
    committed = member.committed([TopicPartition(subscribed, 0), TopicPartition(unsubscribed, 0)], timeout=15)
    assert [tp.offset for tp in committed] == [5, confluent_kafka.OFFSET_INVALID]


def test_cooperative_wildcard_new_topics_only_add(broker_factory, closing) -> None:
    """librdkafka 0113 n_wildcard: two consumers on a regex that matches nothing yet; two topics
    appear; each consumer gets two partitions in one assignment and nothing is revoked."""
    broker = broker_factory(**KAFKA_DEFAULT_DELAY)
    bootstrap = broker.bootstrap_servers
    base = unique_topic("wild").replace("-", "_")
    group = unique_topic("g")
    rebalances = [Rebalances(), Rebalances()]
    consumers = []
    for seen in rebalances:
        consumer = cooperative_consumer(bootstrap, group, **{"topic.metadata.refresh.interval.ms": 3000})
        closing.append(consumer)
        consumer.subscribe([f"^{base}_."], on_assign=seen.on_assign, on_revoke=seen.on_revoke,
                           on_lost=seen.on_lost)
        consumers.append(consumer)
    create_topics(bootstrap, {f"{base}_1": 2, f"{base}_2": 2})
    poll_all(consumers, lambda: all(len(seen.owned) == 2 for seen in rebalances), 30,
             "each consumer to own two partitions")
    for seen in rebalances:
        assert seen.revoke_calls == 0 and seen.lost_calls == 0
        assert seen.nonempty_assign_calls in (1, 2)  # the topics may be discovered together or one by one
    assert rebalances[0].nonempty_assign_calls == rebalances[1].nonempty_assign_calls


def test_cooperative_unsubscribe_gives_the_other_consumer_one_assignment(broker_factory, closing) -> None:
    """librdkafka 0113 l_unsubscribe: one assignment each to start; when one consumer unsubscribes
    the other gets its partitions in exactly one more assignment, with no revocation."""
    broker = broker_factory(**KAFKA_DEFAULT_DELAY)
    bootstrap = broker.bootstrap_servers
    first, second = unique_topic("unsub1"), unique_topic("unsub2")
    create_topics(bootstrap, {first: 2, second: 2})
    group = unique_topic("g")
    rebalances = [Rebalances(), Rebalances()]
    consumers = []
    for seen in rebalances:
        consumer = cooperative_consumer(bootstrap, group)
        closing.append(consumer)
        consumer.subscribe([first, second], on_assign=seen.on_assign, on_revoke=seen.on_revoke,
                           on_lost=seen.on_lost)
        consumers.append(consumer)
    poll_all(consumers, lambda: all(len(seen.owned) == 2 for seen in rebalances), 30,
             "each consumer to own two partitions")
    assert [seen.assign_calls for seen in rebalances] == [1, 1]
    consumers[0].unsubscribe()
    poll_all(consumers, lambda: not rebalances[0].owned and len(rebalances[1].owned) == 4, 30,
             "the remaining consumer to own all four partitions")
    assert [seen.assign_calls for seen in rebalances] == [1, 2]
    assert [seen.revoke_calls for seen in rebalances] == [1, 0]
    assert [seen.lost_calls for seen in rebalances] == [0, 0]


@pytest.mark.parametrize("restarted", ["leader", "follower"])
def test_cooperative_static_member_restart_gets_its_assignment_back(broker_factory, closing, restarted) -> None:
    """librdkafka 0102: a static member that restarts within its session timeout gets its partitions
    back without a rebalance: the other member sees no callback at all."""
    broker = broker_factory(**FAST_GROUPS)
    bootstrap = broker.bootstrap_servers
    topic = unique_topic("static")
    create_topics(bootstrap, {topic: 3})
    group = unique_topic("g")

    def static_member(instance: str, seen: Rebalances) -> Consumer:
        consumer = cooperative_consumer(bootstrap, group, **{"group.instance.id": instance})
        closing.append(consumer)
        consumer.subscribe([topic], on_assign=seen.on_assign, on_revoke=seen.on_revoke, on_lost=seen.on_lost)
        return consumer

    leader_seen, follower_seen = Rebalances(), Rebalances()
    leader = static_member("static-leader", leader_seen)
    poll_all([leader], lambda: len(leader_seen.owned) == 3, 20, "the leader to own everything")
    follower = static_member("static-follower", follower_seen)
    members = [leader, follower]
    # Two cooperative rounds: the leader gives up a partition (revoke, then an empty assign), and the
    # next round hands it to the follower (an empty assign for the leader, a non-empty one for it).
    poll_all(members, lambda: len(leader_seen.owned) == 2 and len(follower_seen.owned) == 1
             and leader_seen.assign_calls == 3 and follower_seen.assign_calls == 2, 30,
             "the static members to share the partitions")
    if restarted == "leader":
        gone, gone_seen, stays, stays_seen, instance = leader, leader_seen, follower, follower_seen, "static-leader"
    else:
        gone, gone_seen, stays, stays_seen, instance = follower, follower_seen, leader, leader_seen, "static-follower"
    before = set(gone_seen.owned)
    calls = (stays_seen.assign_calls, stays_seen.revoke_calls, stays_seen.lost_calls)
    gone.close()  # static members send no LeaveGroup
    again_seen = Rebalances()
    again = static_member(instance, again_seen)
    poll_all([stays, again], lambda: again_seen.owned == before, 20, "the restarted member to get its partitions back")
    # Whatever a rebalance would do reaches the member that stayed within a few heartbeats.
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        stays.poll(0.05)
        again.poll(0.05)
    assert (stays_seen.assign_calls, stays_seen.revoke_calls, stays_seen.lost_calls) == calls
    assert again_seen.revoke_calls == 0 and again_seen.assign_calls == 1


def test_list_groups_v5_type_filter(broker_factory, closing) -> None:
    """ListGroups v5 (KIP-848): every group here is classic; a type filter for consumer groups lists none."""
    from confluent_kafka import ConsumerGroupType

    broker = broker_factory(**FAST_GROUPS)
    bootstrap = broker.bootstrap_servers
    topic = unique_topic("listed")
    create_topics(bootstrap, {topic: 1})
    group = unique_topic("g")
    rebalances = Rebalances()
    member = cooperative_consumer(bootstrap, group)
    closing.append(member)
    member.subscribe([topic], on_assign=rebalances.on_assign, on_revoke=rebalances.on_revoke)
    poll_all([member], lambda: len(rebalances.owned) == 1, 20, "the consumer to join")

    admin = AdminClient({"bootstrap.servers": bootstrap})
    classic = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(15)
    assert [(g.group_id, g.type, g.state.name) for g in classic.valid] == [(group, ConsumerGroupType.CLASSIC, "STABLE")]
    assert admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(15).valid == []

    kafka_admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        listed = kafka_admin.list_groups(types_filter=["Classic"])
        assert [(g["group_id"], g["group_type"]) for g in listed] == [(group, "classic")]
        assert kafka_admin.list_groups(types_filter=["share"]) == []
    finally:
        kafka_admin.close()


def test_authorized_operations_as_kafka_without_an_authorizer(broker_factory, closing) -> None:
    """KIP-430 fields when asked: every operation each resource type supports (AclEntry.supportedOperations)."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation

    broker = broker_factory(**FAST_GROUPS)
    bootstrap = broker.bootstrap_servers
    topic = unique_topic("authz")
    create_topics(bootstrap, {topic: 1})
    group = unique_topic("g")
    rebalances = Rebalances()
    member = cooperative_consumer(bootstrap, group)
    closing.append(member)
    member.subscribe([topic], on_assign=rebalances.on_assign, on_revoke=rebalances.on_revoke)
    poll_all([member], lambda: len(rebalances.owned) == 1, 20, "the consumer to join")

    op = AclOperation
    admin = AdminClient({"bootstrap.servers": bootstrap})
    cluster = admin.describe_cluster(include_authorized_operations=True).result(15)
    assert set(cluster.authorized_operations) == {op.CREATE, op.CLUSTER_ACTION, op.DESCRIBE_CONFIGS, op.ALTER_CONFIGS,
                                                  op.IDEMPOTENT_WRITE, op.ALTER, op.DESCRIBE}
    assert admin.describe_cluster().result(15).authorized_operations is None
    described = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[topic].result(15)
    assert set(described.authorized_operations) == {op.READ, op.WRITE, op.CREATE, op.DESCRIBE, op.DELETE, op.ALTER,
                                                    op.DESCRIBE_CONFIGS, op.ALTER_CONFIGS}
    assert admin.describe_topics(TopicCollection([topic]))[topic].result(15).authorized_operations is None
    group_description = admin.describe_consumer_groups([group], include_authorized_operations=True)[group].result(15)
    assert set(group_description.authorized_operations) == {op.READ, op.DESCRIBE, op.DELETE, op.DESCRIBE_CONFIGS,
                                                            op.ALTER_CONFIGS}

    assert admin.describe_consumer_groups([group])[group].result(15).authorized_operations is None

    kafka_admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:  # kafka-python 3.0.12 always asks for them
        described_group = kafka_admin.describe_groups([group])[group]
    finally:
        kafka_admin.close()
    assert sorted(described_group["authorized_operations"]) == sorted(
        ["READ", "DESCRIBE", "DELETE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"]
    )


def _topic_overrides(admin: AdminClient, topic: str) -> dict[str, str]:
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(15)
    return {name: e.value for name, e in entries.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def test_legacy_alter_configs_replaces_the_topic_overrides(broker_factory) -> None:
    """AlterConfigs (API 33), which confluent-kafka's alter_configs, kafka-python's alter_configs
    (incremental=False) and aiokafka's alter_configs send: the given set replaces every override."""
    import asyncio

    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource as AioConfigResource
    from aiokafka.admin.config_resource import ConfigResourceType as AioConfigResourceType
    from confluent_kafka.admin import ConfigResource, ResourceType
    from kafka.admin import ConfigResource as KafkaPythonConfigResource
    from kafka.admin import ConfigResourceType

    broker = broker_factory()
    bootstrap = broker.bootstrap_servers
    topic = unique_topic("legacy")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "5000", "cleanup.policy": "compact"})])
    futures[topic].result(15)
    assert _topic_overrides(admin, topic) == {"retention.ms": "5000", "cleanup.policy": "compact"}

    resource = ConfigResource(ResourceType.TOPIC, topic, set_config={"segment.ms": "600000"})
    admin.alter_configs([resource])[resource].result(15)
    assert _topic_overrides(admin, topic) == {"segment.ms": "600000"}

    invalid = ConfigResource(ResourceType.TOPIC, topic, set_config={"no.such.config": "1"})
    with pytest.raises(confluent_kafka.KafkaException, match="INVALID_CONFIG"):
        admin.alter_configs([invalid])[invalid].result(15)
    missing = ConfigResource(ResourceType.TOPIC, unique_topic("absent"), set_config={"retention.ms": "1"})
    with pytest.raises(confluent_kafka.KafkaException, match="UNKNOWN_TOPIC_OR_PART"):
        admin.alter_configs([missing])[missing].result(15)
    assert _topic_overrides(admin, topic) == {"segment.ms": "600000"}

    kafka_admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        kafka_admin.alter_configs(
            [KafkaPythonConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "7000"})],
            validate_only=True, incremental=False)
        assert _topic_overrides(admin, topic) == {"segment.ms": "600000"}, "validate_only changed nothing"
        kafka_admin.alter_configs(
            [KafkaPythonConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "7000"})],
            incremental=False)
    finally:
        kafka_admin.close()
    # kafka-python's legacy path resends the other overrides itself, so they stay.
    assert _topic_overrides(admin, topic) == {"segment.ms": "600000", "retention.ms": "7000"}

    async def with_aiokafka() -> None:
        aio_admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await aio_admin.start()
        try:
            (response,) = await aio_admin.alter_configs(
                [AioConfigResource(AioConfigResourceType.TOPIC, topic, configs={"max.message.bytes": "2000000"})])
        finally:
            await aio_admin.close()
        assert [r[0] for r in response.resources] == [0]

    asyncio.run(with_aiokafka())
    assert _topic_overrides(admin, topic) == {"max.message.bytes": "2000000"}


def test_alter_configs_preprocessing_as_kafka(broker_factory) -> None:
    """Kafka's ConfigAdminManager.preprocess on the wire (clients never send these): a resource named
    twice fails every copy, a key named twice or a null value fails its resource, for both APIs."""
    from kio.schema.alter_configs.v2 import request as legacy
    from kio.schema.incremental_alter_configs.v1 import request as incremental
    from minikafka.protocol.codec import decode_response, encode_request
    from minikafka.protocol.errors import ErrorCode

    from tests.support.wire import Wire

    broker = broker_factory()
    twice, keys, good = unique_topic("twice"), unique_topic("keys"), unique_topic("good")
    create_topics(broker.bootstrap_servers, {twice: 1, keys: 1, good: 1})
    topic_type, set_op = 2, 0

    def ask(wire: Wire, correlation_id: int, request: Any) -> Any:
        wire.send(encode_request(correlation_id, request))
        corr, response = decode_response(wire.receive(), request.__api_key__, request.__version__)
        assert corr == correlation_id
        return response

    def inc(name: str, *configs: tuple[str, str | None]) -> Any:
        return incremental.AlterConfigsResource(resource_type=topic_type, resource_name=name, configs=tuple(
            incremental.AlterableConfig(name=k, config_operation=set_op, value=v) for k, v in configs))

    def old(name: str, *configs: tuple[str, str | None]) -> Any:
        return legacy.AlterConfigsResource(resource_type=topic_type, resource_name=name, configs=tuple(
            legacy.AlterableConfig(name=k, value=v) for k, v in configs))

    expected = [
        (twice, ErrorCode.invalid_request, "Each resource must appear at most once."),
        (twice, ErrorCode.invalid_request, "Each resource must appear at most once."),
        (keys, ErrorCode.invalid_request, "Error due to duplicate config keys"),
        (good, ErrorCode.none, None),
    ]
    wire = Wire(broker)
    try:
        answered = ask(wire, 1, incremental.IncrementalAlterConfigsRequest(resources=(
            inc(twice, ("retention.ms", "1000")), inc(twice, ("retention.ms", "2000")),
            inc(keys, ("retention.ms", "1000"), ("retention.ms", "2000")), inc(good, ("retention.ms", "3000")),
        ), validate_only=False))
        assert [(r.resource_name, r.error_code, r.error_message) for r in answered.responses] == expected
        answered = ask(wire, 2, legacy.AlterConfigsRequest(resources=(
            old(twice, ("retention.ms", "1000")), old(twice, ("retention.ms", "2000")),
            old(keys, ("retention.ms", "1000"), ("retention.ms", "2000")), old(good, ("retention.ms", "4000")),
        ), validate_only=False))
        assert [(r.resource_name, r.error_code, r.error_message) for r in answered.responses] == expected
        answered = ask(wire, 3, legacy.AlterConfigsRequest(resources=(
            old(good, ("retention.ms", None), ("segment.ms", None)),), validate_only=False))
        assert [(r.error_code, r.error_message) for r in answered.responses] == [
            (ErrorCode.invalid_request, "Null value not supported for : retention.ms, segment.ms")]
    finally:
        wire.close()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    assert _topic_overrides(admin, twice) == {} and _topic_overrides(admin, keys) == {}
    assert _topic_overrides(admin, good) == {"retention.ms": "4000"}
