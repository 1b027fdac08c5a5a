"""How one producer's broker CPU per transaction moves with what the broker holds, and with where it runs.

    .venv/bin/python bench/txn_conditions.py retained [--rounds 6] [--after-workloads] [--only minikafka|tansu]
    .venv/bin/python bench/txn_conditions.py affinity [--rounds 3] [--only minikafka|tansu]

Each round is bench.py's transactions workload (a confluent-kafka producer committing 500 transactions of
10 messages over 3 partitions, one after the other) and prints the broker's CPU per transaction.

`retained`: minikafka and Tansu start fresh and take their rounds in turn on the same brokers, so each round
finds what the earlier ones left; RSS is printed after each. With `--after-workloads`, the brokers first get
`--rounds` rounds on fresh data, then bench.py's produce and consume workloads (100 B, idempotent and 1 KiB
produce, the same requests, consume; five rounds of each, as the runs of bench.py in bench/NOTES.md make them), then
`--rounds` rounds again: about the conditions of bench.py's transaction rows before they moved to fresh brokers.

`affinity`: rounds alternate between the broker free to run on any core and every thread of it pinned to
core 0, with this process (the client) pinned to core 1; it needs two cores. Printed with each round: the
broker's migrations between cores and its context switches per transaction
(/proc/<pid>/task/*/sched and status; the round's set-up, a topic, the producer's start and one unmeasured
transaction, is counted in them too).

Not part of `make bench`; figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import bench  # bench/ is the script's folder, so it is on sys.path

PRODUCE_WORKLOADS_REPEATS = 5  # as the bench runs in bench/NOTES.md repeat them (`--repeat 5`)
_PINNING_CORES = {0, 1}


def brokers_for(only: str | None) -> list[bench.Broker]:
    chosen = bench.selected_brokers(only)
    if not chosen:
        raise SystemExit("no broker to measure")
    return chosen


def _threads(pid: int) -> list[int]:
    return [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]


def _task_counters(pid: int) -> tuple[int, int, int]:
    """Migrations, voluntary and involuntary context switches, summed over the live threads."""
    migrations = voluntary = involuntary = 0
    for tid in _threads(pid):
        task = Path(f"/proc/{pid}/task/{tid}")
        try:
            sched = task.joinpath("sched").read_text()
            status = task.joinpath("status").read_text()
        except FileNotFoundError:
            continue  # the thread exited meanwhile
        for line in sched.splitlines():
            if line.startswith("se.nr_migrations"):
                migrations += int(line.split(":")[1])
        for line in status.splitlines():
            if line.startswith("voluntary_ctxt_switches"):
                voluntary += int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches"):
                involuntary += int(line.split()[1])
    return migrations, voluntary, involuntary


def _pin(pid: int, cores: set[int]) -> None:
    for tid in _threads(pid):
        try:
            os.sched_setaffinity(tid, cores)
        except ProcessLookupError:
            continue


def _transactions_round(run: bench.Run) -> float:
    return bench.measure_transactions(run)["txn_cpu_us"]


def retained(brokers: list[bench.Broker], rounds: int, after_workloads: bool, messages: int) -> None:
    runs = {broker.name: bench.Run(broker, messages) for broker in brokers}
    for broker in brokers:
        broker.start()

    def transaction_rounds(label: str) -> None:
        figures: dict[str, list[float]] = {name: [] for name in runs}
        for number in range(rounds):
            for name, run in runs.items():
                cpu_us = _transactions_round(run)
                figures[name].append(cpu_us)
                print(f"{label} round {number + 1}: {name} {cpu_us:,.0f} us a transaction, RSS "
                      f"{run.broker.rss_mb():.1f} MB", flush=True)
        for name, values in figures.items():
            print(f"{label}: {name} median {statistics.median(values):,.0f} us", flush=True)

    transaction_rounds("from empty data")
    if after_workloads:
        earlier = ("produce", "same requests", "consume", "idempotent produce", "same idempotent requests",
                   "1 KiB produce")
        for workload in bench.WORKLOADS:
            if workload.name not in earlier:
                continue
            for _ in range(PRODUCE_WORKLOADS_REPEATS if workload.repeated else 1):
                for name, run in runs.items():
                    print(f"  {name}: {workload.name} ...", file=sys.stderr, flush=True)
                    workload.run(run)
        transaction_rounds("after the produce workloads")


def affinity(brokers: list[bench.Broker], rounds: int) -> None:
    if not os.sched_getaffinity(0) >= _PINNING_CORES:
        raise SystemExit("affinity needs cores 0 and 1")
    client_cores = os.sched_getaffinity(0)
    for broker in brokers:
        broker.start()
        run = bench.Run(broker, 0)
        assert broker.process is not None
        pid = broker.process.pid
        figures: dict[str, list[float]] = {"free": [], "pinned": []}
        try:
            for number in range(rounds * 2):
                pinned = number % 2 == 1
                _pin(pid, {0} if pinned else client_cores)
                os.sched_setaffinity(0, {1} if pinned else client_cores)
                before = _task_counters(pid)
                cpu_us = _transactions_round(run)
                after = _task_counters(pid)
                each = [(later - earlier) / bench.TRANSACTIONS for earlier, later in zip(before, after, strict=True)]
                mode = "pinned" if pinned else "free"
                figures[mode].append(cpu_us)
                print(f"{broker.name} {mode}: {cpu_us:,.0f} us a transaction; a transaction's migrations "
                      f"{each[0]:.2f}, context switches {each[1]:.2f} voluntary, {each[2]:.2f} involuntary",
                      flush=True)
        finally:
            os.sched_setaffinity(0, client_cores)
        for mode, values in figures.items():
            print(f"{broker.name} {mode}: median {statistics.median(values):,.0f} us", flush=True)
        broker.cleanup()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("condition", choices=("retained", "affinity"))
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--after-workloads", action="store_true")
    parser.add_argument("--messages", type=int, default=200_000, help="messages for the produce workloads")
    parser.add_argument("--only", choices=("minikafka", "tansu"))
    args = parser.parse_args()
    brokers = brokers_for(args.only)
    try:
        if args.condition == "retained":
            retained(brokers, args.rounds or 6, args.after_workloads, args.messages)
        else:
            affinity(brokers, args.rounds or 3)
    finally:
        for broker in brokers:
            broker.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
