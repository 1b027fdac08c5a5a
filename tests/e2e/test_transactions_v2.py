"""Transaction version 2 (KIP-890) on the wire, in the Java client's order.

No client here speaks transaction version 2 yet, so these tests send what Kafka's Java producer
sends once `transaction.version` 2 is finalized: InitProducerId, then transactional Produce v12
with no AddPartitionsToTxn (the broker adds the partition), EndTxn v5 (the epoch bumps at every
commit or abort and comes back), the next transaction with the returned epoch, TxnOffsetCommit v5
with no AddOffsetsToTxn. A real client (librdkafka, read_committed) then reads the partition.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kio.schema.add_partitions_to_txn.v4.request import AddPartitionsToTxnRequest as AddPartitionsV4
from kio.schema.add_partitions_to_txn.v4.request import AddPartitionsToTxnTopic as TopicV4
from kio.schema.add_partitions_to_txn.v4.request import AddPartitionsToTxnTransaction as TransactionV4
from kio.schema.add_partitions_to_txn.v5.request import AddPartitionsToTxnRequest as AddPartitionsV5
from kio.schema.add_partitions_to_txn.v5.request import AddPartitionsToTxnTopic as TopicV5
from kio.schema.add_partitions_to_txn.v5.request import AddPartitionsToTxnTransaction as TransactionV5
from kio.schema.end_txn.v5.request import EndTxnRequest
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest
from kio.schema.list_offsets.v5.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest, OffsetFetchRequestTopic
from kio.schema.produce.v12.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.txn_offset_commit.v5.request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from minikafka.protocol.codec import decode_response, encode_request
from minikafka.protocol.records import Record, build_batch
from minikafka.testing import Broker

from tests.support.clients import consume, create_topic, transactional_producer
from tests.support.names import unique_topic
from tests.support.transactions import txn_log_lines
from tests.support.waiting import poll_until
from tests.support.wire import Wire

NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_TXN_STATE, OPERATION_NOT_ATTEMPTED = 0, 3, 48, 55
PRODUCER_FENCED, TRANSACTION_ABORTABLE = 90, 120


class Tv2Producer:
    """One transactional id, driven as Kafka's TransactionManager does under transaction version 2."""

    def __init__(self, broker: Broker) -> None:
        self.wire = Wire(broker)
        self.correlation = 0
        self.transactional_id = unique_topic("tv2-tid")
        self.producer_id = -1
        self.epoch = -1
        self.sequence = 0

    def call(self, request: object, api_key: int, version: int) -> Any:
        self.correlation += 1
        self.wire.send(encode_request(self.correlation, request))
        return decode_response(self.wire.receive(), api_key, version)[1]

    def init(self) -> None:
        init = self.call(InitProducerIdRequest(transactional_id=self.transactional_id,
                                               transaction_timeout=timedelta(minutes=1)), 22, 5)
        assert init.error_code == NONE, init
        self.producer_id, self.epoch, self.sequence = init.producer_id, init.producer_epoch, 0

    def produce(self, topic: str, values: list[bytes], *, epoch: int | None = None) -> Any:
        """A transactional batch with Produce v12 (no AddPartitionsToTxn first); the partition result."""
        batch = build_batch([Record(None, v, (), 1_700_000_000_000) for v in values], producer_id=self.producer_id,
                            producer_epoch=self.epoch if epoch is None else epoch, base_sequence=self.sequence,
                            transactional=True)
        data = TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=0, records=batch),))
        request = ProduceRequest(transactional_id=self.transactional_id, acks=-1, timeout=timedelta(seconds=5),
                                 topic_data=(data,))
        result = self.call(request, 0, 12).responses[0].partition_responses[0]
        if result.error_code == NONE:
            self.sequence += len(values)
        return result

    def end(self, commit: bool, *, epoch: int | None = None) -> Any:
        """EndTxn v5; on success the producer continues with the returned id and epoch, at sequence 0
        (the Java client resets its sequences when the epoch bumps)."""
        response = self.call(EndTxnRequest(transactional_id=self.transactional_id, producer_id=self.producer_id,
                                           producer_epoch=self.epoch if epoch is None else epoch,
                                           committed=commit), 26, 5)
        if response.error_code == NONE:
            self.producer_id, self.epoch, self.sequence = response.producer_id, response.producer_epoch, 0
        return response

    def verify(self, topic: str, partitions: tuple[int, ...]) -> dict[int, int]:
        """AddPartitionsToTxn v4 `verify_only`, as a partition leader asks a TV1 coordinator."""
        request = AddPartitionsV4(transactions=(TransactionV4(
            transactional_id=self.transactional_id, producer_id=self.producer_id, producer_epoch=self.epoch,
            verify_only=True, topics=(TopicV4(name=topic, partitions=partitions),)),))
        response = self.call(request, 24, 4)
        assert response.error_code == NONE and response.results_by_transaction[0].transactional_id == \
            self.transactional_id
        return {r.partition_index: r.partition_error_code
                for r in response.results_by_transaction[0].topic_results[0].results_by_partition}

    def last_stable_offset(self, topic: str) -> int:
        request = ListOffsetsRequest(replica_id=-1, isolation_level=1, topics=(ListOffsetsTopic(
            name=topic, partitions=(ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                         timestamp=-1),)),))
        return self.call(request, 2, 5).topics[0].partitions[0].offset  # type: ignore[no-any-return]


