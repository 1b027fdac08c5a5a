"""The admin APIs tools and UIs call: DescribeLogDirs (kafka-python's describe_log_dirs, as Kafka UIs and
kafka-log-dirs.sh use it), ElectLeaders (confluent-kafka's elect_leaders) and the partition reassignments
(kafka-python's alter/list_partition_reassignments) over a three-node cluster, checked in Metadata as
clients see it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaPythonTopicPartition
from kafka.errors import (
    InvalidReplicationAssignmentError,
    InvalidReplicationFactorError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)
from kio.schema.alter_partition_reassignments.v1.request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32, i32Timedelta
from minikafka.protocol.build import build
from minikafka.protocol.codec import decode_response, encode_request, request_schema
from minikafka.testing import Broker

from tests.support.names import unique_topic
from tests.support.produce import produce
from tests.support.waiting import poll_until
from tests.support.wire import Wire

pytestmark = pytest.mark.timeout(120)

DEADLINE_S = 30.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Broker]:
    with Broker(nodes=3, data_dir=tmp_path / "data") as broker:
        yield broker


@pytest.fixture
def admin(cluster: Broker) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=15_000)
    yield client
    client.close()


def _create(broker: Broker, topic: str, partitions: int, replication: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, partitions, replication)])[topic].result(DEADLINE_S)


def _partition(broker: Broker, topic: str, partition: int) -> dict[str, Any]:
    [state] = [p for p in broker.cluster()["partitions"] if p["topic"] == topic and p["partition"] == partition]
    return state


def _metadata(broker: Broker, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, sorted isr) as confluent-kafka's Metadata shows them."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    partitions = admin.list_topics(topic, timeout=DEADLINE_S).topics[topic].partitions
    return {index: (p.leader, list(p.replicas), sorted(p.isrs)) for index, p in partitions.items()}


# --- DescribeLogDirs --------------------------------------------------------------------------------------


def _sizes_on_disk(data_dir: Path, topic: str, partitions: int) -> dict[int, int]:
    return {p: sum(f.stat().st_size for f in (data_dir / f"{topic}-{p}").glob("*.log")) for p in range(partitions)}


def test_describe_log_dirs_shows_the_data_directory_and_partition_sizes(broker: Broker) -> None:
    topic = unique_topic("logdirs")
    _create(broker, topic, 2, 1)
    produce(broker.bootstrap_servers, topic, [b"x" * 100] * 20, partition=[index % 2 for index in range(20)])
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        [answer] = client.describe_log_dirs()
        asked = client.describe_log_dirs({topic: [1, 7], "no-such-topic": [0]})
    finally:
        client.close()
    assert answer["broker"] == 1
    [log_dir] = answer["log_dirs"]
    assert log_dir["error_code"] == 0
    data_dir = Path(log_dir["log_dir"])
    assert os.path.samefile(data_dir, broker.data_dir)
    assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
    [ours] = [t for t in log_dir["topics"] if t["name"] == topic]
    sizes = {p["partition_index"]: p["partition_size"] for p in ours["partitions"]}
    assert sizes == _sizes_on_disk(data_dir, topic, 2) and all(size > 1000 for size in sizes.values())
    assert {(p["offset_lag"], p["is_future_key"]) for p in ours["partitions"]} == {(0, False)}
    # Only what exists among what was asked: partition 7 and the unknown topic are left out.
    [narrowed] = asked[0]["log_dirs"]
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in narrowed["topics"]] == [(topic, [1])]


def test_describe_log_dirs_lists_a_node_s_own_replicas(cluster: Broker, admin: KafkaAdminClient) -> None:
    topic = unique_topic("spread-dirs")
    _create(cluster, topic, 3, 1)
    answers = {entry["broker"]: entry["log_dirs"] for entry in admin.describe_log_dirs({topic: [0, 1, 2]})}
    hosted = {node: [p["partition_index"] for t in dirs[0]["topics"] for p in t["partitions"]]
              for node, dirs in answers.items()}
    expected = {node: [] for node in (1, 2, 3)}
    for index in range(3):
        expected[_partition(cluster, topic, index)["replicas"][0]].append(index)
    assert hosted == expected


# --- ElectLeaders -----------------------------------------------------------------------------------------


def _elect(broker: Broker, election: ElectionType, partitions: list[TopicPartition] | None) -> dict[Any, int]:
    """partition -> the error code confluent-kafka's elect_leaders reports for it (0: elected)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    results = admin.elect_leaders(election, partitions).result(DEADLINE_S)
    return {tp: 0 if outcome is None else outcome.code() for tp, outcome in results.items()}


