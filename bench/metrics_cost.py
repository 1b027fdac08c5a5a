"""What metrics cost: µs per request through `broker.dispatch.dispatch`, and ms per GET /metrics scrape.

    python bench/metrics_cost.py [--calls N] [--rounds N] [--partitions N]

Per request (Produce acks=1 of one 10-record batch, Fetch of about ten batches, Metadata of one topic),
in-process, with the exchange observers set to:
- none: the seam's fast path (no observer at all);
- metrics: BrokerMetrics.observe alone (installed on every broker);
- ring: the flight recorder's in-memory ring alone;
- ring + metrics: what a default broker runs.
Then `observe()` alone on an exchange with its real response, and a scrape (broker/prometheus.render)
of a broker holding `--partitions` partitions (100 topics), with 100 open transactions and 100 groups,
with the longest the event loop is held by GET /metrics's sliced render_async. Variants are
interleaved round by round so that load from other processes falls on all alike; each figure is the
best round. Times are the process's CPU time. Printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

from minikafka.broker.config.config import build_config
from minikafka.broker.observe.metrics import BrokerMetrics
from minikafka.broker.observe.prometheus import render, render_async
from minikafka.broker.observe.recorder import FlightRecorder
from minikafka.broker.server import BrokerServer
from minikafka.broker.wire.dispatch import dispatch
from minikafka.broker.wire.hooks import Exchange, ExchangeObserver
from minikafka.coordinator.group.state import Group, GroupState
from minikafka.coordinator.transaction.state import TxnMetadata, TxnState
from trace_cost import bench_broker, request_frames  # bench/ is the script's folder, on sys.path

TOPIC = "bench-metrics"


async def _per_call_us(frame: bytes, make_context: Any, calls: int) -> float:
    # CPU time of this process, not wall time: on a shared machine, time spent descheduled is not ours.
    start = time.process_time()
    for _ in range(calls):
        await dispatch(frame, make_context)
    return (time.process_time() - start) / calls * 1e6


def _best_us(call: Callable[[], object], calls: int, rounds: int) -> float:
    return min(timeit.repeat(call, number=calls, repeat=rounds, timer=time.process_time)) / calls * 1e6


async def _requests(calls: int, rounds: int) -> tuple[list[tuple[str, str, float]], list[Exchange]]:
    async with bench_broker([TOPIC], TOPIC) as (services, make_context):
        metrics = BrokerMetrics()
        ring = FlightRecorder(ring_size=1000, trace_file=None, decode_records=False, apis=(), client_ids=(),
                              topics=())
        kept: list[Exchange] = []
        variants: list[tuple[str, list[ExchangeObserver]]] = [
            ("none", []), ("metrics", [metrics.observe]), ("ring", [ring.observe]),
            ("ring + metrics (default)", [ring.observe, metrics.observe]),
            ("keep the exchange", [kept.append])]
        rows = []
        for label, frame in request_frames(TOPIC, TOPIC):
            best = [float("inf")] * len(variants)
            for _ in range(rounds):
                for index, (_name, observers) in enumerate(variants):
                    services.observers.exchanges[:] = observers
                    kept.clear()
                    best[index] = min(best[index], await _per_call_us(frame, make_context, calls))
            rows += [(label, name, micros) for (name, _), micros in zip(variants[:-1], best, strict=False)]
        # One exchange of each kind, with its real response, for observe() alone.
        exchanges = []
        for _label, frame in request_frames(TOPIC, TOPIC):
            services.observers.exchanges[:] = [kept.append]
            kept.clear()
            await dispatch(frame, make_context)
            exchanges.append(kept[0])
        services.observers.exchanges[:] = []
        return rows, exchanges


async def _longest_stall_ms(services: Any) -> float:
    """The longest the event loop went without running another task during one render_async (GET
    /metrics): a task that only yields measures the gaps between its turns."""
    gaps: list[float] = []
    done = False

    async def ticker() -> None:
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    await render_async(services)
    done = True
    await task
    return max(gaps) * 1000


async def _scrape_ms(partitions: int, rounds: int) -> tuple[float, int, float, float]:
    """Best ms of a scrape, the bytes it returned, the ms of the first one (the registry is made), and
    the longest the event loop is held during GET /metrics's scrape (best round)."""
    with tempfile.TemporaryDirectory(prefix="minikafka-bench-") as data_dir:
        server = BrokerServer(build_config(host="127.0.0.1", port=0, data_dir=Path(data_dir)))
        await server.start()
        try:
            services = server.services
            assert services is not None
            topics = 100
            for index in range(topics):
                await services.logs.create_topic_async(f"{TOPIC}-{index}", partitions // topics)
            now = services.clock.now_ms()
            for index in range(100):
                tid = f"tid-{index}"
                services.transactions.txns[tid] = TxnMetadata(tid, index, 0, 60000, TxnState.ONGOING,
                                                              frozenset({(f"{TOPIC}-0", 0)}), now - index, now)
                services.groups.groups[f"group-{index}"] = Group(f"group-{index}", state=GroupState.STABLE)
            start = time.perf_counter()
            size = len(render(services))
            first = (time.perf_counter() - start) * 1000
            best = min(timeit.repeat(lambda: render(services), number=1, repeat=rounds)) * 1000
            stall = min([await _longest_stall_ms(services) for _ in range(rounds)])
            return best, size, first, stall
        finally:
            await server.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000, help="requests per variant per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=10_000)
    args = parser.parse_args()
    rows, exchanges = asyncio.run(_requests(args.calls, args.rounds))
    print(f"Metrics cost, µs per request through dispatch (best of {args.rounds} rounds x {args.calls} calls)")
    print(f"{'request':<28}{'observers':<28}{'us/request':>10}{'vs none':>10}")
    baseline: dict[str, float] = {}
    for request, variant, micros in rows:
        if variant == "none":
            baseline[request] = micros
        extra = f"{micros - baseline[request]:+10.2f}" if variant != "none" else ""
        print(f"{request:<28}{variant:<28}{micros:>10.2f}{extra:>10}")
    metrics = BrokerMetrics()
    for (label, _frame), exchange in zip(request_frames(TOPIC, TOPIC), exchanges, strict=True):
        micros = _best_us(lambda exchange=exchange: metrics.observe(exchange), args.calls * 10, args.rounds)
        print(f"{label:<28}{'BrokerMetrics.observe alone':<28}{micros:>10.2f}")
    best, size, first, stall = asyncio.run(_scrape_ms(args.partitions, args.rounds))
    print(f"scrape of {args.partitions} partitions, 100 open transactions, 100 groups: {best:.1f} ms "
          f"(first, registry made: {first:.1f} ms), {size} bytes; GET /metrics holds the event loop "
          f"{stall:.1f} ms at most")
    return 0


if __name__ == "__main__":
    sys.exit(main())
