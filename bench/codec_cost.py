"""What decoding a request costs in minikafka's process: kio's native reader alone, and the bounds
check (`minikafka.protocol.guard`) that runs before it on every request.

`make bench` prints this table after the broker comparison; `python bench/codec_cost.py` prints it
alone. Requests are typical of each client flow; figures are the best of 5 runs, in µs per request.
"""

from __future__ import annotations

import sys
import timeit
from datetime import timedelta
from typing import Any

from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.txn_offset_commit.v3.request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kio.static.primitive import Records, i32Timedelta
from minikafka.protocol.codec import _request_reader, _request_schemas, encode_request
from minikafka.protocol.guard import check_request

ROUNDS = 5
CALLS = 5000


def _requests() -> list[tuple[str, Any]]:
    timeout = i32Timedelta.parse(timedelta(seconds=30))
    produce = ProduceRequest(transactional_id=None, acks=-1, timeout=timeout, topic_data=(TopicProduceData(
        name="bench", partition_data=tuple(PartitionProduceData(index=i, records=Records(b"x" * 16384))
                                           for i in range(3))),))
    fetch = FetchRequest(
        replica_id=-1, max_wait=i32Timedelta.parse(timedelta(milliseconds=500)), min_bytes=1, max_bytes=52428800,
        isolation_level=1, session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="",
        topics=tuple(FetchTopic(topic=f"topic-{t}", partitions=tuple(FetchPartition(
            partition=p, current_leader_epoch=0, fetch_offset=1000, last_fetched_epoch=-1, log_start_offset=-1,
            partition_max_bytes=1048576) for p in range(3))) for t in range(3)))
    metadata = MetadataRequest(topics=tuple(MetadataRequestTopic(topic_id=None, name=f"topic-{t}") for t in range(10)),
                               allow_auto_topic_creation=True, include_topic_authorized_operations=False)
    offsets = tuple(TxnOffsetCommitRequestPartition(partition_index=p, committed_offset=1000,
                                                    committed_leader_epoch=-1, committed_metadata="")
                    for p in range(3))
    txn_offsets = TxnOffsetCommitRequest(
        transactional_id="txn-1", group_id="group-1", producer_id=1000, producer_epoch=0, generation_id=1,
        member_id="member-1", group_instance_id=None,
        topics=(TxnOffsetCommitRequestTopic(name="input", partitions=offsets),))
    end_txn = EndTxnRequest(transactional_id="txn-1", producer_id=1000, producer_epoch=0, committed=True)
    return [("Produce v9, 3 partitions of 16 KiB", produce), ("Fetch v12, 3 topics x 3 partitions", fetch),
            ("Metadata v12, 10 topics", metadata), ("TxnOffsetCommit v3, 3 partitions", txn_offsets),
            ("EndTxn v3", end_txn)]


def _best_us(call: Any) -> float:
    return min(timeit.repeat(call, number=CALLS, repeat=ROUNDS)) / CALLS * 1e6


def measure() -> list[tuple[str, float, float]]:
    """(request, kio decode µs, guard µs) for each typical request."""
    rows = []
    for label, request in _requests():
        frame = encode_request(1, request)[4:]
        key, version = request.__api_key__, request.__version__
        header_cls, body_cls = _request_schemas(key, version)
        read_header, read_body = _request_reader(key, version)

        def kio_only(frame: bytes = frame, read_header: Any = read_header, read_body: Any = read_body) -> None:
            view = memoryview(frame)
            _header, size = read_header(view, 0)
            read_body(view, size)

        def guard(frame: bytes = frame, header_cls: type = header_cls, body_cls: type = body_cls) -> None:
            check_request(frame, header_cls, body_cls)

        rows.append((label, _best_us(kio_only), _best_us(guard)))
    return rows


def print_table(rows: list[tuple[str, float, float]]) -> None:
    print("\nRequest decoding in the broker process (µs per request, best of "
          f"{ROUNDS} x {CALLS} calls): kio's native reader, and the bounds check run before it.")
    header = f"{'request':40}{'kio decode':>14}{'guard':>10}{'guard/kio':>12}"
    print(header)
    print("-" * len(header))
    for label, kio_us, guard_us in rows:
        print(f"{label:40}{kio_us:>14.2f}{guard_us:>10.2f}{guard_us / kio_us:>12.2f}")


if __name__ == "__main__":
    print_table(measure())
    sys.exit(0)