def test_preferred_election_moves_leadership_back_with_the_epoch_bumped(cluster: Broker) -> None:
    topic = unique_topic("elect")
    _create(cluster, topic, 3, 3)
    preferred = _partition(cluster, topic, 0)["replicas"][0]
    other = _partition(cluster, topic, 0)["replicas"][1]
    moved = cluster.move_leader(topic, 0, other)
    assert _metadata(cluster, topic)[0][0] == other

    results = _elect(cluster, ElectionType.PREFERRED, [TopicPartition(topic, 0), TopicPartition(topic, 1),
                                                       TopicPartition("no-such-topic", 0)])
    assert results[TopicPartition(topic, 0)] == 0
    assert results[TopicPartition(topic, 1)] == KafkaError.ELECTION_NOT_NEEDED
    assert results[TopicPartition("no-such-topic", 0)] == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert _metadata(cluster, topic)[0][0] == preferred
    assert _partition(cluster, topic, 0)["leader_epoch"] == moved["leader_epoch"] + 1


def test_preferred_leader_not_available_and_unclean_elections(cluster: Broker) -> None:
    topic = unique_topic("unclean")
    _create(cluster, topic, 3, 3)
    single = unique_topic("single")
    _create(cluster, single, 3, 1)
    [stopped] = [p for p in range(3) if _partition(cluster, topic, p)["replicas"][0] == 3]
    [orphan] = [p for p in range(3) if _partition(cluster, single, p)["replicas"] == [3]]
    cluster.stop_node(3)
    assert _partition(cluster, topic, stopped)["leader"] != 3

    preferred = _elect(cluster, ElectionType.PREFERRED, [TopicPartition(topic, stopped)])
    assert preferred[TopicPartition(topic, stopped)] == KafkaError.PREFERRED_LEADER_NOT_AVAILABLE
    unclean = _elect(cluster, ElectionType.UNCLEAN, [TopicPartition(topic, stopped), TopicPartition(single, orphan)])
    assert unclean[TopicPartition(topic, stopped)] == KafkaError.ELECTION_NOT_NEEDED
    assert unclean[TopicPartition(single, orphan)] == KafkaError.ELIGIBLE_LEADERS_NOT_AVAILABLE

    cluster.start_node(3)
    # Every partition at once: those already led by their preferred replica are left out of the answer.
    everything = _elect(cluster, ElectionType.PREFERRED, None)
    assert everything == {TopicPartition(topic, stopped): 0}
    assert _partition(cluster, topic, stopped)["leader"] == 3


# --- AlterPartitionReassignments / ListPartitionReassignments ------------------------------------------------


def _tp(topic: str, partition: int) -> KafkaPythonTopicPartition:
    return KafkaPythonTopicPartition(topic, partition)


def test_reassignment_to_online_nodes_completes_and_moves_leadership(cluster: Broker,
                                                                      admin: KafkaAdminClient) -> None:
    topic = unique_topic("move")
    _create(cluster, topic, 3, 2)
    before = _partition(cluster, topic, 0)
    assert before["replicas"] == [1, 2] and before["leader"] == 1
    # Node 2 leaves, 3 joins; the leader (1) stays but the replica list lost a member: epoch + 1.
    assert admin.alter_partition_reassignments({_tp(topic, 0): [3, 1]}) == {_tp(topic, 0): None}
    assert _metadata(cluster, topic)[0] == (1, [3, 1], [1, 3])
    assert _partition(cluster, topic, 0)["leader_epoch"] == before["leader_epoch"] + 1
    # Now the leader itself is moved off: the first in-sync target replica leads.
    assert admin.alter_partition_reassignments({_tp(topic, 0): [2, 3]}) == {_tp(topic, 0): None}
    assert _metadata(cluster, topic)[0] == (2, [2, 3], [2, 3])
    assert _partition(cluster, topic, 0)["leader_epoch"] == before["leader_epoch"] + 2
    assert admin.list_partition_reassignments() == {}


