"""What the flight recorder costs a request: µs per request through `broker.dispatch.dispatch`, in-process.

    python bench/trace_cost.py [--calls N] [--rounds N]

For Produce (acks=1, one partition, one batch of 10 small records), Fetch (one partition, about ten
batches back) and Metadata (one topic: a body kept as is and rendered only when read), each variant:

- off: minikafka.trace.ring.size=0 and no --trace: the recorder is not registered (the observers every
  broker has, such as metrics, stay registered in every variant, so the differences are the recorder's);
- ring: the default, an in-memory ring of 1000 (what every broker pays unless the ring is turned off);
- ring + --trace FILE: every exchange also rendered and written as a JSON line (to a temporary file);
- ring + --trace FILE --trace-records: records decoded too.

Then the recorder alone, on one real exchange of each as dispatch hands it over: observe() into the
ring, observe() with a trace file, and rendering one kept entry as GET /trace does. "vs off" is the
difference to the same request with no recorder. The variants are interleaved round by round so that load from
other processes on a shared machine falls on all alike; each figure is the best round. Printed, never
asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
import timeit
from collections.abc import AsyncIterator, Callable, Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any

from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.static.primitive import Records, i32Timedelta
from minikafka.broker.config.config import build_config
from minikafka.broker.observe.recorder import FlightRecorder
from minikafka.broker.security.session import plaintext_session
from minikafka.broker.server import BrokerServer
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.dispatch import dispatch
from minikafka.broker.wire.hooks import Exchange
from minikafka.protocol.codec import encode_request
from minikafka.protocol.records import Record, build_batch

TOPIC = "bench-trace"
FETCH_TOPIC = "bench-trace-fetch"
FETCH_BATCHES = 10


def batch(count: int = 10, size: int = 20) -> bytes:
    return build_batch([Record(key=b"key-%d" % i, value=b"v" * size, timestamp=1_700_000_000_000 + i)
                        for i in range(count)])


@contextlib.asynccontextmanager
async def bench_broker(topics: Iterable[str], fetch_topic: str,
                       overrides: Iterable[str] = ()) -> AsyncIterator[tuple[Any, Callable[..., RequestContext]]]:
    """An in-process broker with `topics` created and `fetch_topic` holding 2 x FETCH_BATCHES batches;
    yields its services and a context factory for `dispatch`, and shuts it down afterwards."""
    with tempfile.TemporaryDirectory(prefix="minikafka-bench-") as data_dir:
        server = BrokerServer(build_config(overrides=list(overrides), host="127.0.0.1", port=0,
                                           data_dir=Path(data_dir)))
        await server.start()
        try:
            services = server.services
            assert services is not None and server.node is not None
            for topic in {*topics, fetch_topic}:
                services.logs.create_topic(topic, 1)
            fetch_log = services.logs.partition(fetch_topic, 0)
            assert fetch_log is not None
            for _ in range(FETCH_BATCHES * 2):
                fetch_log.append(bytearray(batch()), services.clock.now_ms())
            node = server.node

            def make_context(api_key: int, api_version: int, correlation_id: int,
                             client_id: str | None) -> RequestContext:
                return RequestContext(api_key, api_version, correlation_id, client_id, 1, "127.0.0.1:1", node,
                                      services, plaintext_session("127.0.0.1"))

            yield services, make_context
        finally:
            await server.shutdown()


def request_frames(topic: str = TOPIC, fetch_topic: str = FETCH_TOPIC) -> list[tuple[str, bytes]]:
    """A Produce of one batch to `topic`, a Fetch of about FETCH_BATCHES batches from `fetch_topic` and a
    Metadata request for `topic`, as dispatch takes them (no size prefix); also used by metrics_cost.py."""
    produce = ProduceRequest(transactional_id=None, acks=1, timeout=i32Timedelta.parse(timedelta(seconds=30)),
                             topic_data=(TopicProduceData(name=topic, partition_data=(
                                 PartitionProduceData(index=0, records=Records(batch())),)),))
    # About FETCH_BATCHES batches come back: partition_max_bytes is that many batches' worth.
    fetch = FetchRequest(
        replica_id=-1, max_wait=i32Timedelta.parse(timedelta(milliseconds=0)), min_bytes=1, max_bytes=1 << 20,
        isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="",
        topics=(FetchTopic(topic=fetch_topic, partitions=(FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
            partition_max_bytes=len(batch()) * FETCH_BATCHES),)),))
    metadata = MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=topic),),
                               allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    # dispatch takes the frame without its 4-byte size prefix.
    return [("Produce v9, 1 batch", encode_request(1, produce, "bench")[4:]),
            (f"Fetch v12, {FETCH_BATCHES} batches", encode_request(2, fetch, "bench")[4:]),
            ("Metadata v12, 1 topic", encode_request(3, metadata, "bench")[4:])]


def _recorder(ring_size: int, trace_file: str | None, decode_records: bool) -> FlightRecorder:
    return FlightRecorder(ring_size=ring_size, trace_file=trace_file, decode_records=decode_records,
                          apis=(), client_ids=(), topics=())


async def _per_call_us(frame: bytes, make_context: Any, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        await dispatch(frame, make_context)
    return (time.perf_counter() - start) / calls * 1e6


async def _measure(calls: int, rounds: int, trace_dir: Path) -> tuple[list[tuple[str, str, float]], list[Exchange]]:
    async with bench_broker([TOPIC], FETCH_TOPIC, ["minikafka.trace.ring.size=0"]) as (services, make_context):
        variants: list[tuple[str, Callable[[], FlightRecorder | None]]] = [
            ("off (ring.size=0)", lambda: None),
            ("ring (default 1000)", lambda: _recorder(1000, None, False)),
            ("ring + --trace FILE", lambda: _recorder(1000, str(trace_dir / "trace.jsonl"), False)),
            ("ring + --trace FILE --trace-records",
             lambda: _recorder(1000, str(trace_dir / "trace-records.jsonl"), True)),
        ]
        recorders = [make() for _, make in variants]
        # What every broker has registered anyway (the metrics observer): kept in every variant, so the
        # differences are the recorder's own.
        installed = list(services.observers.exchanges)
        print("observers in every variant: "
              + (", ".join(getattr(o, "__qualname__", repr(o)) for o in installed) or "none"))
        rows = []
        for label, frame in request_frames():
            best = [float("inf")] * len(variants)
            for _ in range(rounds):
                for index, recorder in enumerate(recorders):
                    services.observers.exchanges[:] = installed + ([] if recorder is None else
                                                                  [recorder.observe])
                    best[index] = min(best[index], await _per_call_us(frame, make_context, calls))
            rows += [(label, name, micros) for (name, _), micros in zip(variants, best, strict=True)]
        # One real exchange of each, as dispatch hands it to observers, for the recorder alone below.
        seen: list[Exchange] = []
        services.observers.exchanges[:] = [seen.append]
        for _label, frame in request_frames():
            await dispatch(frame, make_context)
        services.observers.exchanges[:] = installed
        for recorder in recorders:
            if recorder is not None:
                recorder.close()
        return rows, seen


def _best_us(call: Callable[[], object], calls: int, rounds: int) -> float:
    return min(timeit.repeat(call, number=calls, repeat=rounds)) / calls * 1e6


def _recorder_alone(exchanges: list[Exchange], trace_dir: Path, calls: int,
                    rounds: int) -> list[tuple[str, str, float]]:
    """The recorder's own share, on real exchanges: observe() into the ring, observe() with the trace file,
    and rendering one kept entry as GET /trace does."""
    rows = []
    for (label, _frame), exchange in zip(request_frames(), exchanges, strict=True):
        ring = _recorder(1000, None, False)
        traced = _recorder(1000, str(trace_dir / "alone.jsonl"), False)
        ring.observe(exchange)
        kept = ring.ring[-1].exchange
        rows += [(label, "observe() alone, ring", _best_us(lambda ring=ring, e=exchange: ring.observe(e), calls,
                                                            rounds)),
                 (label, "observe() alone, ring + --trace FILE",
                  _best_us(lambda traced=traced, e=exchange: traced.observe(e), calls, rounds)),
                 (label, "render one kept entry (GET /trace)",
                  _best_us(lambda ring=ring, kept=kept: ring.render(kept), calls, rounds))]
        traced.close()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000, help="requests per variant per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="minikafka-trace-") as trace_dir:
        rows, exchanges = asyncio.run(_measure(args.calls, args.rounds, Path(trace_dir)))
        sizes = {name: os.path.getsize(Path(trace_dir) / name) for name in os.listdir(trace_dir)}
        rows += _recorder_alone(exchanges, Path(trace_dir), args.calls, args.rounds)
    order = [label for label, _ in request_frames()]
    rows.sort(key=lambda row: order.index(row[0]))
    print(f"Flight recorder cost, µs per request (best of {args.rounds} rounds x {args.calls} calls)")
    print(f"{'request':<36}{'variant':<40}{'us/request':>10}{'vs off':>10}")
    baseline: dict[str, float] = {}
    for request, variant, micros in rows:
        if variant.startswith("off"):
            baseline[request] = micros
        through_dispatch = "alone" not in variant and "render" not in variant and not variant.startswith("off")
        extra = f"{micros - baseline[request]:+10.2f}" if through_dispatch else ""
        print(f"{request:<36}{variant:<40}{micros:>10.2f}{extra:>10}")
    print("trace file bytes written: " + ", ".join(f"{name} {size}" for name, size in sorted(sizes.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
