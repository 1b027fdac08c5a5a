"""Broker CPU per Produce request (or per transaction) of the working tree against a commit, both loaded at
the same time.

    .venv/bin/python bench/ab.py [--base REV] [--rounds 10] [--records 700] [--requests 2000] [--aa]
    .venv/bin/python bench/ab.py --workload transactions [--transactions 1000] [--base REV] [--rounds 10] [--aa]
    .venv/bin/python bench/ab.py --python /path/to/venv/bin/python [--workload ...] [--base REV]
    .venv/bin/python bench/ab.py --candidate-path DIR [--workload ...] [--base REV]

Broker A runs the code of `--base` (default HEAD: what the working tree changes), unpacked into a
temporary folder (the soak harness's unpack_code); broker B runs the working tree. Each round starts
both on fresh data dirs and gives each its own client process, which sends the same pre-encoded
Produce request (3 partitions of `--records` 100-byte records, acks=-1) `--inflight` at a time,
`--requests` times; both clients start together, so a slow spell of this shared machine falls on both
brokers at once. Printed: each broker's CPU per request and B/A for every round, then the medians
(figures only, nothing asserted).
`--workload transactions` gives each broker a confluent-kafka transactional producer instead, committing
bench.py's transactions (10 messages over the 3 partitions, linger 0) one after the other: their requests
(AddPartitionsToTxn, a Produce per partition, EndTxn) do not depend on the broker's timing, so the figure
is the broker CPU per transaction.

Why not bench.py: with librdkafka the batches follow how fast each broker answers, so the CPU per
message of one broker moves with the other's timing (two brokers of the same code, loaded at once by
confluent-kafka, read 0.61-1.04 of each other per message); a fixed request leaves the broker's own cost.
`--aa` runs the base code on both sides, to see this harness's own spread. `--python` runs the base code on
both sides too, broker B under that interpreter (a venv holding minikafka's dependencies; the code still comes
from the unpacked commit), to compare interpreters. `--candidate-path` gives broker B the `minikafka` package
under DIR instead of the working tree (bench/mypyc_tree.py builds one with compiled modules).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
from multiprocessing.synchronize import Barrier
from pathlib import Path

from confluent_kafka import Producer

import bench  # bench/ is the script's folder, so it is on sys.path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for the soak harness's unpack_code, which runs a commit's broker too
from tests.soak.harness import unpack_code  # noqa: E402

TOPIC = "ab"
PARTITIONS = bench.PRODUCE_PARTITIONS  # as bench.commit_transaction spreads its messages
BARRIER_TIMEOUT_S = 60.0
CLIENT_DEADLINE_S = 600.0


def broker_for(python_path: Path | None, interpreter: str | None = None) -> bench.Broker:
    broker = bench.minikafka_broker()
    if interpreter is not None:
        command = broker.command
        broker.command = lambda port, data: [interpreter, *command(port, data)[1:]]
    env = dict(broker.env if broker.env is not None else os.environ)
    if python_path is not None:
        env["PYTHONPATH"] = str(python_path)
    broker.env = env
    return broker


def send_requests(port: int, records: int, requests: int, inflight: int, barrier: Barrier) -> None:
    """The client process: a few requests to warm the broker up, then, once both clients are ready, `requests`
    of the same Produce request, at most `inflight` unanswered."""
    repeated = bench.RepeatedProduce(TOPIC, records)
    with bench.raw_connection(port, CLIENT_DEADLINE_S) as sock:
        repeated.send(sock, bench.SAME_REQUESTS_WARM_UP, 1)
        barrier.wait(BARRIER_TIMEOUT_S)
        repeated.send(sock, requests, inflight)


def commit_transactions(port: int, transactions: int, barrier: Barrier) -> None:
    """The client process of the transactions workload: a few transactions to warm the broker up, then,
    once both clients are ready, `transactions` of them (a failed delivery fails its commit)."""
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "transactional.id": f"ab-{port}",
                         "linger.ms": 0})
    producer.init_transactions(BARRIER_TIMEOUT_S)
    for number in range(5):
        bench.commit_transaction(producer, TOPIC, number)
    barrier.wait(BARRIER_TIMEOUT_S)
    for number in range(transactions):
        bench.commit_transaction(producer, TOPIC, number)


def one_round(base_path: Path, candidate_path: Path | None, args: argparse.Namespace) -> dict[str, float]:
    """Both brokers under load at once; broker CPU µs per request (or per transaction), by side."""
    brokers = {"A": broker_for(base_path), "B": broker_for(candidate_path, args.python)}
    try:
        for broker in brokers.values():
            broker.start()
            bench.create_topic(broker.bootstrap, TOPIC, PARTITIONS)
        barrier = multiprocessing.Barrier(len(brokers) + 1)
        if args.workload == "transactions":
            units = args.transactions
            clients = [multiprocessing.Process(target=commit_transactions, args=(broker.port, units, barrier))
                       for broker in brokers.values()]
        else:
            units = args.requests
            clients = [multiprocessing.Process(target=send_requests,
                                               args=(broker.port, args.records, units, args.inflight, barrier))
                       for broker in brokers.values()]
        for client in clients:
            client.start()
        # Read the CPU clocks only when both clients have warmed up and wait for this barrier's last party.
        while barrier.n_waiting < len(clients):
            if not all(client.is_alive() for client in clients):
                raise RuntimeError("a client ended before the measured requests")
            time.sleep(0.01)
        before = {side: broker.cpu_seconds() for side, broker in brokers.items()}
        barrier.wait(BARRIER_TIMEOUT_S)
        for client in clients:
            client.join(CLIENT_DEADLINE_S)
            if client.exitcode != 0:
                raise RuntimeError(f"a client failed (exit code {client.exitcode})")
        return {side: (broker.cpu_seconds() - before[side]) / units * 1e6 for side, broker in brokers.items()}
    finally:
        for broker in brokers.values():
            broker.cleanup()


def _candidate_name(args: argparse.Namespace) -> str:
    if args.python:
        return f"the same under {args.python}"
    if args.aa:
        return "the same"
    if args.candidate_path:
        return f"the tree at {args.candidate_path}"
    return "the working tree"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="HEAD", help="the commit broker A runs (default HEAD)")
    parser.add_argument("--workload", choices=["produce", "transactions"], default="produce")
    parser.add_argument("--transactions", type=int, default=1000, help="measured transactions per broker and round")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--records", type=int, default=700, help="100-byte records in each partition's batch")
    parser.add_argument("--requests", type=int, default=2000, help="measured requests per broker and round")
    parser.add_argument("--inflight", type=int, default=2, help="requests a client keeps unanswered")
    candidate = parser.add_mutually_exclusive_group()
    candidate.add_argument("--aa", action="store_true", help="the base commit on both sides")
    candidate.add_argument("--python", help="the base commit on both sides, broker B under this interpreter")
    candidate.add_argument("--candidate-path", type=Path,
                           help="broker B imports minikafka from this folder instead of the working tree")
    args = parser.parse_args()
    if min(args.rounds, args.records, args.requests, args.inflight, args.transactions) < 1:
        parser.error("--rounds, --records, --requests, --inflight and --transactions must be at least 1")
    unit = "transaction" if args.workload == "transactions" else "request"
    scratch = Path(tempfile.mkdtemp(prefix="minikafka-ab-"))
    ratios: list[float] = []
    per_side: dict[str, list[float]] = {"A": [], "B": []}
    try:
        _unpacked, base_path = unpack_code(args.base, scratch)
        candidate_path = base_path if args.aa or args.python else args.candidate_path
        load = (f"{args.transactions} transactions of {bench.MESSAGES_PER_TRANSACTION} messages"
                if args.workload == "transactions" else
                f"{PARTITIONS} x {args.records} records a request, {args.requests} requests, {args.inflight} in flight")
        print(f"A: {args.base}; B: {_candidate_name(args)}; {load}", flush=True)
        for number in range(args.rounds):
            cpu = one_round(base_path, candidate_path, args)
            for side, value in cpu.items():
                per_side[side].append(value)
            ratios.append(cpu["B"] / cpu["A"])
            print(f"round {number + 1}: A {cpu['A']:.0f} µs, B {cpu['B']:.0f} µs a {unit}, B/A {ratios[-1]:.3f}",
                  flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    median_a, median_b = statistics.median(per_side["A"]), statistics.median(per_side["B"])
    print(f"median B/A {statistics.median(ratios):.3f} (rounds {min(ratios):.3f}-{max(ratios):.3f}); medians "
          f"A {median_a:.0f} µs, B {median_b:.0f} µs a {unit}, their ratio {median_b / median_a:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