def test_reassignment_waits_for_a_stopped_node_and_can_be_cancelled(cluster: Broker) -> None:
    topic = unique_topic("pending")
    _create(cluster, topic, 3, 2)
    epoch = _partition(cluster, topic, 0)["leader_epoch"]
    cluster.stop_node(3)
    # A client that has not met node 3: kafka-python sends to any node it knows, and gives up on a refused one.
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=15_000)
    assert admin.alter_partition_reassignments({_tp(topic, 0): [3, 1]}) == {_tp(topic, 0): None}
    ongoing = {_tp(topic, 0): {"replicas": [3, 1, 2], "adding_replicas": [3], "removing_replicas": [2]}}
    assert admin.list_partition_reassignments() == ongoing
    assert admin.list_partition_reassignments({topic: [0, 1]}) == ongoing
    assert admin.list_partition_reassignments({topic: [1]}) == {}
    assert _metadata(cluster, topic)[0] == (1, [3, 1, 2], [1, 2])
    assert _partition(cluster, topic, 0)["leader_epoch"] == epoch, "adding replicas does not bump the epoch"

    assert admin.alter_partition_reassignments({_tp(topic, 0): None}) == {_tp(topic, 0): None}
    assert admin.list_partition_reassignments() == {}
    assert _metadata(cluster, topic)[0] == (1, [1, 2], [1, 2])
    # Kafka bumps the epoch whenever the replica list loses a member, the cancelled target included.
    assert _partition(cluster, topic, 0)["leader_epoch"] == epoch + 1
    assert admin.alter_partition_reassignments({_tp(topic, 0): None}) == \
        {_tp(topic, 0): NoReassignmentInProgressError}

    assert admin.alter_partition_reassignments({_tp(topic, 0): [3, 1]}) == {_tp(topic, 0): None}
    cluster.start_node(3)
    poll_until(lambda: admin.list_partition_reassignments() == {}, timeout=DEADLINE_S,
               message="the reassignment completes once node 3 is back")
    assert _metadata(cluster, topic)[0] == (1, [3, 1], [1, 3])
    assert _partition(cluster, topic, 0)["leader_epoch"] == epoch + 2
    admin.close()


def test_reassignment_errors_are_kafka_s(cluster: Broker, admin: KafkaAdminClient) -> None:
    topic = unique_topic("bad-move")
    _create(cluster, topic, 1, 2)
    answers = admin.alter_partition_reassignments({_tp(topic, 0): [1, 9]})
    assert answers == {_tp(topic, 0): InvalidReplicationAssignmentError}
    answers = admin.alter_partition_reassignments({_tp(topic, 0): [2, 2]})
    assert answers == {_tp(topic, 0): InvalidReplicationAssignmentError}
    assert admin.alter_partition_reassignments({_tp(topic, 5): [1]}) == {_tp(topic, 5): UnknownTopicOrPartitionError}
    assert admin.alter_partition_reassignments({_tp("no-such-topic", 0): [1]}) == \
        {_tp("no-such-topic", 0): UnknownTopicOrPartitionError}
    assert _partition(cluster, topic, 0)["replicas"] == [1, 2]


def test_v1_refuses_a_replication_factor_change_unless_allowed(cluster: Broker) -> None:
    topic = unique_topic("rf")
    _create(cluster, topic, 1, 2)

    def alter(replicas: tuple[int, ...], allow: bool) -> Any:
        request = AlterPartitionReassignmentsRequest(
            timeout=i32Timedelta.parse(timedelta(seconds=30)), allow_replication_factor_change=allow,
            topics=(ReassignableTopic(name=TopicName(topic), partitions=(
                ReassignablePartition(partition_index=i32(0), replicas=tuple(BrokerId(r) for r in replicas)),)),))
        wire = Wire(cluster)
        try:
            wire.send(encode_request(5, request))
            _corr, response = decode_response(wire.receive(), 45, 1)
        finally:
            wire.close()
        return response

    refused = alter((1, 2, 3), allow=False)
    assert refused.allow_replication_factor_change is False
    [partition] = refused.responses[0].partitions
    assert partition.error_code == InvalidReplicationFactorError.errno
    assert partition.error_message == "The replication factor is changed from 2 to 3"
    assert alter((2, 1), allow=False).responses[0].partitions[0].error_code == 0, "same size: allowed"
    assert alter((1, 2, 3), allow=True).responses[0].partitions[0].error_code == 0
    assert _metadata(cluster, topic)[0] == (1, [1, 2, 3], [1, 2, 3])


