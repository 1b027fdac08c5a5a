"""Record the golden responses: fixed requests sent to a fresh broker, their answers kept byte for byte.

    .venv/bin/python -m tests.golden.record_responses [--out tests/golden/responses.json]

Run by hand from the repository root, never by the tests. It starts a fresh in-process broker
(tests/golden/exchanges.py BROKER_CONFIG: manual clock, fixed cluster id), waits for its coordinators to
load, and sends SCENARIO's requests in order on one connection, with fixed correlation ids (1, 2, ...),
client id, topic, group and transactional id. A request may use what an earlier answer said (the member
id JoinGroup hands out, the topic id, the producer id); each is built with protocol/build.py and encoded
with protocol/codec.py. Every request frame is stored with the response frame it got, as hex, in
tests/golden/responses.json; tests/golden/test_responses.py replays them against a fresh broker.

The scenario covers the main APIs at the version the newest client that uses them sends (the fuzz
corpus, tests/fuzz/corpus.jsonl, says which), and a second, older version for the busiest ones.

Re-recording says "the broker's answers changed on purpose": run it, then `git diff` the JSON file and
check every changed response against the change that caused it, then run tests/golden/test_responses.py.
"""

from __future__ import annotations

import argparse
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.build import build
from minikafka.protocol.codec import decode_response, encode_request, request_schema
from minikafka.protocol.records import Record, build_batch

from tests.golden.exchanges import GOLDEN_PATH, Exchange, Settle, Wire, golden_broker, save

CLIENT_ID = "golden"
TOPIC = "golden"
PARTITIONS = 2
GROUP = "golden-group"
TRANSACTIONAL_ID = "golden-txn"
# Record timestamps (CreateTime) are the request's, so the fetched bytes do not depend on the clock.
FIRST_TIMESTAMP_MS = 1_700_000_000_000
NO_REPLICA = -1  # a consumer's fetch, not a follower's
ISOLATION_READ_UNCOMMITTED = 0
ISOLATION_READ_COMMITTED = 1
LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
GROUP_KEY, TRANSACTION_KEY = 0, 1
TOPIC_RESOURCE = 2
MAX_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Step:
    name: str
    api_key: ApiKey
    api_version: int
    # The request's fields (protocol/build.py values) from the answers so far, by step name.
    fields: Callable[[dict[str, Any]], dict[str, Any]]
    settle: Settle | None = None


def _subscription(topics: list[str]) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, no user data."""
    encoded = b"".join(struct.pack(">h", len(topic)) + topic.encode() for topic in topics)
    return struct.pack(">hi", 0, len(topics)) + encoded + struct.pack(">i", -1)


def _assignment(topic: str, partitions: list[int]) -> bytes:
    """ConsumerProtocolAssignment v0: version, one topic's partitions, no user data."""
    return (struct.pack(">hih", 0, 1, len(topic)) + topic.encode() + struct.pack(">i", len(partitions))
            + b"".join(struct.pack(">i", partition) for partition in partitions) + struct.pack(">i", -1))


def _records(count: int, first: int, **batch: Any) -> bytes:
    return build_batch([Record(f"k{first + index}".encode(), f"v{first + index}".encode(),
                               (("h", b"golden"),) if index == 0 else (), FIRST_TIMESTAMP_MS + first + index)
                        for index in range(count)], **batch)