def committed_values(broker: Broker, topic: str, count: int, timeout: float = 10) -> list[bytes]:
    return [r.value for r in consume(broker.bootstrap_servers, topic, count, isolation="read_committed",
                                     timeout=timeout)]  # type: ignore[misc]


def test_java_client_sequence_bumps_the_epoch_at_every_end(broker_factory) -> None:  # type: ignore[no-untyped-def]
    broker = broker_factory(**{"transaction.version": "2"})
    topic = unique_topic("tv2")
    create_topic(broker.bootstrap_servers, topic)
    producer = Tv2Producer(broker)
    producer.init()
    first_epoch = producer.epoch

    # Transaction 1: Produce v12 adds the partition itself; commit bumps the epoch and returns it.
    assert producer.produce(topic, [b"c1", b"c2"]).error_code == NONE                  # offsets 0-1
    assert producer.verify(topic, (0, 1)) == {0: NONE, 1: TRANSACTION_ABORTABLE}
    assert producer.last_stable_offset(topic) == 0, "the open transaction holds the LSO back"
    committed = producer.end(commit=True)
    assert (committed.error_code, committed.producer_id, committed.producer_epoch) == (
        NONE, producer.producer_id, first_epoch + 1)
    poll_until(lambda: producer.last_stable_offset(topic) == 3, message="the COMMIT marker (offset 2)")

    # A retried EndTxn carries the epoch before the bump: answered as done, with the current epoch.
    retried = producer.end(commit=True, epoch=first_epoch)
    assert (retried.error_code, retried.producer_epoch) == (NONE, first_epoch + 1)
    assert producer.end(commit=False, epoch=first_epoch).error_code == INVALID_TXN_STATE, "not a retry of an abort"

    # Transaction 2 with the new epoch; a produce of the old epoch is fenced, then an abort bumps again.
    assert producer.produce(topic, [b"a1"]).error_code == NONE                          # offset 3
    stale = producer.produce(topic, [b"zombie"], epoch=first_epoch)
    assert stale.error_code == PRODUCER_FENCED, stale
    assert producer.end(commit=True, epoch=first_epoch).error_code == PRODUCER_FENCED
    aborted = producer.end(commit=False)
    assert (aborted.error_code, aborted.producer_epoch) == (NONE, first_epoch + 2)
    poll_until(lambda: producer.last_stable_offset(topic) == 5, message="the ABORT marker (offset 4)")

    # An abort with no partition in the transaction is allowed from version 2 on, and bumps too;
    # a commit of nothing is not.
    assert producer.end(commit=True).error_code == INVALID_TXN_STATE
    empty_abort = producer.end(commit=False)
    assert (empty_abort.error_code, empty_abort.producer_epoch) == (NONE, first_epoch + 3)

    # Transaction 3 commits after the abort.
    assert producer.produce(topic, [b"c3"]).error_code == NONE                          # offset 5
    assert producer.end(commit=True).producer_epoch == first_epoch + 4
    poll_until(lambda: producer.last_stable_offset(topic) == 7, message="the second COMMIT marker")

    # librdkafka, read_committed: the committed records only; asking for one more shows no more come.
    assert committed_values(broker, topic, 4, timeout=3) == [b"c1", b"c2", b"c3"]
    assert [r.value for r in consume(broker.bootstrap_servers, topic, 4)] == [b"c1", b"c2", b"a1", b"c3"]

    # A new instance fences the old one: its epoch is past every epoch the old instance had.
    successor = Tv2Producer(broker)
    successor.transactional_id = producer.transactional_id
    successor.init()
    assert successor.producer_id == producer.producer_id and successor.epoch == first_epoch + 5
    assert producer.produce(topic, [b"fenced"]).error_code == PRODUCER_FENCED
    producer.wire.close()
    successor.wire.close()