def test_reassigned_replicas_survive_a_restart(cluster: Broker, admin: KafkaAdminClient) -> None:
    topic = unique_topic("durable")
    _create(cluster, topic, 2, 2)
    assert admin.alter_partition_reassignments({_tp(topic, 1): [1, 3]}) == {_tp(topic, 1): None}
    cluster.restart()
    assert _metadata(cluster, topic)[1][1] == [1, 3]
    assert _metadata(cluster, topic)[0][1] == [1, 2], "partitions never moved keep the default placement"


def test_the_cluster_page_s_example_runs() -> None:
    """docs/cluster.md's admin API example, as written there."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "cluster.md").read_text()
    example = page.split("<!-- example:admin-apis -->\n```python\n", 1)[1].split("```", 1)[0]
    exec(compile(example, "docs/cluster.md", "exec"), {})


def test_an_authorizer_needs_cluster_alter_to_elect_and_describe_to_list(broker_factory: Any) -> None:
    """Kafka's checks: ElectLeaders and AlterPartitionReassignments need ALTER on the cluster, DescribeLogDirs
    and ListPartitionReassignments DESCRIBE; a refused DescribeLogDirs has no log dirs."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    from tests.e2e.test_acls import SECURED, _config

    secured = broker_factory(**SECURED)
    admin = AdminClient(_config(secured, "admin"))
    topic = unique_topic("guarded")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(DEADLINE_S)

    def as_alice(**config: Any) -> KafkaAdminClient:
        return KafkaAdminClient(bootstrap_servers=secured.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                                sasl_mechanism="PLAIN", sasl_plain_username="alice",
                                sasl_plain_password="alice-secret", **config)

    alice = as_alice()
    try:
        [refused] = alice.describe_log_dirs()
        assert refused["log_dirs"] == []
        alice_confluent = AdminClient(_config(secured, "alice"))
        election = alice_confluent.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)])
        with pytest.raises(KafkaException) as refused_election:  # the top-level error fails the whole call
            election.result(DEADLINE_S)
        assert refused_election.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        binding = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:alice", "*",
                             AclOperation.DESCRIBE, AclPermissionType.ALLOW)
        for future in admin.create_acls([binding]).values():
            future.result(DEADLINE_S)
        [allowed] = alice.describe_log_dirs()
        assert [d["error_code"] for d in allowed["log_dirs"]] == [0]
        assert alice.list_partition_reassignments() == {}
    finally:
        alice.close()


def _elect_on_the_wire(broker: Broker, version: int, **fields: Any) -> Any:
    request = build(request_schema(43, version), timeout=timedelta(seconds=30), **fields)
    wire = Wire(broker)
    try:
        wire.send(encode_request(9, request))
        _corr, response = decode_response(wire.receive(), 43, version)
    finally:
        wire.close()
    return response


def test_elect_leaders_v0_is_preferred_and_an_unknown_type_fails_the_request(cluster: Broker) -> None:
    topic = unique_topic("elect-wire")
    _create(cluster, topic, 1, 2)
    cluster.move_leader(topic, 0, 2)
    asked = [{"topic": topic, "partitions": [0]}]
    v0 = _elect_on_the_wire(cluster, 0, topic_partitions=asked)
    assert [(r.topic, [(p.partition_id, p.error_code) for p in r.partition_result])
            for r in v0.replica_election_results] == [(topic, [(0, 0)])]
    assert _partition(cluster, topic, 0)["leader"] == 1
    unknown = _elect_on_the_wire(cluster, 2, election_type=7, topic_partitions=asked)
    assert unknown.error_code == 42, "INVALID_REQUEST, on the whole request"
    [[partition]] = [r.partition_result for r in unknown.replica_election_results]
    assert (partition.error_code, partition.error_message) == (42, "Unknown election type 7")
