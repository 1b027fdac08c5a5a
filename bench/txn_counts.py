"""What one transaction costs the broker in requests, log appends, fsyncs, system calls and loop turns.

    .venv/bin/python bench/txn_counts.py [--transactions 500]

bench/NOTES.md sets these counts next to Kafka's cycle (the summary's "Where the time goes",
Transactions). A broker runs as in bench.py, with its admin listener on; one confluent-kafka transactional
producer commits `--transactions` of bench.py's transactions (begin, 10 messages over 3 partitions, commit) while
`strace -f` is attached to the broker. The broker's request metrics (GET /metrics) give the
requests by API; strace's lines, with each descriptor's path (-y) and the first bytes written (-s 24
-xx), give the rest: a write to a segment (`.log`) is one log append, told apart by its log
(`__transaction_state`, `__consumer_offsets` or a data partition) and, in a data partition, by the
control bit of the batch's attributes (a transaction marker, or the client's batch); epoll waits are
the event loop's turns. strace slows the broker down, so nothing here is timed. Figures are printed,
never asserted.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from minikafka.protocol.records import ATTRIBUTES_OFFSET, CONTROL_FLAG
from prometheus_client.parser import text_string_to_metric_families

from bench import (  # bench/ is the script's folder, so it is on sys.path
    Broker,
    free_port,
    minikafka_broker,
    run_transactions,
)

_WARM_UP_TRANSACTIONS = 100
_STRACE_ATTACH_S = 1.0  # strace has no "attached" signal that -o can show; it attaches well within this
_MARKERS_SETTLE_S = 0.5  # the last transaction's markers are written after EndTxn's answer
_TRACED = ("write,writev,pwrite64,pwritev,read,readv,recvfrom,recvmsg,sendto,sendmsg,"
           "epoll_wait,epoll_pwait,epoll_pwait2,fsync,fdatasync,io_uring_enter")
# "1234  write(12</data/t-0/00000000000000000000.log>, "\x00..."..., 79) = 79", or the first half of a call
# another thread interrupted ("... <unfinished ...>"); its "<... write resumed>" half is not counted again.
_CALL = re.compile(r"^\d+\s+(?P<name>\w+)\((?:(?P<fd>\d+)<(?P<path>[^>]*)>)?(?P<rest>.*)$")
_SEGMENT = re.compile(r"/\d{20}\.log$")  # a segment file; the broker's own log (stdout) is a .log file too


def requests_by_api(admin_port: int) -> collections.Counter[str]:
    """The broker's request counts by API, from its Prometheus metrics (summed over versions)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{admin_port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    counts: collections.Counter[str] = collections.Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "kafka_network_requestmetrics_requests_total":
                counts[sample.labels["request"]] += int(sample.value)
    return counts


def first_bytes(rest: str) -> bytes:
    """The first bytes strace printed of the buffer written (the first iovec's, for writev)."""
    match = re.search(r'"((?:\\x[0-9a-f]{2})+)"', rest)
    return bytes.fromhex(match[1].replace("\\x", "")) if match else b""


def _unescaped(path: str) -> str:
    """A descriptor's path as -xx prints it, every byte as \\xNN."""
    return re.sub(r"\\x([0-9a-f]{2})", lambda byte: chr(int(byte[1], 16)), path)


def classify(name: str, path: str, rest: str) -> str:
    if name.startswith("epoll_"):
        return "event loop turns (epoll waits)"
    if name in ("fsync", "fdatasync"):
        return "fsyncs"
    if name == "io_uring_enter":
        return "io_uring_enter (libuv)"
    writes = name.startswith(("write", "pwrite", "send"))
    if path.startswith(("socket:", "TCP", "UNIX")):
        return "socket writes (answers)" if writes else "socket reads (requests)"
    if not writes:
        return f"other {name}"
    if _SEGMENT.search(path):
        if "/__transaction_state-" in path:
            return "appends: __transaction_state"
        if "/__consumer_offsets-" in path:
            return "appends: __consumer_offsets"
        head = first_bytes(rest)
        if len(head) < ATTRIBUTES_OFFSET + 2:
            return "appends: data partition, batch unread"
        attributes = int.from_bytes(head[ATTRIBUTES_OFFSET:ATTRIBUTES_OFFSET + 2], "big")
        return "appends: transaction markers" if attributes & CONTROL_FLAG else "appends: the client's batches"
    if path.endswith((".index", ".timeindex")):
        return "index entries"
    return f"other file writes ({Path(path).suffix or Path(path).name})"


def count_calls(trace: Path) -> collections.Counter[str]:
    counts: collections.Counter[str] = collections.Counter()
    for line in trace.read_text(errors="replace").splitlines():
        match = _CALL.match(line)
        if match is None or "resumed>" in line:
            continue
        counts[classify(match["name"], _unescaped(match["path"] or ""), match["rest"])] += 1
        counts["system calls traced"] += 1
    return counts


@contextlib.contextmanager
def strace_attached(strace: str, pid: int, options: list[str], trace: Path) -> Iterator[None]:
    """`strace` with `options` attached to `pid`, writing `trace`, for the block; detached
    _MARKERS_SETTLE_S after it, so the last transaction's markers are traced too."""
    tracer = subprocess.Popen([strace, *options, "-o", str(trace), "-p", str(pid)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(_STRACE_ATTACH_S)
        yield
        time.sleep(_MARKERS_SETTLE_S)
        tracer.send_signal(signal.SIGINT)
        tracer.wait(60)
    finally:
        if tracer.poll() is None:
            tracer.kill()
            tracer.wait(10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=500)
    args = parser.parse_args()
    strace = shutil.which("strace")
    if strace is None:
        print("strace is not installed (apt-get install -y strace)", file=sys.stderr)
        return 2
    admin_port = free_port()
    base = minikafka_broker()
    broker = Broker(base.name, lambda port, data: [*base.command(port, data), "--admin-port", str(admin_port)],
                    ready_line=True, env=base.env)
    with tempfile.TemporaryDirectory(prefix="minikafka-txn-counts-") as scratch:
        trace = Path(scratch) / "strace.out"
        try:
            broker.start()
            assert broker.process is not None
            run_transactions(broker, "txn-counts-warm-up", 1, _WARM_UP_TRANSACTIONS)
            time.sleep(_MARKERS_SETTLE_S)
            before = requests_by_api(admin_port)
            with strace_attached(strace, broker.process.pid,
                                 ["-f", "-qq", "-y", "-xx", "-s", "24", "-e", f"trace={_TRACED}"], trace):
                run_transactions(broker, "txn-counts", 1, args.transactions)
            # Read after the trace stops: the GET's own request and socket calls are not in it.
            requests = requests_by_api(admin_port) - before
        finally:
            broker.cleanup()
        calls = count_calls(trace)
    # run_transactions also makes one unmeasured transaction first, and creates the topic (CreateTopics).
    transactions = args.transactions + 1
    print(f"per transaction, over {transactions} transactions of 10 messages over 3 partitions "
          "(one producer, bench.py's loop):")
    for api, count in sorted(requests.items()):
        print(f"  {api + ' requests':<40} {count / transactions:7.2f}")
    for what, count in sorted(calls.items()):
        print(f"  {what:<40} {count / transactions:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
