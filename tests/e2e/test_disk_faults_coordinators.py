"""The coordinators on a real full disk (a 2 MiB tmpfs, as in test_disk_faults.py), with confluent-kafka.

- A transaction committed while its data partition cannot take the COMMIT marker stays in
  PrepareCommit (read_committed stops at it, the id answers CONCURRENT_TRANSACTIONS); once space is
  freed the marker is written by the coordinator's retries, CompleteCommit follows and the records
  are read committed. Stopped while stuck, the broker finishes the transaction on restart.
- SyncGroup whose assignment cannot be stored: the leader and the follower waiting in SyncGroup
  are both answered NOT_COORDINATOR at once (not at the rebalance timeout), and the group rebalances.
- InitProducerId when the producer id block cannot be persisted is COORDINATOR_LOAD_IN_PROGRESS,
  which the client retries until the disk has room again.

Only the data partition's segment (or `__consumer_offsets`') is full: it is padded to end exactly on
a page, so the next write needs a page the full tmpfs does not have, while `__transaction_state`
keeps the slack of its last page for PrepareCommit.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.init_producer_id.v3.request import InitProducerIdRequest
from kio.schema.join_group.v3.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.join_group.v3.response import JoinGroupResponse
from kio.schema.list_offsets.v5.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.sync_group.v3.request import SyncGroupRequest, SyncGroupRequestAssignment
from kio.static.primitive import i32Timedelta
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode
from minikafka.testing import Broker

from tests.support.brokers import process_broker
from tests.support.clients import consume, create_topic, transactional_producer
from tests.support.names import unique_topic
from tests.support.waiting import poll_until

from . import test_disk_faults
from .test_disk_faults import commit_offset, fill, raw_round_trip

tiny_disk = test_disk_faults.tiny_disk  # the fixture: a 2 MiB tmpfs mounted for the test

PAGE = 4096
PROBE_BYTES = 300
# Values from 64 to 8000 bytes have 2-byte varint lengths, so the batch overhead measured on the
# probe holds for the padding record too.
MIN_PADDING = 200
STUCK_WARNING = "cannot complete the transaction"
LATEST = -1
READ_COMMITTED = 1
# 3 s of a full disk: several retries (100 ms, then doubling to 1 s apart) fail meanwhile.
STUCK_CHECKS = 6
STUCK_CHECK_INTERVAL_S = 0.5
GROUP = "disk-group"
SESSION_TIMEOUT = timedelta(seconds=30)
REBALANCE_TIMEOUT = timedelta(minutes=5)


def start_broker(tiny_disk: Path, tmp_path: Path) -> Broker:
    logs = tmp_path / "logs"
    logs.mkdir()
    broker = process_broker(tiny_disk / "data", logs, {"offsets.topic.num.partitions": "1",
                                                        "transaction.state.log.num.partitions": "1"})
    return broker.start()


def segment_size(broker: Broker, topic: str) -> int:
    [segment] = (broker.data_dir / f"{topic}-0").glob("*.log")
    return segment.stat().st_size


def produce_in_transaction(producer: Producer, topic: str, value: bytes) -> None:
    errors: list[Any] = []
    producer.produce(topic, value, partition=0, on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(15) == 0 and errors == [None]


def open_transaction_on_a_full_page(broker: Broker, topic: str, transactional_id: str) -> tuple[
        Producer, list[bytes]]:
    """A producer with an open transaction whose records fill the data segment to a page boundary."""
    producer = transactional_producer(broker.bootstrap_servers, transactional_id)
    producer.begin_transaction()
    probe = b"p" * PROBE_BYTES
    produce_in_transaction(producer, topic, probe)
    size = segment_size(broker, topic)
    overhead = size - PROBE_BYTES
    padding_bytes = (-size) % PAGE - overhead
    if padding_bytes < MIN_PADDING:
        padding_bytes += PAGE
    padding = b"q" * padding_bytes
    produce_in_transaction(producer, topic, padding)
    assert segment_size(broker, topic) % PAGE == 0, "the padding record must end the segment on a page"
    return producer, [probe, padding]


def last_stable_offset(broker: Broker, topic: str) -> int:
    request = ListOffsetsRequest(replica_id=-1, isolation_level=READ_COMMITTED, topics=(ListOffsetsTopic(
        name=topic, partitions=(ListOffsetsPartition(partition_index=0, timestamp=LATEST),)),))
    response = raw_round_trip(broker.port, request, ApiKey.LIST_OFFSETS, 5)
    partition = response.topics[0].partitions[0]
    assert partition.error_code == ErrorCode.none
    return int(partition.offset)


def transaction_state(broker: Broker, transactional_id: str) -> str:
    response = raw_round_trip(broker.port, DescribeTransactionsRequest(transactional_ids=(transactional_id,)),
                              ApiKey.DESCRIBE_TRANSACTIONS, 0)
    [state] = response.transaction_states
    assert state.error_code == ErrorCode.none
    return str(state.transaction_state)


def init_producer_id_error(broker: Broker, transactional_id: str | None) -> ErrorCode:
    request = InitProducerIdRequest(transactional_id=transactional_id,
                                    transaction_timeout=i32Timedelta.parse(timedelta(seconds=60)))
    return ErrorCode(raw_round_trip(broker.port, request, ApiKey.INIT_PRODUCER_ID, 3).error_code)


def broker_log_lines(broker: Broker) -> list[dict[str, Any]]:
    return [json.loads(line) for line in broker.logs().splitlines() if line.startswith("{")]


def refused_init_producer_ids(broker: Broker) -> int:
    return sum(line.get("event") == "request failed" and line.get("error") == "coordinator_load_in_progress"
               for line in broker_log_lines(broker))


def test_commit_stuck_on_a_full_disk_completes_once_space_is_freed(tiny_disk: Path, tmp_path: Path) -> None:
    broker = start_broker(tiny_disk, tmp_path)
    try:
        topic, transactional_id = unique_topic("txn-disk"), "txn-disk"
        create_topic(broker.bootstrap_servers, topic)
        producer, values = open_transaction_on_a_full_page(broker, topic, transactional_id)

        filler = fill(tiny_disk)
        producer.commit_transaction(15)  # PrepareCommit fits; the COMMIT marker does not
        assert transaction_state(broker, transactional_id) == "PrepareCommit"
        assert last_stable_offset(broker, topic) == 0, "read_committed stops at the open transaction"
        assert init_producer_id_error(broker, transactional_id) == ErrorCode.concurrent_transactions
        poll_until(lambda: STUCK_WARNING in broker.logs(), message="the coordinator's warning")
        # While the disk stays full the retries (at most a second apart) keep failing: still stuck.
        for _ in range(STUCK_CHECKS):
            assert transaction_state(broker, transactional_id) == "PrepareCommit"
            assert last_stable_offset(broker, topic) == 0
            time.sleep(STUCK_CHECK_INTERVAL_S)

        filler.unlink()
        poll_until(lambda: last_stable_offset(broker, topic) == len(values) + 1, timeout=30,
                   message="the COMMIT marker to be written by a retry")
        assert transaction_state(broker, transactional_id) == "CompleteCommit"
        assert [r.value for r in consume(broker.bootstrap_servers, topic, 2, isolation="read_committed")] == values

        # The producer goes on with its next transaction.
        producer.begin_transaction()
        produce_in_transaction(producer, topic, b"next")
        producer.commit_transaction(15)
        assert [r.value for r in consume(broker.bootstrap_servers, topic, 3, isolation="read_committed")] == [
            *values, b"next"]
        logs = broker.logs()
        assert logs.count(STUCK_WARNING) == 1, "one warning per failure streak, not one per retry"
        assert "Traceback" not in logs
    finally:
        try:
            broker.stop()
        except Exception:
            broker.kill()


def test_broker_stopped_with_a_commit_pending_finishes_it_on_restart(tiny_disk: Path, tmp_path: Path) -> None:
    broker = start_broker(tiny_disk, tmp_path)
    try:
        topic, transactional_id = unique_topic("txn-disk-restart"), "txn-disk-restart"
        create_topic(broker.bootstrap_servers, topic)
        producer, values = open_transaction_on_a_full_page(broker, topic, transactional_id)
        filler = fill(tiny_disk)
        producer.commit_transaction(15)
        assert transaction_state(broker, transactional_id) == "PrepareCommit"
        producer.flush(1)
        del producer
        assert broker.stop() == 0

        filler.unlink()
        broker.start()
        poll_until(lambda: last_stable_offset(broker, topic) == len(values) + 1,
                   message="recovery to write the COMMIT marker")
        assert transaction_state(broker, transactional_id) == "CompleteCommit"
        assert [r.value for r in consume(broker.bootstrap_servers, topic, 2, isolation="read_committed")] == values
        assert "Traceback" not in broker.logs()
    finally:
        try:
            broker.stop()
        except Exception:
            broker.kill()


def test_init_producer_id_without_room_for_an_id_block_is_retried_by_the_client(
        tiny_disk: Path, tmp_path: Path) -> None:
    broker = start_broker(tiny_disk, tmp_path)
    try:
        topic = unique_topic("pid-disk")
        create_topic(broker.bootstrap_servers, topic)
        filler = fill(tiny_disk)  # before any producer id was handed out: the first block cannot be written
        assert init_producer_id_error(broker, None) == ErrorCode.coordinator_load_in_progress

        reports: list[Any] = []
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True, "linger.ms": 0,
                             "message.timeout.ms": 30000})
        producer.produce(topic, b"idempotent", partition=0, on_delivery=lambda err, msg: reports.append(
            (err, msg.offset())))
        # The client keeps asking for an id: it would fail the message on an error it deems fatal.
        poll_until(lambda: producer.poll(0.1) == 0 and refused_init_producer_ids(broker) >= 3,
                   message="the producer to retry InitProducerId")
        assert reports == []
        filler.unlink()
        assert producer.flush(30) == 0
        assert reports == [(None, 0)], "the idempotent producer got its id once the disk had room"
        warnings = [line for line in broker_log_lines(broker)
                    if "cannot persist the next producer id block" in str(line.get("event"))]
        assert len(warnings) == 1
        assert "Traceback" not in broker.logs()
        assert not list((broker.data_dir).glob("*.tmp")), "no torn temporary block file is left"
    finally:
        try:
            broker.stop()
        except Exception:
            broker.kill()


def join_group(broker: Broker, member_id: str = "") -> JoinGroupResponse:
    request = JoinGroupRequest(group_id=GROUP, session_timeout=i32Timedelta.parse(SESSION_TIMEOUT),
                               rebalance_timeout=i32Timedelta.parse(REBALANCE_TIMEOUT), member_id=member_id,
                               protocol_type="consumer",
                               protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),))
    response = raw_round_trip(broker.port, request, ApiKey.JOIN_GROUP, 3)
    assert response.error_code == ErrorCode.none
    return response


def sync_group(broker: Broker, member_id: str, generation: int,
               assignments: dict[str, bytes] | None = None) -> tuple[ErrorCode, bytes]:
    request = SyncGroupRequest(group_id=GROUP, generation_id=generation, member_id=member_id, group_instance_id=None,
                               assignments=tuple(SyncGroupRequestAssignment(member_id=m, assignment=a)
                                                 for m, a in (assignments or {}).items()))
    response = raw_round_trip(broker.port, request, ApiKey.SYNC_GROUP, 3)
    return ErrorCode(response.error_code), bytes(response.assignment)


def offsets_segment_size(broker: Broker) -> int:
    [segment] = (broker.data_dir / "__consumer_offsets-0").glob("*.log")
    return segment.stat().st_size


def pad_offsets_segment_to_a_page(broker: Broker, topic: str) -> None:
    """Offset commits (of another group, same partition) sized so the segment ends on a page."""
    before = offsets_segment_size(broker)
    assert commit_offset(broker.port, "padding", topic, "m" * PROBE_BYTES) == ErrorCode.none
    size = offsets_segment_size(broker)
    overhead = size - before - PROBE_BYTES
    padding_bytes = (-size) % PAGE - overhead
    if padding_bytes < MIN_PADDING:
        padding_bytes += PAGE
    assert commit_offset(broker.port, "padding", topic, "m" * padding_bytes) == ErrorCode.none
    assert offsets_segment_size(broker) % PAGE == 0, "the padding commit must end the segment on a page"


def test_sync_group_whose_assignment_cannot_be_stored_answers_every_member(tiny_disk: Path, tmp_path: Path) -> None:
    broker = start_broker(tiny_disk, tmp_path)
    try:
        topic = unique_topic("group-disk")
        create_topic(broker.bootstrap_servers, topic)
        first = join_group(broker)
        assert sync_group(broker, first.member_id, first.generation_id, {first.member_id: b"all"}) == \
            (ErrorCode.none, b"all")
        with ThreadPoolExecutor(max_workers=2) as pool:
            # A second member: both are in generation 2 once the first rejoins.
            second_join = pool.submit(join_group, broker)
            poll_until(lambda: f"rebalance group {GROUP} in state Stable (new member" in broker.logs(),
                       message="the second member's join to start a rebalance")
            rejoined = join_group(broker, first.member_id)
            second = second_join.result(timeout=15)
            assert rejoined.generation_id == second.generation_id == 2 and rejoined.leader == first.member_id

            pad_offsets_segment_to_a_page(broker, topic)
            filler = fill(tiny_disk)
            follower = pool.submit(sync_group, broker, second.member_id, 2)
            # The follower must be waiting before the leader's store fails; arriving after it, it would rightly
            # get REBALANCE_IN_PROGRESS from a group already back in PreparingRebalance.
            poll_until(lambda: f"member {second.member_id} of group {GROUP} awaits the leader's assignment "
                               "for generation 2" in broker.logs(), message="the follower to wait in SyncGroup")
            leader = sync_group(broker, first.member_id, 2, {first.member_id: b"A", second.member_id: b"B"})
            assert leader == (ErrorCode.not_coordinator, b"")
            # Answered now: without the fix it would wait for a session or rebalance timeout (30 s, 5 min).
            assert follower.result(timeout=15) == (ErrorCode.not_coordinator, b"")

            filler.unlink()
            # As clients do after NOT_COORDINATOR: both rejoin the group, which is rebalancing.
            follower_join = pool.submit(join_group, broker, second.member_id)
            leader_join = join_group(broker, first.member_id)
            assert leader_join.generation_id == follower_join.result(timeout=15).generation_id == 3
            follower = pool.submit(sync_group, broker, second.member_id, 3)
            assert sync_group(broker, first.member_id, 3, {first.member_id: b"A", second.member_id: b"B"}) == \
                (ErrorCode.none, b"A")
            assert follower.result(timeout=15) == (ErrorCode.none, b"B")
        assert "Traceback" not in broker.logs()
    finally:
        try:
            broker.stop()
        except Exception:
            broker.kill()
