"""How cost grows: minikafka's figures along seven axes, with Tansu next to it where it can run the point.

    .venv/bin/python bench/curves.py [--quick] [--only minikafka|tansu] [--curves partitions,clients,...]
                                      [--json out.json]

`make bench` runs it after bench.py. `--quick` runs fewer and smaller points (about a tenth of the time).
Each broker runs as a subprocess on 127.0.0.1, as in bench.py (minikafka on a fresh data dir, Tansu with
its in-memory engine); broker CPU is the process's scheduler clock (bench.py). Figures are printed, never
asserted; a point that fails (or that a broker cannot run) prints its error and the others still run.

Curves:
- partitions: 1 to 10,000 partitions (topics of at most 100). confluent-kafka produces round-robin over
  all of them and a consumer assigned to all of them reads everything back: broker CPU per message.
  A full Metadata request's time, and minikafka's start-up time with that many partitions on disk.
- clients: 1 to 200 connections at once, each a raw producer (one batch of 100 x 100 B per request,
  acks=all, one request in flight) and then a raw consumer (64 KiB fetches from its own partition).
  Raw wire clients, so 200 of them fit in the driving process: broker CPU per message, request latency.
- size: 10 B to 1 MiB values, confluent-kafka producing and consuming: broker CPU per message and MiB.
- recovery (minikafka only; Tansu keeps nothing on disk): N MiB written in 16 KiB batches, then the
  restart after kill -9 (every segment past the recovery point is re-read, CRCs checked, indexes
  rebuilt) and after a clean stop; milliseconds to the first ApiVersions answer, since the logs load
  before the listener binds. Per GiB: the time beyond a start of the same broker with the topic empty.
  The files are in the page cache: disk reads are not part of the figure.
- txns: 0 to 1,000 ongoing transactions on one partition behind 1,000 committed messages; a
  read_committed Fetch from offset 0 returns the committed messages below the last stable offset.
- groups: 1 to 100 classic members joining one group at once (raw JoinGroup with the member id round
  trip, then SyncGroup); time until the last member has its assignment, with minikafka's default
  `group.initial.rebalance.delay.ms` of 0 (Kafka's is 3,000). minikafka only: Tansu 0.6 never answered
  the second JoinGroup v5 (the one carrying the member id it had handed out), even for one member.
- txn_producers: 1 to 16 confluent-kafka transactional producers at once, one thread each, committing
  transactions of 10 messages over 3 partitions one after the other (bench.py's transaction workload):
  transactions/s and broker CPU per transaction.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import struct
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sync_group.v3.request import SyncGroupRequest, SyncGroupRequestAssignment
from minikafka.protocol.codec import decode_response, encode_request
from minikafka.protocol.records import iter_whole_batches

from bench import (  # bench/ is the script's folder, so it is on sys.path
    Broker,
    check_produced,
    consume_from_start,
    format_figure,
    produce_request,
    produce_with_broker_cpu,
    raw_batch,
    run_transactions,
    selected_brokers,
)

POINT_DEADLINE_S = 300.0
START_DEADLINE_S = 120.0
TOPIC_DEADLINE_S = 120.0
MAX_PARTITIONS_PER_TOPIC = 100
RAW_BATCH_RECORDS = 100
RAW_VALUE = b"v" * 100
FETCH_BYTES = 64 * 1024
MEMBER_ID_REQUIRED = 79
REBALANCE_IN_PROGRESS = 27
MAX_JOIN_ATTEMPTS = 20
BIG_MESSAGES = {"max.message.bytes": str(2 * 1024 * 1024)}


@dataclass(frozen=True)
class Points:
    partitions: Sequence[int]
    partition_messages: int
    clients: Sequence[int]
    client_messages: int
    client_fetches: int
    sizes: Sequence[int]
    size_bytes: int
    size_max_messages: int
    recovery_mib: Sequence[int]
    open_txns: Sequence[int]
    txn_fetches: int
    members: Sequence[int]
    txn_producers: Sequence[int]
    producer_txns: int


FULL = Points(partitions=(1, 100, 1_000, 10_000), partition_messages=200_000,
              clients=(1, 10, 50, 100, 200), client_messages=400_000, client_fetches=2_000,
              sizes=(10, 100, 1_024, 10_240, 102_400, 1_048_576), size_bytes=256 << 20, size_max_messages=200_000,
              recovery_mib=(256, 512, 1_024), open_txns=(0, 1, 10, 100, 1_000), txn_fetches=500,
              members=(1, 10, 50, 100), txn_producers=(1, 2, 4, 8, 16), producer_txns=2_000)
QUICK = Points(partitions=(1, 100, 1_000), partition_messages=30_000,
               clients=(1, 10, 50), client_messages=60_000, client_fetches=300,
               sizes=(10, 1_024, 102_400, 1_048_576), size_bytes=32 << 20, size_max_messages=30_000,
               recovery_mib=(32, 64), open_txns=(0, 10, 100), txn_fetches=300,
               members=(1, 10, 25), txn_producers=(1, 4, 8), producer_txns=400)


# ----------------------------------------------------------------------------------------- raw wire


class Wire:
    """One connection, one request in flight: the cheapest client, so the broker's cost dominates."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.correlation = 0

    @classmethod
    async def open(cls, port: int) -> Wire:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def call(self, request: Any) -> Any:
        self.correlation += 1
        self.writer.write(encode_request(self.correlation, request, client_id="curves"))
        (size,) = struct.unpack(">i", await self.reader.readexactly(4))
        correlation, body = decode_response(await self.reader.readexactly(size), request.__api_key__,
                                            request.__version__)
        if correlation != self.correlation:
            raise RuntimeError(f"correlation id {correlation}, expected {self.correlation}")
        return body

    def close(self) -> None:
        self.writer.close()


