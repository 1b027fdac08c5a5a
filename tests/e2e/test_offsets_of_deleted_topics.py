"""Deleting a topic deletes every group's committed offsets of it, as Kafka's group coordinator does
(onPartitionsDeleted): a group does not resume a topic re-created under the same name at the old offsets,
and the tombstones keep them deleted across a restart. With confluent-kafka."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.support.brokers import process_broker
from tests.support.clients import create_topic
from tests.support.names import unique_topic
from tests.support.waiting import poll_until

DEADLINE_S = 20.0
OFFSET_INVALID = -1001


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=DEADLINE_S)
        return [tp.offset for tp in found]
    finally:
        consumer.close()


def _commit(bootstrap: str, group: str, offsets: list[TopicPartition]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()


def test_deleting_a_topic_deletes_its_committed_offsets_in_every_group(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    broker = process_broker(tmp_path / "data", tmp_path / "logs").start()
    try:
        deleted, kept = unique_topic("deleted"), unique_topic("kept")
        create_topic(broker.bootstrap_servers, deleted, partitions=2)
        create_topic(broker.bootstrap_servers, kept)
        for group, base in (("first-group", 40), ("second-group", 7)):
            _commit(broker.bootstrap_servers, group, [TopicPartition(deleted, 0, base),
                                                      TopicPartition(deleted, 1, base + 1),
                                                      TopicPartition(kept, 0, base + 2)])
        assert _committed(broker.bootstrap_servers, "first-group", deleted, 2) == [40, 41]

        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.delete_topics([deleted])[deleted].result(DEADLINE_S)
        poll_until(lambda: deleted not in admin.list_topics(timeout=DEADLINE_S).topics, timeout=DEADLINE_S,
                   message="the topic is gone")
        create_topic(broker.bootstrap_servers, deleted, partitions=2)

        for group, base in (("first-group", 40), ("second-group", 7)):
            assert _committed(broker.bootstrap_servers, group, deleted, 2) == [OFFSET_INVALID, OFFSET_INVALID]
            assert _committed(broker.bootstrap_servers, group, kept, 1) == [base + 2], "other topics keep their offsets"

        broker.stop()
        broker.start()
        assert _committed(broker.bootstrap_servers, "first-group", deleted, 2) == [OFFSET_INVALID, OFFSET_INVALID]
        assert _committed(broker.bootstrap_servers, "first-group", kept, 1) == [42]
    finally:
        broker.stop()
