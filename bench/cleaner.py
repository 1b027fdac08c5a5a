"""Log cleaner throughput: MB/s of log read and rewritten, and how long it holds the event loop.

    .venv/bin/python bench/cleaner.py [--mb 32] [--keys 10000] [--value-bytes 100] [--batch 50]

Writes `--mb` of keyed records (batches of `--batch`, `--keys` distinct keys, so most records are
superseded) to a compacted partition with 4 MiB segments, then cleans it twice from scratch:
- directly (LogCleaner.clean_now, no event loop): the cleaner's own throughput;
- the way the broker runs it, in slices on an asyncio loop (LogCleaner.start), with a ticker task
  timing the longest gap between its turns: what a request waiting on the loop could be delayed by.
Throughput is the segment bytes read (the whole cleanable log) per second of cleaner work. Figures
are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import shutil
import tempfile
import time
from pathlib import Path

import structlog
from minikafka.protocol.records import Record, build_batch
from minikafka.storage.cleaner import LogCleaner
from minikafka.storage.clock import ManualClock
from minikafka.storage.config import LogConfig, resolve_log_config
from minikafka.storage.log import PartitionLog

NOW = 1_700_000_000_000
CONFIG = resolve_log_config(LogConfig(), {"cleanup.policy": "compact", "segment.bytes": str(4 << 20),
                                          "min.cleanable.dirty.ratio": "0.01"})


class _Source:
    def __init__(self, log: PartitionLog) -> None:
        self.log = log

    def partition_logs(self) -> list[tuple[tuple[str, int], PartitionLog]]:
        return [(("bench", 0), self.log)]

    def partition(self, topic: str, partition: int) -> PartitionLog | None:
        return self.log if (topic, partition) == ("bench", 0) else None


def _fill(directory: Path, megabytes: int, keys: int, value_bytes: int, batch: int) -> PartitionLog:
    log = PartitionLog(directory / "bench-0", "bench", 0, CONFIG, NOW)
    log.open(recovery_point=0, log_start_offset=0, clean=True)
    value = b"v" * value_bytes
    written = 0
    sequence = 0
    while written < megabytes << 20:
        records = [Record(b"key-%08d" % ((sequence + i) % keys), value, (), NOW) for i in range(batch)]
        data = build_batch(records)
        log.append(data, NOW)
        written += len(data)
        sequence += batch
    log.roll(NOW)  # everything written becomes cleanable
    return log


def _copy(log: PartitionLog, target: Path) -> PartitionLog:
    log.flush()
    shutil.copytree(log.dir, target / log.dir.name)
    copy = PartitionLog(target / log.dir.name, "bench", 0, CONFIG, NOW)
    copy.open(recovery_point=log.log_end_offset, log_start_offset=0, clean=True)
    return copy


async def _sliced(cleaner: LogCleaner) -> tuple[float, float, float, int]:
    """Clean on this loop as the broker does; returns (wall seconds, longest and 99th percentile loop
    gap in ms, loop turns). On a shared machine the longest gap also counts the process being
    descheduled; the percentile shows the slices themselves."""
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.monotonic()
        while not done.is_set():
            await asyncio.sleep(0)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    started = time.monotonic()
    tick = asyncio.get_running_loop().create_task(ticker())
    cleaner.start()
    deadline = started + 600
    while cleaner.running and time.monotonic() < deadline:
        await asyncio.sleep(0.001)
    done.set()
    await tick
    ordered = sorted(gaps) or [0.0]
    return (time.monotonic() - started, ordered[-1] * 1000, ordered[int(len(ordered) * 0.99)] * 1000,
            len(gaps))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=32)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--batch", type=int, default=50)
    args = parser.parse_args()
    # The cleaner logs each cleaning; the figures below say it once.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    root = Path(tempfile.mkdtemp(prefix="minikafka-cleaner-bench-"))
    try:
        log = _fill(root / "direct", args.mb, args.keys, args.value_bytes, args.batch)
        sliced_log = _copy(log, root / "sliced")
        size = log.size_bytes
        clock = ManualClock(NOW)

        direct = LogCleaner(_Source(log), root / "direct", clock)
        direct.clean_now()
        stats = direct.last_stats
        assert stats is not None, "the log was not cleaned"
        print(f"log cleaner, direct: {size / 1e6:.1f} MB in {len(log.segments)} segments after cleaning "
              f"({stats.messages_read} records read, {stats.messages_retained} kept, "
              f"{stats.bytes_written / 1e6:.2f} MB written) in {stats.busy_s:.2f} s: {stats.mb_per_s:.1f} MB/s")

        sliced = LogCleaner(_Source(sliced_log), root / "sliced", clock)
        wall, longest_gap_ms, p99_gap_ms, turns = asyncio.run(_sliced(sliced))
        sliced_stats = sliced.last_stats
        assert sliced_stats is not None, "the log was not cleaned"
        print(f"log cleaner, sliced on the event loop: {sliced_stats.mb_per_s:.1f} MB/s of cleaner work, "
              f"{wall:.2f} s wall, {turns} loop turns, loop stall p99 {p99_gap_ms:.1f} ms, "
              f"longest {longest_gap_ms:.1f} ms")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