def test_txn_offset_commit_v5_adds_the_group_partition(broker_factory) -> None:  # type: ignore[no-untyped-def]
    broker = broker_factory(**{"transaction.version": "2"})
    topic, group = unique_topic("tv2o"), unique_topic("tv2g")
    create_topic(broker.bootstrap_servers, topic)
    producer = Tv2Producer(broker)
    producer.init()

    def commit_offset(offset: int) -> int:
        request = TxnOffsetCommitRequest(
            transactional_id=producer.transactional_id, group_id=group, producer_id=producer.producer_id,
            producer_epoch=producer.epoch, topics=(TxnOffsetCommitRequestTopic(name=topic, partitions=(
                TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=offset, committed_metadata=None),
            )),))
        return producer.call(request, 28, 5).topics[0].partitions[0].error_code  # type: ignore[no-any-return]

    def fetched() -> int:
        request = OffsetFetchRequest(group_id=group, require_stable=True,
                                     topics=(OffsetFetchRequestTopic(name=topic, partition_indexes=(0,)),))
        return producer.call(request, 9, 7).topics[0].partitions[0].committed_offset  # type: ignore[no-any-return]

    assert commit_offset(7) == NONE, "no AddOffsetsToTxn: TxnOffsetCommit v5 added the group's partition"
    assert producer.end(commit=False).error_code == NONE
    assert commit_offset(9) == NONE
    assert producer.end(commit=True).error_code == NONE
    poll_until(lambda: fetched() == 9, message="the committed offset (the aborted 7 never shows)")
    producer.wire.close()


def test_below_transaction_version_2_produce_v12_still_needs_add_partitions(broker: Broker) -> None:
    """transaction.version 0 (the default): a client on version 1 sees exactly the old rules, even at v12."""
    topic = unique_topic("tv1")
    create_topic(broker.bootstrap_servers, topic)
    producer = Tv2Producer(broker)
    producer.init()
    assert producer.produce(topic, [b"unadded"]).error_code == INVALID_TXN_STATE
    ended = producer.end(commit=False)
    assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (INVALID_TXN_STATE, -1, -1)
    producer.wire.close()


