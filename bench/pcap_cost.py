"""What `--pcap FILE` costs: µs per frame through the wire-tap seam into broker/observe/pcap.py, in-process.

    python bench/pcap_cost.py [--frames N] [--rounds N]

A request/response pair is two frames. For frame sizes from a small request to a 1 MiB fetch
response, the cost of `Observers.tap("frame", ...)` with a PcapWriter registered (synthetic TCP
headers, IPv4 and TCP checksums over the payload, the record appended to the buffer and the buffer
written to a real temporary file whenever it fills), against the same call with no tap registered
(the broker without --pcap does not even make it: connection.py tests the empty list first). Sizes
are interleaved round by round so that load from other processes falls on all alike; each figure is
the best round. Printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import struct
import tempfile
import time

from minikafka.broker.observe.pcap import MSS, PcapWriter
from minikafka.broker.wire.hooks import Observers
from minikafka.storage.clock import SystemClock

SIZES = (100, 1_024, 16_384, 100_000, 1_048_576)


def _frame(size: int) -> bytes:
    return struct.pack(">i", size) + os.urandom(size)


def _per_frame_us(observers: Observers, frame: bytes, count: int) -> float:
    tap = observers.tap
    start = time.perf_counter_ns()
    for index in range(count):
        tap("frame", 1, index % 2 == 0, frame)  # alternate directions, as requests and responses do
    return (time.perf_counter_ns() - start) / count / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=2000, help="frames per round for the smallest size")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    frames = {size: _frame(size) for size in SIZES}
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "bench.pcap")
        writer = PcapWriter(path, SystemClock())
        writer.connection_opened(1, ("127.0.0.1", 50000), ("127.0.0.1", 9092))
        tapped, bare = Observers(), Observers()
        tapped.taps.append(writer)
        best: dict[tuple[int, str], float] = {}
        for _round in range(args.rounds):
            for size, frame in frames.items():
                # The same number of bytes per size, at least 20 frames, so that big frames do not take minutes.
                count = max(20, args.frames * SIZES[0] // size)
                for name, observers in (("pcap", tapped), ("no tap", bare)):
                    us = _per_frame_us(observers, frame, count)
                    best[size, name] = min(best.get((size, name), us), us)
        writer.close()
        written = os.path.getsize(path)
        assert writer.packets > 0

    print(f"pcap tap cost per frame (best of {args.rounds} rounds), written {written / 1e6:.1f} MB")
    print(f"{'frame bytes':>12} {'segments':>9} {'pcap µs':>10} {'no tap µs':>10} {'MB/s':>8}")
    for size in SIZES:
        segments = -(-(size + 4) // MSS)
        us = best[size, "pcap"]
        print(f"{size:>12} {segments:>9} {us:>10.2f} {best[size, 'no tap']:>10.3f} {size / us:>8.0f}")


if __name__ == "__main__":
    main()
