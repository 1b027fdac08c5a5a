"""What the observation seam costs a request: µs per request through `broker.dispatch.dispatch`, in-process,
with the exchange observers a broker really installs (broker/observe/debugging.py) for each setting.

    python bench/observe_cost.py [--calls N] [--rounds N]

Variants, each built by install_debugging from a config:
- off: no exchange observer at all (the seam's fast path: one truth test of an empty list);
- metrics only: minikafka.trace.ring.size=0, the always-on Prometheus counts alone;
- default: what every broker runs with tracing off (metrics + the flight recorder's ring of 1000);
- tracing on: the default plus --trace FILE (every exchange rendered and written as a JSON line).

Requests: Produce acks=1 of one 10-record batch, Fetch of about ten batches, Metadata of one topic.
Variants are interleaved round by round, so load from other processes on a shared machine falls on all
alike. Figures are the process's CPU time: the best and the median round of each variant, and "vs off",
the median over rounds of (this variant - off) in the same round, which cancels most of the drift
between rounds; on a busy 2-core machine it still moves by a few µs from run to run. Printed, never
asserted. `make bench` runs it.

What it means for make bench's throughput rows: with linger.ms=5 a produce request carries about a
thousand 100-byte messages (about 160 Produce requests for 200,000 messages), so a few µs per request is
a few thousandths of a µs per message, far below that table's 0.05 µs/msg tick resolution.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from minikafka.broker.config.config import BrokerConfig
from minikafka.broker.observe.debugging import install_debugging
from minikafka.broker.wire.dispatch import dispatch
from minikafka.broker.wire.hooks import ExchangeObserver
from trace_cost import bench_broker, request_frames  # bench/ is the script's folder, on sys.path

TOPIC = "bench-observe"


def _variants(services: Any, config: BrokerConfig, trace_path: Path) -> tuple[list[tuple[str, list[ExchangeObserver]]],
                                                                                  list[Any]]:
    """Each setting's observer list as install_debugging builds it, and the closers to call at the end."""
    settings = [("off", None), ("metrics only", dataclasses.replace(config, trace_ring_size=0)),
                ("default (tracing off)", config),
                ("tracing on (--trace FILE)", dataclasses.replace(config, trace_file=str(trace_path)))]
    variants: list[tuple[str, list[ExchangeObserver]]] = []
    closers: list[Any] = []
    for name, setting in settings:
        services.observers.exchanges[:] = []
        if setting is not None:
            closers += install_debugging(services, setting)
        variants.append((name, list(services.observers.exchanges)))
    return variants, closers


async def _run(calls: int, rounds: int) -> list[tuple[str, str, float, float, float]]:
    with tempfile.TemporaryDirectory(prefix="minikafka-bench-trace-") as trace_dir:
        async with bench_broker([TOPIC], TOPIC) as (services, make_context):
            installed = list(services.observers.exchanges)
            closers: list[Any] = []
            try:
                variants, closers = _variants(services, services.config, Path(trace_dir) / "trace.jsonl")
                rows = []
                for label, frame in request_frames(TOPIC, TOPIC):
                    samples: list[list[float]] = [[] for _ in variants]
                    for _ in range(rounds):
                        for index, (_name, observers) in enumerate(variants):
                            services.observers.exchanges[:] = observers
                            # CPU time of this process, not wall time: time spent descheduled is not ours.
                            start = time.process_time()
                            for _ in range(calls):
                                await dispatch(frame, make_context)
                            samples[index].append((time.process_time() - start) / calls * 1e6)
                    off = samples[0]
                    rows += [(label, name, min(times), statistics.median(times),
                              statistics.median(mine - base for mine, base in zip(times, off, strict=True)))
                             for (name, _), times in zip(variants, samples, strict=True)]
                return rows
            finally:
                for close in closers:
                    close()
                services.observers.exchanges[:] = installed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="requests per variant per round")
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()
    rows = asyncio.run(_run(args.calls, args.rounds))
    print(f"Observation seam cost, µs of CPU per request through dispatch ({args.rounds} interleaved rounds "
          f"x {args.calls} calls)")
    print(f"{'request':<24}{'observers':<28}{'best':>9}{'median':>9}{'vs off':>9}")
    for request, variant, best, median, paired in rows:
        extra = f"{paired:+9.2f}" if variant != "off" else ""
        print(f"{request:<24}{variant:<28}{best:>9.2f}{median:>9.2f}{extra:>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
