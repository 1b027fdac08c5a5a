"""read_committed with librdkafka over partitions holding transactional batches and markers.

Transactional batches are written with raw Produce requests (after InitProducerId and
AddPartitionsToTxn, since the broker verifies transactional batches as Kafka does) and ended with
WriteTxnMarkers, the admin path, instead of EndTxn. This checks the partition side (LSO,
`.txnindex`, aborted transactions in Fetch) against a real client's read_committed logic.
"""

from __future__ import annotations

from datetime import timedelta

from confluent_kafka import Consumer, TopicPartition
from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.list_offsets.v5.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.write_txn_markers.v1.request import WritableTxnMarker, WritableTxnMarkerTopic, WriteTxnMarkersRequest
from minikafka.protocol.codec import decode_response, encode_request
from minikafka.protocol.records import BatchHeader, Record, build_batch
from minikafka.testing import Broker

from tests.support.clients import consume, create_topic
from tests.support.names import unique_topic
from tests.support.wire import Wire


class RawClient:
    def __init__(self, broker: Broker) -> None:
        self.wire = Wire(broker)
        self.correlation = 0
        self.transactional_ids: dict[int, str] = {}

    def call(self, request: object, api_key: int, version: int) -> object:
        self.correlation += 1
        self.wire.send(encode_request(self.correlation, request))
        return decode_response(self.wire.receive(), api_key, version)[1]

    def produce(self, topic: str, batch: bytes) -> int:
        producer_id = BatchHeader.parse(batch).producer_id
        data = TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=0, records=batch),))
        request = ProduceRequest(transactional_id=self.transactional_ids.get(producer_id), acks=-1,
                                 timeout=timedelta(seconds=5), topic_data=(data,))
        result = self.call(request, 0, 9).responses[0].partition_responses[0]  # type: ignore[attr-defined]
        assert result.error_code == 0, result
        return result.base_offset

    def begin(self, topic: str) -> int:
        """A transactional producer id (epoch 0) with `topic`-0 added to its transaction."""
        transactional_id = unique_topic("raw-tid")
        init = self.call(InitProducerIdRequest(transactional_id=transactional_id,
                                               transaction_timeout=timedelta(minutes=5)), 22, 4)
        assert init.error_code == 0 and init.producer_epoch == 0, init  # type: ignore[attr-defined]
        added = self.call(AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=init.producer_id,  # type: ignore[attr-defined]
            v3_and_below_producer_epoch=0, v3_and_below_topics=(AddPartitionsToTxnTopic(name=topic, partitions=(0,)),)),
            24, 3)
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0  # type: ignore[attr-defined]
        self.transactional_ids[init.producer_id] = transactional_id  # type: ignore[attr-defined]
        return init.producer_id  # type: ignore[attr-defined]

    def marker(self, topic: str, producer_id: int, commit: bool) -> None:
        request = WriteTxnMarkersRequest(markers=(WritableTxnMarker(
            producer_id=producer_id, producer_epoch=0, transaction_result=commit,
            topics=(WritableTxnMarkerTopic(name=topic, partition_indexes=(0,)),), coordinator_epoch=0),))
        response = self.call(request, 27, 1)
        assert response.markers[0].topics[0].partitions[0].error_code == 0  # type: ignore[attr-defined]

    def latest(self, topic: str, isolation: int) -> int:
        request = ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=(ListOffsetsTopic(
            name=topic, partitions=(ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                         timestamp=-1),)),))
        return self.call(request, 2, 5).topics[0].partitions[0].offset  # type: ignore[attr-defined]


def txn(producer_id: int, sequence: int, values: list[bytes]) -> bytes:
    return build_batch([Record(None, v, (), 1_700_000_000_000) for v in values], producer_id=producer_id,
                       producer_epoch=0, base_sequence=sequence, transactional=True)


def read_values(broker: Broker, topic: str, isolation: str, count: int, timeout: float = 10) -> list[bytes]:
    records = consume(broker.bootstrap_servers, topic, count, isolation=isolation, timeout=timeout)
    return [r.value for r in records]  # type: ignore[misc]


def test_commit_visible_abort_invisible_open_blocks(broker: Broker) -> None:
    topic = unique_topic("rc")
    create_topic(broker.bootstrap_servers, topic)
    client = RawClient(broker)
    first, second, third = client.begin(topic), client.begin(topic), client.begin(topic)
    client.produce(topic, txn(first, 0, [b"c1", b"c2"]))     # 0-1, committed below
    client.produce(topic, txn(second, 0, [b"a1"]))           # 2, aborted below
    client.marker(topic, first, commit=True)                 # 3
    client.produce(topic, txn(second, 1, [b"a2"]))           # 4
    client.marker(topic, second, commit=False)               # 5
    client.produce(topic, build_batch([Record(None, b"plain", (), 1)]))  # 6
    client.produce(topic, txn(third, 0, [b"open"]))          # 7, still open
    client.produce(topic, build_batch([Record(None, b"after-open", (), 1)]))  # 8

    assert client.latest(topic, 0) == 9       # high watermark
    assert client.latest(topic, 1) == 7       # last stable offset: the open transaction's first offset
    # Ask for one more than is stable: nothing past the open transaction may arrive.
    assert read_values(broker, topic, "read_committed", 4, timeout=3) == [b"c1", b"c2", b"plain"]
    assert read_values(broker, topic, "read_uncommitted", 7) == [
        b"c1", b"c2", b"a1", b"a2", b"plain", b"open", b"after-open"]

    client.marker(topic, third, commit=True)  # the open transaction ends: everything is stable
    assert client.latest(topic, 1) == 10
    assert read_values(broker, topic, "read_committed", 5) == [b"c1", b"c2", b"plain", b"open", b"after-open"]

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "x",
                         "isolation.level": "read_committed"})
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    consumer.close()
    assert (low, high) == (0, 10)
    client.wire.close()


def test_aborted_transactions_survive_a_restart(broker: Broker) -> None:
    topic = unique_topic("rcrestart")
    create_topic(broker.bootstrap_servers, topic)
    client = RawClient(broker)
    gone, kept = client.begin(topic), client.begin(topic)
    client.produce(topic, txn(gone, 0, [b"gone"]))
    client.marker(topic, gone, commit=False)
    client.produce(topic, txn(kept, 0, [b"kept"]))
    client.marker(topic, kept, commit=True)
    client.wire.close()
    broker.restart(hard=True)
    assert read_values(broker, topic, "read_committed", 1) == [b"kept"]
