"""`minikafka cluster describe`: a reassignment under way shows its adding and removing replicas as
kafka-topics.sh --describe does."""

from __future__ import annotations

from minikafka.tools.cluster import _describe


def _snapshot(adding: list[int], removing: list[int]) -> dict[str, object]:
    return {"controller_id": 1, "nodes": [],
            "partitions": [{"topic": "t", "partition": 0, "leader": 1, "leader_epoch": 2, "replicas": [3, 1, 2],
                            "isr": [1, 2], "adding": adding, "removing": removing}]}


def test_a_move_under_way_shows_its_replicas_and_a_settled_partition_does_not() -> None:
    assert _describe(_snapshot([3], [2])).splitlines()[1] == (
        "Topic: t\tPartition: 0\tLeader: 1\tEpoch: 2\tReplicas: 3,1,2\tIsr: 1,2"
        "\tAdding Replicas: 3\tRemoving Replicas: 2")
    assert _describe(_snapshot([], [])).splitlines()[1].endswith("Isr: 1,2")