def test_add_partitions_v5_batches_transactions_from_a_broker(broker_factory) -> None:  # type: ignore[no-untyped-def]
    """The batched format partition leaders send: each transaction is answered under its own id."""
    broker = broker_factory(**{"transaction.version": "2"})
    topic = unique_topic("tv2b")
    create_topic(broker.bootstrap_servers, topic, partitions=2)
    first, second = Tv2Producer(broker), Tv2Producer(broker)
    first.init()
    second.init()
    request = AddPartitionsV5(transactions=(
        TransactionV5(transactional_id=first.transactional_id, producer_id=first.producer_id,
                      producer_epoch=first.epoch, verify_only=False,
                      topics=(TopicV5(name=topic, partitions=(0, 1)),)),
        TransactionV5(transactional_id=second.transactional_id, producer_id=second.producer_id,
                      producer_epoch=second.epoch, verify_only=False,
                      topics=(TopicV5(name=topic, partitions=(0, 7)),)),
    ))
    response = first.call(request, 24, 5)
    results = {r.transactional_id: {p.partition_index: p.partition_error_code
                                    for p in r.topic_results[0].results_by_partition}
               for r in response.results_by_transaction}
    assert response.error_code == NONE
    assert results == {first.transactional_id: {0: NONE, 1: NONE},
                       second.transactional_id: {0: OPERATION_NOT_ATTEMPTED, 7: UNKNOWN_TOPIC_OR_PARTITION}}
    assert first.verify(topic, (0, 1)) == {0: NONE, 1: NONE}
    assert second.verify(topic, (0,)) == {0: TRANSACTION_ABORTABLE}
    first.wire.close()
    second.wire.close()


def test_state_records_carry_the_client_transaction_version(broker_factory) -> None:  # type: ignore[no-untyped-def]
    """`minikafka txn-log` (Kafka's TransactionLogMessageFormatter) shows ClientTransactionVersion 2 and
    the bumped epochs; a restart replays them and the retry rule still holds."""
    broker = broker_factory(**{"transaction.version": "2"})
    topic = unique_topic("tv2log")
    create_topic(broker.bootstrap_servers, topic)
    producer = Tv2Producer(broker)
    producer.init()
    first_epoch = producer.epoch
    assert producer.produce(topic, [b"logged"]).error_code == NONE
    assert producer.end(commit=True).error_code == NONE

    def dumped() -> list[dict[str, Any]]:
        return [line["value"]["data"] for line in txn_log_lines(broker.data_dir, producer.transactional_id)]  # type: ignore[index]

    poll_until(lambda: [d["transactionStatus"] for d in dumped()] == [0, 1, 2, 4], message="CompleteCommit written")
    states = dumped()
    assert [d.get("clientTransactionVersion", 0) for d in states] == [0, 2, 2, 2]
    assert [d["producerEpoch"] for d in states] == [first_epoch, first_epoch, first_epoch + 1, first_epoch + 1]
    producer.wire.close()

    broker.stop()
    broker.start()
    again = Tv2Producer(broker)
    again.transactional_id, again.producer_id = producer.transactional_id, producer.producer_id
    retried = again.end(commit=True, epoch=first_epoch)
    assert (retried.error_code, retried.producer_epoch) == (NONE, first_epoch + 1)
    again.wire.close()


def test_a_version_1_client_is_unchanged_on_a_version_2_broker(broker_factory) -> None:  # type: ignore[no-untyped-def]
    """librdkafka (AddPartitionsToTxn v0, EndTxn v0-1, Produce <= v10) on `transaction.version=2`:
    its epoch stays across transactions and its state records carry no client version."""
    broker = broker_factory(**{"transaction.version": "2"})
    topic, transactional_id = unique_topic("tv1on2"), unique_topic("tv1on2-tid")
    create_topic(broker.bootstrap_servers, topic)
    producer = transactional_producer(broker.bootstrap_servers, transactional_id)
    producer.begin_transaction()
    producer.produce(topic, b"kept")
    producer.commit_transaction(15)
    producer.begin_transaction()
    producer.produce(topic, b"dropped")
    assert producer.flush(10) == 0, "sent, so the abort has a partition to write its marker to"
    producer.abort_transaction(15)

    def dumped() -> list[dict[str, Any]]:
        return [line["value"]["data"] for line in txn_log_lines(broker.data_dir, transactional_id)]  # type: ignore[index]

    poll_until(lambda: [d["transactionStatus"] for d in dumped()] == [0, 1, 2, 4, 1, 3, 5], message="both ended")
    states = dumped()
    assert {d["producerEpoch"] for d in states} == {states[0]["producerEpoch"]}, "no epoch bump for version 1"
    assert all("clientTransactionVersion" not in d for d in states)
    assert committed_values(broker, topic, 2, timeout=3) == [b"kept"]