def run_async(work: Awaitable[Any]) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(work, POINT_DEADLINE_S)
    return asyncio.run(bounded())


def fetch_request(topic: str, partition: int, max_bytes: int, isolation_level: int = 0) -> FetchRequest:
    return FetchRequest(max_wait=timedelta(milliseconds=100), min_bytes=1, max_bytes=max_bytes,
                        isolation_level=isolation_level,
                        session_id=0, session_epoch=-1, topics=(FetchTopic(topic=topic, partitions=(FetchPartition(
                            partition=partition, fetch_offset=0, partition_max_bytes=max_bytes),)),),
                        forgotten_topics_data=(), rack_id="")


def fetched_records(response: Any) -> int:
    count = 0
    for topic in response.responses:
        for partition in topic.partitions:
            if partition.error_code:
                raise RuntimeError(f"fetch {topic.topic}-{partition.partition_index}: error {partition.error_code}")
            if partition.records:
                # A full fetch may end in a partial batch, which the client drops (Kafka sends one too).
                count += sum(header.records_count for _pos, header in iter_whole_batches(partition.records))
    return count


# ------------------------------------------------------------------------------------------ helpers


def create_topics(broker: Broker, partitions_by_topic: dict[str, int], config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    new = [NewTopic(name, count, 1, config=config or {}) for name, count in partitions_by_topic.items()]
    for future in admin.create_topics(new, operation_timeout=TOPIC_DEADLINE_S).values():
        future.result(TOPIC_DEADLINE_S)
    deadline = time.monotonic() + TOPIC_DEADLINE_S
    while time.monotonic() < deadline:
        topics = admin.list_topics(timeout=30).topics
        if all(name in topics and topics[name].error is None and len(topics[name].partitions) == count
               for name, count in partitions_by_topic.items()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"{len(partitions_by_topic)} topics not all in metadata within {TOPIC_DEADLINE_S} s")


def spread(total_partitions: int, prefix: str) -> dict[str, int]:
    """`total_partitions` as topics of at most MAX_PARTITIONS_PER_TOPIC partitions."""
    topics = max(1, total_partitions // MAX_PARTITIONS_PER_TOPIC)
    return {f"{prefix}-{index}": total_partitions // topics for index in range(topics)}


def restart_keeping_data(broker: Broker, kill: bool) -> float:
    """Stop (SIGTERM, or SIGKILL when `kill`) and start on the same data; seconds to the first ApiVersions."""
    assert broker.process is not None
    if kill:
        broker.process.kill()
        broker.process.wait(30)
        broker.process = None
    else:
        broker.stop()
    return broker.start(keep_data=True)


def produce_with_client(broker: Broker, targets: list[tuple[str, int]], count: int, value: bytes,
                        **config: Any) -> tuple[float, float]:
    """confluent-kafka produces `count` messages round-robin over `targets`; (seconds, broker CPU seconds)."""
    produced, cpu = produce_with_broker_cpu(
        broker, targets, count, value, POINT_DEADLINE_S,
        **{"queue.buffering.max.kbytes": 2_000_000, "message.max.bytes": 4 * 1024 * 1024, **config})
    return produced.seconds, cpu


def consume_with_client(broker: Broker, targets: list[tuple[str, int]], count: int) -> tuple[float, float]:
    """confluent-kafka assigned to `targets` from offset 0 reads `count` messages; (seconds, broker CPU)."""
    return consume_from_start(broker, targets, count, POINT_DEADLINE_S, **{
        "fetch.max.bytes": 64 * 1024 * 1024, "receive.message.max.bytes": 80 * 1024 * 1024})


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


# ------------------------------------------------------------------------------------------- curves


Figures = dict[str, float]


@dataclass(frozen=True)
class Column:
    key: str
    label: str


@dataclass(frozen=True)
class Curve:
    name: str
    axis: str
    points: Callable[[Points], Sequence[int]]
    measure: Callable[[Broker, Points, int], Figures]
    columns: tuple[Column, ...]
    brokers: tuple[str, ...] = ("minikafka", "tansu")
    fresh_broker_per_point: bool = True


def measure_partitions(broker: Broker, points: Points, partitions: int) -> Figures:
    topics = spread(partitions, f"parts{partitions}")
    create_topics(broker, topics)
    targets = [(topic, index) for index in range(max(topics.values())) for topic in topics]
    messages = points.partition_messages
    produce_s, produce_cpu = produce_with_client(broker, targets, messages, RAW_VALUE)
    consume_s, consume_cpu = consume_with_client(broker, targets, messages + 1)

    async def metadata_times() -> tuple[list[float], float]:
        wire = await Wire.open(broker.port)
        try:
            times = []
            request = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                      include_topic_authorized_operations=False)
            await wire.call(request)
            cpu_before = broker.cpu_seconds()
            for _ in range(20):
                started = time.perf_counter()
                response = await wire.call(request)
                times.append(time.perf_counter() - started)
            cpu = broker.cpu_seconds() - cpu_before
            seen = sum(len(topic.partitions) for topic in response.topics if topic.name in topics)
            if seen != partitions:
                raise RuntimeError(f"Metadata lists {seen} of {partitions} partitions")
            return times, cpu / 20
        finally:
            wire.close()

    metadata, metadata_cpu = run_async(metadata_times())
    figures = {"produce_us_msg": produce_cpu / messages * 1e6, "produce_msgs_s": messages / produce_s,
               "fetch_us_msg": consume_cpu / messages * 1e6, "fetch_msgs_s": messages / consume_s,
               "metadata_ms": statistics.median(metadata) * 1000,
               "metadata_cpu_ms": metadata_cpu * 1000}
    if broker.name == "minikafka":
        figures["restart_ms"] = restart_keeping_data(broker, kill=False) * 1000
    return figures


def measure_clients(broker: Broker, points: Points, clients: int) -> Figures:
    topic = f"clients{clients}"
    create_topics(broker, {topic: clients})
    batch = raw_batch(RAW_BATCH_RECORDS, RAW_VALUE)
    requests_each = max(1, points.client_messages // RAW_BATCH_RECORDS // clients)
    fetches_each = max(1, points.client_fetches // clients)

    async def producer(index: int, latencies: list[float]) -> None:
        wire = await Wire.open(broker.port)
        try:
            request = produce_request(topic, {index: batch})
            for _ in range(requests_each):
                started = time.perf_counter()
                check_produced(await wire.call(request))
                latencies.append(time.perf_counter() - started)
        finally:
            wire.close()

    async def consumer(index: int, latencies: list[float], records: list[int]) -> None:
        wire = await Wire.open(broker.port)
        try:
            request = fetch_request(topic, index, FETCH_BYTES)
            for _ in range(fetches_each):
                started = time.perf_counter()
                records.append(fetched_records(await wire.call(request)))
                latencies.append(time.perf_counter() - started)
        finally:
            wire.close()

    async def run_all() -> Figures:
        produce_latencies: list[float] = []
        cpu_before = broker.cpu_seconds()
        started = time.perf_counter()
        await asyncio.gather(*(producer(index, produce_latencies) for index in range(clients)))
        produce_s = time.perf_counter() - started
        produce_cpu = broker.cpu_seconds() - cpu_before
        produced = clients * requests_each * RAW_BATCH_RECORDS
        fetch_latencies: list[float] = []
        records: list[int] = []
        cpu_before = broker.cpu_seconds()
        await asyncio.gather(*(consumer(index, fetch_latencies, records) for index in range(clients)))
        fetch_cpu = broker.cpu_seconds() - cpu_before
        fetched = sum(records)
        return {"produce_us_msg": produce_cpu / produced * 1e6, "produce_msgs_s": produced / produce_s,
                "produce_p50_ms": percentile(produce_latencies, 0.5) * 1000,
                "produce_p99_ms": percentile(produce_latencies, 0.99) * 1000,
                "fetch_us_msg": fetch_cpu / fetched * 1e6,
                "fetch_p50_ms": percentile(fetch_latencies, 0.5) * 1000,
                "fetch_p99_ms": percentile(fetch_latencies, 0.99) * 1000}

    return run_async(run_all())


def measure_size(broker: Broker, points: Points, size: int) -> Figures:
    topic = f"size{size}"
    create_topics(broker, {topic: 3}, BIG_MESSAGES)
    count = max(200, min(points.size_max_messages, points.size_bytes // size))
    targets = [(topic, partition) for partition in range(3)]
    produce_s, produce_cpu = produce_with_client(broker, targets, count, b"s" * size)
    consume_s, consume_cpu = consume_with_client(broker, targets, count + 1)
    mib = count * size / (1 << 20)
    return {"messages": count, "produce_us_msg": produce_cpu / count * 1e6, "produce_ms_mib": produce_cpu / mib * 1000,
            "produce_mib_s": mib / produce_s, "fetch_us_msg": consume_cpu / count * 1e6,
            "fetch_ms_mib": consume_cpu / mib * 1000, "fetch_mib_s": mib / consume_s}


RECOVERY_PARTITIONS = 4
RECOVERY_CONNECTIONS = 4
RECOVERY_BATCH_RECORDS = 160  # x 100 B: 16 KiB batches, librdkafka's usual size at linger 5 ms


def measure_recovery(broker: Broker, points: Points, mib: int) -> Figures:
    topic = f"recovery{mib}"
    create_topics(broker, {topic: RECOVERY_PARTITIONS})
    empty_s = restart_keeping_data(broker, kill=False)  # the same broker and topic with nothing to load
    batch = raw_batch(RECOVERY_BATCH_RECORDS, RAW_VALUE)
    requests = (mib << 20) // (len(batch) * RECOVERY_PARTITIONS)

    async def write() -> None:
        async def one(share: int) -> None:
            wire = await Wire.open(broker.port)
            try:
                request = produce_request(topic, dict.fromkeys(range(RECOVERY_PARTITIONS), batch))
                for _ in range(share):
                    check_produced(await wire.call(request))
            finally:
                wire.close()
        await asyncio.gather(*(one(requests // RECOVERY_CONNECTIONS) for _ in range(RECOVERY_CONNECTIONS)))

    run_async(write())
    written = requests // RECOVERY_CONNECTIONS * RECOVERY_CONNECTIONS
    written_gib = written * len(batch) * RECOVERY_PARTITIONS / (1 << 30)
    killed_s = restart_keeping_data(broker, kill=True)  # before any recovery-point checkpoint: all re-read
    clean_s = restart_keeping_data(broker, kill=False)
    return {"gib": written_gib, "empty_ms": empty_s * 1000, "after_kill_ms": killed_s * 1000,
            "after_kill_s_gib": (killed_s - empty_s) / written_gib, "clean_ms": clean_s * 1000,
            "clean_s_gib": (clean_s - empty_s) / written_gib}


COMMITTED_BEFORE_OPEN = 1_000


def measure_open_txns(broker: Broker, points: Points, open_txns: int) -> Figures:
    topic = f"txns{open_txns}"
    create_topics(broker, {topic: 1})

    async def run_point() -> Figures:
        wire = await Wire.open(broker.port)
        try:
            plain = raw_batch(RAW_BATCH_RECORDS, RAW_VALUE)
            for _ in range(COMMITTED_BEFORE_OPEN // RAW_BATCH_RECORDS):
                check_produced(await wire.call(produce_request(topic, {0: plain})))
            for number in range(open_txns):
                transactional_id = f"{topic}-open-{number}"
                init = await wire.call(InitProducerIdRequest(transactional_id=transactional_id,
                                                             transaction_timeout=timedelta(minutes=10)))
                if init.error_code:
                    raise RuntimeError(f"InitProducerId: error {init.error_code}")
                added = await wire.call(AddPartitionsToTxnRequest(
                    v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=init.producer_id,
                    v3_and_below_producer_epoch=init.producer_epoch,
                    v3_and_below_topics=(AddPartitionsToTxnTopic(name=topic, partitions=(0,)),)))
                code = added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
                if code:
                    raise RuntimeError(f"AddPartitionsToTxn: error {code}")
                batch = raw_batch(1, RAW_VALUE, producer_id=init.producer_id, producer_epoch=init.producer_epoch,
                                  base_sequence=0, transactional=True)
                check_produced(await wire.call(produce_request(topic, {0: batch}, transactional_id)))
            request = fetch_request(topic, 0, 1 << 20, isolation_level=1)
            if (got := fetched_records(await wire.call(request))) != COMMITTED_BEFORE_OPEN:
                raise RuntimeError(f"read_committed fetch returned {got} records, not {COMMITTED_BEFORE_OPEN}")
            latencies = []
            cpu_before = broker.cpu_seconds()
            for _ in range(points.txn_fetches):
                started = time.perf_counter()
                await wire.call(request)
                latencies.append(time.perf_counter() - started)
            cpu = broker.cpu_seconds() - cpu_before
            return {"fetch_cpu_us": cpu / points.txn_fetches * 1e6,
                    "fetch_p50_ms": percentile(latencies, 0.5) * 1000}
        finally:
            wire.close()

    return run_async(run_point())


def consumer_subscription(topic: str) -> bytes:
    name = topic.encode()
    return struct.pack(">hih", 0, 1, len(name)) + name + struct.pack(">i", -1)


def measure_groups(broker: Broker, points: Points, members: int) -> Figures:
    topic = "groups"
    if members == points.members[0]:
        create_topics(broker, {topic: 1})
    group = f"join-{members}"
    protocols = (JoinGroupRequestProtocol(name="range", metadata=consumer_subscription(topic)),)

    def join(group: str, member_id: str) -> JoinGroupRequest:
        return JoinGroupRequest(group_id=group, session_timeout=timedelta(seconds=45),
                                rebalance_timeout=timedelta(seconds=60), member_id=member_id,
                                group_instance_id=None, protocol_type="consumer", protocols=protocols)

    async def member(wire: Wire, group: str) -> None:
        """Join and sync as a client does: rejoin on MEMBER_ID_REQUIRED and REBALANCE_IN_PROGRESS."""
        member_id = ""
        for _attempt in range(MAX_JOIN_ATTEMPTS):
            joined = await wire.call(join(group, member_id))
            member_id = joined.member_id or member_id
            if joined.error_code in (MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS):
                continue
            if joined.error_code:
                raise RuntimeError(f"JoinGroup: error {joined.error_code}")
            assignments = tuple(SyncGroupRequestAssignment(member_id=m.member_id, assignment=b"")
                                for m in joined.members)
            synced = await wire.call(SyncGroupRequest(group_id=group, generation_id=joined.generation_id,
                                                      member_id=member_id, group_instance_id=None,
                                                      assignments=assignments))
            if synced.error_code == REBALANCE_IN_PROGRESS:
                continue
            if synced.error_code:
                raise RuntimeError(f"SyncGroup: error {synced.error_code}")
            return
        raise RuntimeError(f"not in the group after {MAX_JOIN_ATTEMPTS} joins")

    async def run_point() -> Figures:
        warm_up = await Wire.open(broker.port)  # the first group in a broker's life pays one-off set-up costs
        try:
            await member(warm_up, f"{group}-warm-up")
        finally:
            warm_up.close()
        wires = await asyncio.gather(*(Wire.open(broker.port) for _ in range(members)))
        try:
            cpu_before = broker.cpu_seconds()
            started = time.perf_counter()
            await asyncio.gather(*(member(wire, group) for wire in wires))
            return {"join_ms": (time.perf_counter() - started) * 1000,
                    "join_cpu_ms": (broker.cpu_seconds() - cpu_before) * 1000}
        finally:
            for wire in wires:
                wire.close()

    return run_async(run_point())


def measure_txn_producers(broker: Broker, points: Points, producers: int) -> Figures:
    result = run_transactions(broker, f"txn-producers{producers}", producers, points.producer_txns)
    return {"txn_s": result.per_second, "txn_cpu_us": result.broker_cpu_us_each}


CURVES = [
    Curve("partitions", "partitions", lambda p: p.partitions, measure_partitions, (
        Column("produce_us_msg", "produce CPU us/msg"), Column("produce_msgs_s", "produce msgs/s"),
        Column("fetch_us_msg", "fetch CPU us/msg"), Column("fetch_msgs_s", "fetch msgs/s"),
        Column("metadata_ms", "Metadata ms"),
        Column("metadata_cpu_ms", "Metadata CPU ms"), Column("restart_ms", "restart ms"))),
    Curve("clients", "connections", lambda p: p.clients, measure_clients, (
        Column("produce_us_msg", "produce CPU us/msg"), Column("produce_msgs_s", "produce msgs/s"),
        Column("produce_p50_ms", "produce p50 ms"), Column("produce_p99_ms", "produce p99 ms"),
        Column("fetch_us_msg", "fetch CPU us/msg"), Column("fetch_p50_ms", "fetch p50 ms"),
        Column("fetch_p99_ms", "fetch p99 ms"))),
    Curve("size", "value bytes", lambda p: p.sizes, measure_size, (
        Column("messages", "messages"), Column("produce_us_msg", "produce CPU us/msg"),
        Column("produce_ms_mib", "produce CPU ms/MiB"), Column("produce_mib_s", "produce MiB/s"),
        Column("fetch_us_msg", "fetch CPU us/msg"), Column("fetch_ms_mib", "fetch CPU ms/MiB"),
        Column("fetch_mib_s", "fetch MiB/s")), fresh_broker_per_point=False),
    Curve("recovery", "MiB on disk", lambda p: p.recovery_mib, measure_recovery, (
        Column("gib", "GiB"), Column("empty_ms", "start, topic empty ms"), Column("after_kill_ms", "after kill -9 ms"),
        Column("after_kill_s_gib", "kill -9 extra s/GiB"), Column("clean_ms", "after clean stop ms"),
        Column("clean_s_gib", "clean extra s/GiB")), brokers=("minikafka",)),
    Curve("txns", "open transactions", lambda p: p.open_txns, measure_open_txns, (
        Column("fetch_cpu_us", "read_committed fetch CPU us"), Column("fetch_p50_ms", "fetch p50 ms"))),
    Curve("groups", "members", lambda p: p.members, measure_groups, (
        Column("join_ms", "join ms"), Column("join_cpu_ms", "join CPU ms")), brokers=("minikafka",),
        fresh_broker_per_point=False),
    Curve("txn_producers", "transactional producers", lambda p: p.txn_producers, measure_txn_producers, (
        Column("txn_s", "transactions/s"), Column("txn_cpu_us", "broker CPU us/transaction")),
        fresh_broker_per_point=False),
]


# ------------------------------------------------------------------------------------------- report


@dataclass
class CurveResult:
    curve: Curve
    figures: dict[str, dict[int, Figures]] = field(default_factory=dict)  # broker -> point -> figures
    errors: dict[str, dict[int, str]] = field(default_factory=dict)


def print_curve(result: CurveResult, points: Sequence[int]) -> None:
    curve = result.curve
    names = list(result.figures)
    print(f"\n{curve.name}: by {curve.axis}")
    header = f"{curve.axis:>18} {'broker':>10}" + "".join(f" {c.label:>23}" for c in curve.columns)
    print(header)
    print("-" * len(header))
    for point in points:
        for name in names:
            figures = result.figures[name].get(point)
            if figures is None:
                error = result.errors.get(name, {}).get(point, "not run")
                print(f"{point:>18,} {name:>10}  {error[:100]}")
                continue
            cells = "".join(f" {format_figure(figures.get(c.key)):>23}" for c in curve.columns)
            print(f"{point:>18,} {name:>10}{cells}")


def run_curve(curve: Curve, broker: Broker, points: Points) -> tuple[dict[int, Figures], dict[int, str]]:
    figures: dict[int, Figures] = {}
    errors: dict[int, str] = {}
    broker_running = False
    for point in curve.points(points):
        print(f"  {broker.name}: {curve.name} {point} ...", file=sys.stderr, flush=True)
        try:
            if curve.fresh_broker_per_point or not broker_running:
                broker.start()
                broker_running = True
            figures[point] = curve.measure(broker, points, point)
        except Exception as exc:  # one point's failure must not hide the others
            errors[point] = repr(exc)
            broker_running = False
            print(f"  {broker.name}: {curve.name} {point} failed: {exc!r}", file=sys.stderr, flush=True)
    broker.stop()
    return figures, errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer and smaller points")
    parser.add_argument("--only", choices=["minikafka", "tansu"], help="run one broker")
    parser.add_argument("--curves", default=",".join(c.name for c in CURVES),
                        help=f"comma-separated subset of {','.join(c.name for c in CURVES)}")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures here as JSON")
    args = parser.parse_args()
    wanted = args.curves.split(",")
    unknown = set(wanted) - {c.name for c in CURVES}
    if unknown:
        parser.error(f"unknown curves: {sorted(unknown)}")
    points = QUICK if args.quick else FULL

    brokers = selected_brokers(args.only)
    results: list[CurveResult] = []
    try:
        for curve in (c for c in CURVES if c.name in wanted):
            result = CurveResult(curve)
            for broker in brokers:
                if broker.name in curve.brokers:
                    result.figures[broker.name], result.errors[broker.name] = run_curve(curve, broker, points)
            results.append(result)
            print_curve(result, curve.points(points))
    finally:
        for broker in brokers:
            broker.cleanup()
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"quick": args.quick, "curves": {
            r.curve.name: {"axis": r.curve.axis, "figures": r.figures, "errors": r.errors} for r in results}},
            indent=2) + "\n")
    failed = any(errors for r in results for errors in r.errors.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
