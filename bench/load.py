"""Hostile-load figures for minikafka: many connections, a client that never reads, connections dropped
mid-request. Measured, never asserted; `make load` runs it, `--json out.json` keeps the figures.

Run with `make load` or `.venv/bin/python bench/load.py [--connections 1000] [--hog-fetches 200]
[--dropped 10000] [--latency-requests 400] [--json out.json]`. The broker runs as a subprocess on
127.0.0.1 (`--port 0`, the port read from its `broker ready` log line) with a fresh data dir; its
RSS and open descriptors are read from /proc through psutil. Every wait has a deadline and the
broker is stopped at the end, even on error.

Phases:
1. `--connections` concurrent connections, each sending ApiVersions then Metadata and reading both.
2. A second client's Metadata and Fetch latency (p50/p99) alone, then while a hog connection has
   pipelined `--hog-fetches` Fetch requests of 1 MiB each and reads nothing; the broker's RSS
   before the hog and its peak while the hog waits.
3. `--dropped` connections opened and dropped mid-request (half frames, whole frames, size
   prefixes; half closed with RST): the broker's descriptors, TCP connections and RSS before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import psutil
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from minikafka.protocol.codec import decode_response, encode_request

START_DEADLINE_S = 30.0
PHASE_DEADLINE_S = 120.0
TOPIC = "load"
HOG_RECORDS = 11  # of 100 KB each: a Fetch of 1 MiB comes back full
HOG_RECORD_BYTES = 100_000
MIB = 1 << 20


# ------------------------------------------------------------------------------------------- broker


class Broker:
    def __init__(self, data_dir: Path, log_path: Path) -> None:
        args = [sys.executable, "-m", "minikafka.broker", "serve", "--host", "127.0.0.1", "--port", "0",
                "--data-dir", str(data_dir), "--log-format", "json",
                "--override", "log.initial.task.delay.ms=3600000"]
        self.log_path = log_path
        with open(log_path, "wb") as log_file:
            self.process = subprocess.Popen(args, stdout=log_file, stderr=subprocess.STDOUT)
        self.port = self._wait_ready()
        self.ps = psutil.Process(self.process.pid)

    def _wait_ready(self) -> int:
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"broker exited: {self.log_path.read_text()}")
            for line in self.log_path.read_text(errors="replace").splitlines():
                if '"broker ready"' in line:
                    return int(json.loads(line)["port"])
            time.sleep(0.05)
        raise TimeoutError("broker not ready")

    def rss_mib(self) -> float:
        return self.ps.memory_info().rss / MIB

    def fds(self) -> int:
        return self.ps.num_fds()

    def tcp_connections(self) -> int:
        return sum(1 for c in self.ps.net_connections(kind="tcp") if c.status == psutil.CONN_ESTABLISHED)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


# ------------------------------------------------------------------------------------------ wire


async def _receive(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


def _metadata() -> MetadataRequest:
    return MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=TOPIC),),
                           allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def _fetch(partition_max_bytes: int) -> FetchRequest:
    return FetchRequest(max_wait=timedelta(milliseconds=0), min_bytes=1, max_bytes=partition_max_bytes,
                        isolation_level=0, session_id=0, session_epoch=-1, topics=(FetchTopic(
                            topic=TOPIC, partitions=(FetchPartition(partition=0, fetch_offset=0,
                                                                    partition_max_bytes=partition_max_bytes,
                                                                    log_start_offset=-1),)),),
                        forgotten_topics_data=(), rack_id="")


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


# ------------------------------------------------------------------------------------------ phases


async def many_connections(broker: Broker, count: int) -> dict[str, Any]:
    """`count` connections open at once, each answered ApiVersions and Metadata."""
    opened: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    started = time.monotonic()
    connect_results = await asyncio.gather(
        *(asyncio.wait_for(asyncio.open_connection("127.0.0.1", broker.port), PHASE_DEADLINE_S)
          for _ in range(count)), return_exceptions=True)
    opened = [r for r in connect_results if isinstance(r, tuple)]

    async def ask(index: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        writer.write(encode_request(index, ApiVersionsRequest()) + encode_request(index + 1, _metadata()))
        first = decode_response(await _receive(reader), 18, 0)[0]
        second, metadata = decode_response(await _receive(reader), 3, 12)
        return first == index and second == index + 1 and metadata.topics[0].error_code == 0

    answers = await asyncio.wait_for(asyncio.gather(
        *(ask(2 * i, r, w) for i, (r, w) in enumerate(opened)), return_exceptions=True), PHASE_DEADLINE_S)
    elapsed = time.monotonic() - started
    peak = {"rss_mib": broker.rss_mib(), "fds": broker.fds(), "tcp": broker.tcp_connections()}
    for _reader, writer in opened:
        writer.close()
    return {"connections": count, "connected": len(opened), "answered": sum(1 for a in answers if a is True),
            "seconds": round(elapsed, 2), "broker_rss_mib_while_open": round(peak["rss_mib"], 1),
            "broker_fds_while_open": peak["fds"], "broker_tcp_while_open": peak["tcp"]}


async def _latencies(broker: Broker, requests: int) -> dict[str, float]:
    """A well-behaved client: alternating Metadata and a small Fetch, one at a time, in ms."""
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
    metadata, fetch = [], []
    try:
        for corr in range(requests):
            is_metadata = corr % 2 == 0
            frame = encode_request(corr, _metadata() if is_metadata else _fetch(HOG_RECORD_BYTES // 2))
            started = time.perf_counter()
            writer.write(frame)
            answered = await asyncio.wait_for(_receive(reader), PHASE_DEADLINE_S)
            (metadata if is_metadata else fetch).append((time.perf_counter() - started) * 1000)
            assert struct.unpack_from(">i", answered)[0] == corr
    finally:
        writer.close()
    return {"metadata_p50_ms": round(_percentile(metadata, 0.5), 3),
            "metadata_p99_ms": round(_percentile(metadata, 0.99), 3),
            "fetch_p50_ms": round(_percentile(fetch, 0.5), 3), "fetch_p99_ms": round(_percentile(fetch, 0.99), 3)}


async def hog(broker: Broker, fetches: int, requests: int) -> dict[str, Any]:
    await _latencies(broker, requests)  # warm-up: first-use costs stay out of the baseline
    alone = await _latencies(broker, requests)
    rss_before = broker.rss_mib()
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
    hog_socket = writer.get_extra_info("socket")
    hog_socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    writer.write(b"".join(encode_request(i, _fetch(MIB)) for i in range(fetches)))
    await writer.drain()
    peak = rss_before
    sampler_stop = asyncio.Event()

    async def sample() -> None:
        nonlocal peak
        while not sampler_stop.is_set():
            peak = max(peak, broker.rss_mib())
            await asyncio.sleep(0.02)

    sampler = asyncio.create_task(sample())
    with_hog = await _latencies(broker, requests)
    # One more second of the hog unread, so the peak covers a broker that had time to pile up responses.
    await asyncio.sleep(1.0)
    sampler_stop.set()
    await sampler
    # Now read everything: the responses must all come, in order.
    in_order = 0
    for i in range(fetches):
        corr = struct.unpack_from(">i", await asyncio.wait_for(_receive(reader), PHASE_DEADLINE_S))[0]
        in_order += corr == i
    writer.close()
    return {"hog_fetches": fetches, "hog_fetch_bytes": MIB, "rss_before_mib": round(rss_before, 1),
            "rss_peak_with_hog_mib": round(peak, 1), "rss_growth_mib": round(peak - rss_before, 1),
            "hog_responses_in_order": in_order, "latency_alone": alone, "latency_with_hog": with_hog}


async def _drop_one(port: int, payload: bytes, reset: bool) -> None:
    _reader, writer = await asyncio.open_connection("127.0.0.1", port)
    if reset:
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.write(payload)
    await writer.drain()
    writer.close()
    await writer.wait_closed()


async def dropped(broker: Broker, count: int) -> dict[str, Any]:
    """Connections dropped at every stage of a request: RSS sampled per quarter to tell a leak (growing
    with the count) from the allocator keeping what the first connections used (flat after)."""
    request = encode_request(1, _fetch(HOG_RECORD_BYTES // 2))
    payloads = [request[: len(request) // 2], request, request[:4], request * 3, b""]
    before = {"fds": broker.fds(), "tcp": broker.tcp_connections(), "rss_mib": broker.rss_mib()}
    rss_by_quarter: list[float] = []
    started = time.monotonic()
    batch = 200
    for first in range(0, count, batch):
        await asyncio.wait_for(asyncio.gather(*(
            _drop_one(broker.port, payloads[i % len(payloads)], i % 2 == 1)
            for i in range(first, min(first + batch, count)))), PHASE_DEADLINE_S)
        done = min(first + batch, count)
        if done * 4 // count > len(rss_by_quarter):
            rss_by_quarter.append(round(broker.rss_mib(), 1))
    elapsed = time.monotonic() - started
    settled = _wait_for(lambda: broker.fds() <= before["fds"] and broker.tcp_connections() <= before["tcp"])
    after = {"fds": broker.fds(), "tcp": broker.tcp_connections(), "rss_mib": broker.rss_mib()}
    return {"dropped": count, "seconds": round(elapsed, 2), "settled": settled,
            "fds_before": before["fds"], "fds_after": after["fds"], "tcp_before": before["tcp"],
            "tcp_after": after["tcp"], "rss_before_mib": round(before["rss_mib"], 1),
            "rss_by_quarter_mib": rss_by_quarter, "rss_after_mib": round(after["rss_mib"], 1)}


def _wait_for(predicate: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + PHASE_DEADLINE_S
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def _prepare_topic(broker: Broker) -> None:
    bootstrap = f"127.0.0.1:{broker.port}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)], operation_timeout=10)[TOPIC].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for _ in range(HOG_RECORDS):
        producer.produce(TOPIC, value=os.urandom(HOG_RECORD_BYTES))
    if producer.flush(30) != 0:
        raise RuntimeError("records not acknowledged")


async def run(args: argparse.Namespace, broker: Broker) -> dict[str, Any]:
    _prepare_topic(broker)
    results: dict[str, Any] = {"broker_rss_start_mib": round(broker.rss_mib(), 1), "broker_fds_start": broker.fds()}
    results["many_connections"] = await many_connections(broker, args.connections)
    results["hog"] = await hog(broker, args.hog_fetches, args.latency_requests)
    results["dropped"] = await dropped(broker, args.dropped)
    results["broker_alive"] = broker.process.poll() is None
    return results


def _print(results: dict[str, Any]) -> None:
    many, hogged, drop = results["many_connections"], results["hog"], results["dropped"]
    alone, busy = hogged["latency_alone"], hogged["latency_with_hog"]
    print(f"broker at start: RSS {results['broker_rss_start_mib']} MiB, {results['broker_fds_start']} fds")
    print(f"1. {many['connections']} concurrent connections: {many['connected']} connected, {many['answered']} "
          f"answered ApiVersions+Metadata in {many['seconds']} s (broker RSS {many['broker_rss_mib_while_open']} "
          f"MiB, {many['broker_fds_while_open']} fds, {many['broker_tcp_while_open']} TCP while open)")
    print(f"2. hog pipelining {hogged['hog_fetches']} Fetches of 1 MiB, reading nothing: broker RSS "
          f"{hogged['rss_before_mib']} -> peak {hogged['rss_peak_with_hog_mib']} MiB "
          f"(+{hogged['rss_growth_mib']} MiB); {hogged['hog_responses_in_order']}/{hogged['hog_fetches']} "
          "responses in order once read")
    for name in ("metadata", "fetch"):
        print(f"   other client {name:8s} p50 {alone[name + '_p50_ms']:.3f} ms / p99 {alone[name + '_p99_ms']:.3f} "
              f"ms alone;  p50 {busy[name + '_p50_ms']:.3f} ms / p99 {busy[name + '_p99_ms']:.3f} ms with the hog")
    print(f"3. {drop['dropped']} connections dropped mid-request in {drop['seconds']} s: fds {drop['fds_before']} -> "
          f"{drop['fds_after']}, TCP {drop['tcp_before']} -> {drop['tcp_after']}, RSS {drop['rss_before_mib']} -> "
          f"{drop['rss_after_mib']} MiB (after each quarter: {drop['rss_by_quarter_mib']}), "
          f"back to the starting fds and TCP count: {drop['settled']}")
    print(f"broker alive at the end: {results['broker_alive']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--hog-fetches", type=int, default=200)
    parser.add_argument("--dropped", type=int, default=10_000)
    parser.add_argument("--latency-requests", type=int, default=1000)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="minikafka-load-") as tmp:
        broker = Broker(Path(tmp) / "data", Path(tmp) / "broker.log")
        try:
            results = asyncio.run(run(args, broker))
        finally:
            broker.stop()
    _print(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if results["broker_alive"] else 1


if __name__ == "__main__":
    sys.exit(main())
