"""Where a request's broker CPU goes, step by step.

    .venv/bin/python bench/steps.py produce|idempotent|fetch|transactions [--messages N] [--transactions N]

The broker runs as a subprocess, as in bench.py, but with timing wrappers around named steps of the
request path (STEPS below); the same confluent-kafka workload as bench.py drives it; at the end each
step's call count and median thread CPU time are printed. Medians, because a step's first calls pay
one-off costs (the first use of a schema compiles its codec). Thread CPU time, so waiting and the
client's threads are not counted. A step's time includes the steps inside it ("request" holds them
all, "log append" holds "segment write"...), and each wrapper adds about 1 µs to the steps around it.
Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import atexit
import collections
import functools
import importlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import bench

# (label, module, attribute path): where the step's callers look it up, so wrapping it there is seen.
STEPS: list[tuple[str, str, str]] = [
    ("decode (bounds check + kio)", "minikafka.broker.wire.dispatch", "decode_request"),
    ("  bounds check", "minikafka.protocol.codec", "check_request"),
    ("encode the response frame", "minikafka.broker.wire.dispatch", "response_frame"),
    ("observers (metrics, recorder)", "minikafka.broker.wire.hooks", "Observers.notify"),
    ("  recorder: reduce to summaries", "minikafka.broker.observe.recorder", "FlightRecorder._stripped"),
    ("produce: batch header + CRC", "minikafka.broker.handlers.produce", "validate_batch"),
    ("produce: build the response", "minikafka.broker.handlers.produce", "build"),
    ("log append", "minikafka.storage.log", "PartitionLog.append"),
    ("  offsets, patch, write", "minikafka.storage.log", "PartitionLog._write_marked"),
    ("    segment write + index", "minikafka.storage.segment", "LogSegment.append"),
    ("      index entries", "minikafka.storage.segment", "LogSegment._index"),
    ("fetch: read the partitions", "minikafka.broker.handlers.fetch", "_read_all"),
    ("  log read (pread)", "minikafka.storage.log", "PartitionLog.read"),
    ("fetch: build the response", "minikafka.broker.handlers.fetch", "build"),
    ("txn: AddPartitionsToTxn", "minikafka.coordinator.transaction.coordinator",
     "TransactionCoordinator.add_partitions"),
    ("txn: EndTxn (to Prepare*)", "minikafka.coordinator.transaction.coordinator",
     "TransactionCoordinator.end_transaction"),
    ("txn: __transaction_state write", "minikafka.coordinator.transaction.coordinator",
     "TransactionCoordinator._write"),
    ("txn: markers + Complete*", "minikafka.coordinator.transaction.coordinator",
     "TransactionCoordinator._write_markers_and_complete"),
    ("  marker append", "minikafka.storage.log", "PartitionLog.append_control"),
]
_SAMPLES: dict[str, list[int]] = collections.defaultdict(list)


def _timed(label: str, function: Callable[..., Any]) -> Callable[..., Any]:
    clock, samples = time.thread_time_ns, _SAMPLES[label]

    @functools.wraps(function)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = clock()
        try:
            return function(*args, **kwargs)
        finally:
            samples.append(clock() - started)

    return timed


def _instrument(out: Path) -> None:
    """In the broker process: wrap every step, time each request by API, write the samples at exit."""
    from minikafka.broker.wire import connection
    from minikafka.protocol.api_keys import kafka_api_name
    from minikafka.protocol.codec import peek_header

    for label, module_name, path in STEPS:
        owner: Any = importlib.import_module(module_name)
        *parents, name = path.split(".")
        for parent in parents:
            owner = getattr(owner, parent)
        setattr(owner, name, _timed(label, getattr(owner, name)))
    dispatch = connection.dispatch

    async def timed_dispatch(frame: bytes | bytearray, make_context: Any) -> Any:
        # Thread CPU time stops while the request waits (a Fetch parked until data comes), as it should.
        started = time.thread_time_ns()
        try:
            return await dispatch(frame, make_context)
        finally:
            _SAMPLES[f"request: {kafka_api_name(peek_header(frame).api_key)}"].append(time.thread_time_ns() - started)

    connection.dispatch = timed_dispatch  # type: ignore[assignment]
    atexit.register(lambda: out.write_text(json.dumps(_SAMPLES)))


def _instrumented_broker(out: Path) -> bench.Broker:
    import bench  # bench/ is the script's folder, so it is on sys.path; not imported by the broker process

    broker = bench.minikafka_broker()
    broker.command = lambda port, data: [
        sys.executable, __file__, "--broker", str(out), "serve", "--host", "127.0.0.1", "--port", str(port),
        "--data-dir", str(data), "--log-format", "json"]
    return broker


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--broker":
        _instrument(Path(sys.argv[2]))
        from minikafka.broker.__main__ import main as broker_main

        return broker_main(sys.argv[3:])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workload", choices=["produce", "idempotent", "fetch", "transactions"])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--transactions", type=int, default=2_000)
    args = parser.parse_args()
    import bench

    with tempfile.TemporaryDirectory(prefix="minikafka-steps-") as scratch:
        out = Path(scratch) / "samples.json"
        broker = _instrumented_broker(out)
        try:
            broker.start()
            cpu_before = broker.cpu_seconds()
            run = bench.Run(broker, args.messages)
            if args.workload == "produce":
                figures = bench.measure_produce(run)
            elif args.workload == "idempotent":
                figures = bench.measure_idempotent_produce(run)
            elif args.workload == "fetch":
                bench.measure_produce(run)
                figures = bench.measure_consume(run)
            else:
                bench.TRANSACTIONS = args.transactions
                figures = bench.measure_transactions(run)
            broker_cpu_ms = (broker.cpu_seconds() - cpu_before) * 1000
            broker.stop()  # SIGTERM: the broker's exit writes the samples
        finally:
            broker.cleanup()
        samples: dict[str, list[int]] = json.loads(out.read_text())
    print(", ".join(f"{key} {value:,.3g}" for key, value in figures.items()), "(with the wrappers' cost)")
    requests_ms = sum(sum(values) for key, values in samples.items() if key.startswith("request: ")) / 1e6
    # What no request's handling holds: reading frames, sending answers, the event loop, timers, the wrappers.
    print(f"broker CPU from start-up to the end of the workload {broker_cpu_ms:,.1f} ms, in requests "
          f"{requests_ms:,.1f} ms, outside them {broker_cpu_ms - requests_ms:,.1f} ms")
    print(f"{'step':40} {'calls':>9} {'median µs':>10} {'total ms':>9}")
    for label in sorted((k for k in samples if k.startswith("request: ")), key=lambda k: -len(samples[k])) + [
            label for label, _module, _path in STEPS]:
        if samples.get(label):
            print(f"{label:40} {len(samples[label]):9,} {statistics.median(samples[label]) / 1000:10.1f}"
                  f" {sum(samples[label]) / 1e6:9,.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
