"""Where sendfile starts to pay: the CPU of sending one record slice of S bytes, read or left in the file.

    .venv/bin/python bench/sendfile_threshold.py [--sizes 4,16,32,64,128,256,1024] [--calls 400]

A Fetch answer's partition slice of storage.log.REGION_MIN_BYTES or more stays in the segment file and
goes out with sendfile(2) between the bytes before and after it (broker/wire/connection.py); a smaller one
is read with pread and sent with the rest of the frame in one call. This times both ways for one slice
over loopback TCP, with the slice's file in the page cache and a thread draining the other end:

- read: pread(S), then one sendmsg of the frame's bytes before the slice, the slice and the bytes after;
- sendfile: a send of the bytes before, sendfile(S), a send of the bytes after.

Thread CPU time of the sending thread, median of 7 rounds of `--calls` slices at spread offsets, the
two ways alternating. It leaves out the broker's Python on each path (making a FileRegion and
splitting the frame's parts around it), which favours sendfile by a few µs. Figures are printed, never
asserted.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable

_FILE_BYTES = 64 * 1024 * 1024
_ROUNDS = 7
# The bytes a Fetch frame has around one partition's records (headers, the partition's fields).
_BEFORE = b"b" * 120
_AFTER = b"a" * 40


def _send_all(sock: socket.socket, parts: list[bytes]) -> None:
    sent = sock.sendmsg(parts)
    total = sum(len(part) for part in parts)
    if sent < total:
        sock.sendall(b"".join(parts)[sent:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="4,16,32,64,128,256,1024", help="slice sizes in KiB")
    parser.add_argument("--calls", type=int, default=400, help="slices sent per round and way")
    args = parser.parse_args()
    sizes = [int(kib) * 1024 for kib in args.sizes.split(",")]
    with tempfile.NamedTemporaryFile(prefix="minikafka-sendfile-") as scratch:
        scratch.write(os.urandom(_FILE_BYTES))
        scratch.flush()
        fd = scratch.fileno()
        for offset in range(0, _FILE_BYTES, 1 << 20):
            os.pread(fd, 1 << 20, offset)  # into the page cache, as a recent segment is
        with socket.create_server(("127.0.0.1", 0)) as server:
            sender = socket.create_connection(server.getsockname(), timeout=30)
            receiver, _address = server.accept()
        sender.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        drainer = threading.Thread(target=_drain, args=(receiver,), daemon=True)
        drainer.start()

        def by_reading(size: int, offset: int) -> None:
            _send_all(sender, [_BEFORE, os.pread(fd, size, offset), _AFTER])

        def by_sendfile(size: int, offset: int) -> None:
            sender.sendall(_BEFORE)
            sent = 0
            while sent < size:
                sent += os.sendfile(sender.fileno(), fd, offset + sent, size - sent)
            sender.sendall(_AFTER)

        ways: dict[str, Callable[[int, int], None]] = {"read": by_reading, "sendfile": by_sendfile}
        samples: dict[tuple[int, str], list[float]] = {(size, way): [] for size in sizes for way in ways}
        try:
            for _round in range(_ROUNDS):
                for size in sizes:
                    offsets = [(call * 7919 * size) % (_FILE_BYTES - size) & ~4095 for call in range(args.calls)]
                    for way, send in ways.items():
                        started = time.thread_time_ns()
                        for offset in offsets:
                            send(size, offset)
                        samples[(size, way)].append((time.thread_time_ns() - started) / args.calls / 1000)
        finally:
            sender.close()
            drainer.join(timeout=10)
            receiver.close()
    print(f"{'slice KiB':>9} {'read µs':>9} {'sendfile µs':>12} {'sendfile/read':>14}")
    for size in sizes:
        read, sendfile = statistics.median(samples[(size, 'read')]), statistics.median(samples[(size, 'sendfile')])
        print(f"{size // 1024:9} {read:9.1f} {sendfile:12.1f} {sendfile / read:14.2f}")
    return 0


def _drain(sock: socket.socket) -> None:
    buffer = bytearray(1 << 20)
    while sock.recv_into(buffer):
        pass


if __name__ == "__main__":
    sys.exit(main())