def _produce(partition: int, records: bytes, transactional_id: str | None = None) -> dict[str, Any]:
    return {"transactional_id": transactional_id, "acks": -1, "timeout": 30000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": partition, "records": records}]}]}


def _fetch_partitions() -> list[dict[str, Any]]:
    return [{"partition": partition, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": MAX_BYTES} for partition in range(PARTITIONS)]


def _fetch(isolation_level: int, topic: dict[str, Any]) -> dict[str, Any]:
    # No fetch session (epoch -1) and no wait: every partition's data is already there.
    return {"replica_id": NO_REPLICA, "replica_state": {"replica_id": NO_REPLICA, "replica_epoch": -1},
            "max_wait": 0, "min_bytes": 1, "max_bytes": 50 * MAX_BYTES, "isolation_level": isolation_level,
            "session_id": 0, "session_epoch": -1, "topics": [{**topic, "partitions": _fetch_partitions()}],
            "rack_id": ""}


def _list_offsets(isolation_level: int, timestamps: dict[int, int]) -> dict[str, Any]:
    return {"replica_id": NO_REPLICA, "isolation_level": isolation_level, "timeout": 30000,
            "topics": [{"name": TOPIC, "partitions": [
                {"partition_index": partition, "current_leader_epoch": -1, "timestamp": timestamp}
                for partition, timestamp in timestamps.items()]}]}


def _join(member_id: str) -> dict[str, Any]:
    return {"group_id": GROUP, "session_timeout": 45000, "rebalance_timeout": 300000, "member_id": member_id,
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": _subscription([TOPIC])}], "reason": None}


def _member(seen: dict[str, Any]) -> str:
    member_id: str = seen["join_group_v7_member_id_required"].member_id
    return member_id


def _producer(seen: dict[str, Any]) -> tuple[int, int]:
    answer = seen["init_producer_id_v4"]
    return int(answer.producer_id), int(answer.producer_epoch)


def _transactional_records(seen: dict[str, Any]) -> bytes:
    producer_id, producer_epoch = _producer(seen)
    return _records(2, 10, producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=0,
                    transactional=True)


SCENARIO: tuple[Step, ...] = (
    Step("api_versions_v4", ApiKey.API_VERSIONS, 4,
         lambda seen: {"client_software_name": "golden", "client_software_version": "1.0"}),
    Step("api_versions_v0", ApiKey.API_VERSIONS, 0, lambda seen: {}),
    Step("create_topics_v7", ApiKey.CREATE_TOPICS, 7, lambda seen: {
        "topics": [{"name": TOPIC, "num_partitions": PARTITIONS, "replication_factor": 1, "assignments": [],
                    "configs": [{"name": "retention.ms", "value": "86400000"}]}],
        "timeout": 30000, "validate_only": False}),
    Step("metadata_v13", ApiKey.METADATA, 13, lambda seen: {
        "topics": [{"topic_id": None, "name": TOPIC}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": True}),
    Step("metadata_v6", ApiKey.METADATA, 6, lambda seen: {
        "topics": [{"name": TOPIC}], "allow_auto_topic_creation": False}),
    Step("produce_v10", ApiKey.PRODUCE, 10, lambda seen: _produce(0, _records(3, 0))),
    Step("produce_v7", ApiKey.PRODUCE, 7, lambda seen: _produce(1, _records(1, 3))),
    Step("fetch_v16", ApiKey.FETCH, 16, lambda seen: _fetch(
        ISOLATION_READ_UNCOMMITTED, {"topic_id": seen["create_topics_v7"].topics[0].topic_id})),
    Step("list_offsets_v10", ApiKey.LIST_OFFSETS, 10,
         lambda seen: _list_offsets(ISOLATION_READ_UNCOMMITTED, {0: MAX_TIMESTAMP, 1: LATEST})),
    Step("list_offsets_v7", ApiKey.LIST_OFFSETS, 7,
         lambda seen: _list_offsets(ISOLATION_READ_COMMITTED, {0: EARLIEST, 1: LATEST})),
    Step("find_coordinator_v6", ApiKey.FIND_COORDINATOR, 6,
         lambda seen: {"key_type": GROUP_KEY, "coordinator_keys": [GROUP]}),
    Step("find_coordinator_v2", ApiKey.FIND_COORDINATOR, 2,
         lambda seen: {"key": TRANSACTIONAL_ID, "key_type": TRANSACTION_KEY}),
    Step("join_group_v7_member_id_required", ApiKey.JOIN_GROUP, 7, lambda seen: _join("")),
    Step("join_group_v7", ApiKey.JOIN_GROUP, 7, lambda seen: _join(_member(seen))),
    Step("sync_group_v5", ApiKey.SYNC_GROUP, 5, lambda seen: {
        "group_id": GROUP, "generation_id": seen["join_group_v7"].generation_id, "member_id": _member(seen),
        "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
        "assignments": [{"member_id": _member(seen), "assignment": _assignment(TOPIC, [0, 1])}]}),
    Step("heartbeat_v3", ApiKey.HEARTBEAT, 3, lambda seen: {
        "group_id": GROUP, "generation_id": seen["join_group_v7"].generation_id, "member_id": _member(seen),
        "group_instance_id": None}),
    Step("offset_commit_v9", ApiKey.OFFSET_COMMIT, 9, lambda seen: {
        "group_id": GROUP, "generation_id_or_member_epoch": seen["join_group_v7"].generation_id,
        "member_id": _member(seen), "group_instance_id": None,
        "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "committed_offset": 3, "committed_leader_epoch": 0, "committed_metadata": "m"},
            {"partition_index": 1, "committed_offset": 1, "committed_leader_epoch": -1, "committed_metadata": None},
        ]}]}),
    Step("offset_fetch_v9", ApiKey.OFFSET_FETCH, 9, lambda seen: {
        "groups": [{"group_id": GROUP, "member_id": None, "member_epoch": -1, "topics": None}],
        "require_stable": True}),
    Step("leave_group_v5", ApiKey.LEAVE_GROUP, 5, lambda seen: {
        "group_id": GROUP, "members": [{"member_id": _member(seen), "group_instance_id": None, "reason": "done"}]}),
    Step("init_producer_id_v4", ApiKey.INIT_PRODUCER_ID, 4, lambda seen: {
        "transactional_id": TRANSACTIONAL_ID, "transaction_timeout": 60000, "producer_id": -1,
        "producer_epoch": -1}),
    Step("add_partitions_to_txn_v3", ApiKey.ADD_PARTITIONS_TO_TXN, 3, lambda seen: {
        "v3_and_below_transactional_id": TRANSACTIONAL_ID, "v3_and_below_producer_id": _producer(seen)[0],
        "v3_and_below_producer_epoch": _producer(seen)[1],
        "v3_and_below_topics": [{"name": TOPIC, "partitions": [1]}]}),
    Step("produce_v10_transactional", ApiKey.PRODUCE, 10,
         lambda seen: _produce(1, _transactional_records(seen), TRANSACTIONAL_ID)),
    Step("end_txn_v3", ApiKey.END_TXN, 3, lambda seen: {
        "transactional_id": TRANSACTIONAL_ID, "producer_id": _producer(seen)[0],
        "producer_epoch": _producer(seen)[1], "committed": True},
         # partition 1: one record, two transactional ones, the COMMIT marker
         settle=Settle(TOPIC, 1, 4)),
    Step("fetch_v11_read_committed", ApiKey.FETCH, 11,
         lambda seen: _fetch(ISOLATION_READ_COMMITTED, {"topic": TOPIC})),
    Step("describe_configs_v4", ApiKey.DESCRIBE_CONFIGS, 4, lambda seen: {
        "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": TOPIC, "configuration_keys": None}],
        "include_synonyms": True, "include_documentation": False}),
)


def record(steps: tuple[Step, ...] = SCENARIO) -> list[Exchange]:
    exchanges: list[Exchange] = []
    seen: dict[str, Any] = {}
    with golden_broker() as broker, Wire(broker.port) as wire:
        for correlation_id, step in enumerate(steps, start=1):
            body = build(request_schema(step.api_key, step.api_version), **step.fields(seen))
            request = encode_request(correlation_id, body, CLIENT_ID)[4:]
            response = wire.exchange(request)
            answered, seen[step.name] = decode_response(response, step.api_key, step.api_version)
            if answered != correlation_id:
                raise RuntimeError(f"{step.name}: answer to correlation id {answered}, not {correlation_id}")
            if step.settle is not None:
                broker.wait_until_lso(step.settle.topic, step.settle.partition, step.settle.offset)
            exchanges.append(Exchange(step.name, int(step.api_key), step.api_version, request, response,
                                      step.settle))
    return exchanges


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=GOLDEN_PATH)
    args = parser.parse_args(argv)
    exchanges = record()
    save(exchanges, args.out)
    for exchange in exchanges:
        print(f"{exchange.name:36} request {len(exchange.request):5} bytes, response {len(exchange.response):6} bytes")
    print(f"{len(exchanges)} exchanges written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
