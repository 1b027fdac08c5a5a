"""What going idle between requests costs the broker: one producer's transactions, with and without idle waits.

    .venv/bin/python bench/idle_cost.py [--rounds 5] [--transactions 1000] [--gap-us 300] [--wait sleep|spin]

bench.py's transaction (AddPartitionsToTxn, a Produce of 3-4 records to each of 3 partitions, EndTxn, then
the markers and CompleteCommit the coordinator writes) is run in this process through the broker's own
dispatch (broker/wire/dispatch.py), as a connection hands it each frame: a broker started in-process, no
sockets, no client. A librdkafka producer sends these requests in three groups and waits for the answers
in between (AddPartitionsToTxn; the Produce requests; EndTxn), so a broker serving it goes idle three
times a transaction. The rounds alternate between running the groups back to back and sleeping
`--gap-us` before each group (the idle wait), so a slow spell of the machine falls on both.

Printed per round and as medians: thread CPU time per transaction (the waits' own CPU time, measured
apart, taken out), and per group of requests (timed without the waits). What the groups add up to with the
waits, less what they add up to back to back, is what the three waits cost the same work. `--wait spin`
waits in a busy loop instead of sleeping, so the CPU is never given up: what the waits still cost then is
what the time passing costs, and the rest of the sleeping kind's figure is the cost of going idle (most
likely the CPU's caches, cold when it comes back; this VM gives perf no hardware counters to show the
misses). Figures only, never asserted; if any request was answered with an error code the run fails at its
end, since its figures would not be this workload's. Not part of `make bench`.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import uvloop
from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.static.primitive import i16, i32, i64
from minikafka.broker.config.config import BrokerConfig
from minikafka.broker.config.logsetup import configure_logging
from minikafka.broker.security.session import Session
from minikafka.broker.server import BrokerServer
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.dispatch import dispatch
from minikafka.protocol.codec import decode_response, encode_request

from bench import (  # bench/ is the script's folder, so it is on sys.path
    MESSAGES_PER_TRANSACTION,
    PRODUCE_PARTITIONS,
    VALUE,
    produce_request,
    raw_batch,
)

TOPIC = "idle"
PARTITIONS = PRODUCE_PARTITIONS
# bench.py's transaction spreads its messages round-robin over the partitions: 4, 3 and 3 of them.
RECORDS_PER_PARTITION = tuple(len(range(partition, MESSAGES_PER_TRANSACTION, PARTITIONS))
                              for partition in range(PARTITIONS))
TRANSACTIONAL_ID = "idle-cost"
GROUPS = ("AddPartitionsToTxn", "Produce (each)", "EndTxn", "markers + CompleteCommit")
_START_DEADLINE_S = 30.0
_SETTLE_TURNS = 20  # loop turns the markers may take after EndTxn (they take one)


def _frame(body: Any) -> bytes:
    """A request frame as a connection hands it to dispatch: without its size prefix."""
    return encode_request(1, body, client_id="rdkafka")[4:]


class Transactions:
    """The broker in this process, and the frames of one producer's transactions."""

    def __init__(self, server: BrokerServer) -> None:
        assert server.services is not None and server.node is not None
        self.services = server.services
        session = Session("PLAINTEXT", "PLAINTEXT", "127.0.0.1")
        node, services = server.node, server.services

        def make_context(api_key: int, api_version: int, correlation_id: int, client_id: str | None) -> RequestContext:
            return RequestContext(api_key, api_version, correlation_id, client_id, 1, "127.0.0.1:1", node, services,
                                  session)

        self.make_context: Callable[[int, int, int, str | None], RequestContext] = make_context
        self.producer_id = self.producer_epoch = -1
        self.sequences = [0] * PARTITIONS

    async def start(self) -> None:
        deadline = time.monotonic() + _START_DEADLINE_S
        while not self.services.transactions.loaded:
            if time.monotonic() > deadline:
                raise RuntimeError("the transaction coordinator did not load")
            await asyncio.sleep(0.01)
        self.services.logs.create_topic(TOPIC, PARTITIONS, {})
        init = InitProducerIdRequest(transactional_id=TRANSACTIONAL_ID, transaction_timeout=timedelta(seconds=60),
                                     producer_id=i64(-1), producer_epoch=i16(-1))
        answer = await dispatch(_frame(init), self.make_context)
        assert answer is not None
        _correlation, body = decode_response(b"".join(bytes(part) for part in answer.parts())[4:],  # type: ignore[arg-type]
                                             init.__api_key__, init.__version__)
        if body.error_code:
            raise RuntimeError(f"InitProducerId answered {body.error_code!r}")
        self.producer_id, self.producer_epoch = body.producer_id, body.producer_epoch

    def frames(self, count: int) -> list[tuple[bytes, list[bytes], bytes]]:
        """`count` transactions' frames: AddPartitionsToTxn, a Produce per partition, EndTxn (commit)."""
        add = _frame(AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=TRANSACTIONAL_ID, v3_and_below_producer_id=i64(self.producer_id),
            v3_and_below_producer_epoch=i16(self.producer_epoch),
            v3_and_below_topics=(AddPartitionsToTxnTopic(name=TOPIC, partitions=tuple(
                i32(partition) for partition in range(PARTITIONS))),)))
        end = _frame(EndTxnRequest(transactional_id=TRANSACTIONAL_ID, producer_id=i64(self.producer_id),
                                   producer_epoch=i16(self.producer_epoch), committed=True))
        return [(add, [self._produce(partition, records) for partition, records in enumerate(RECORDS_PER_PARTITION)],
                 end) for _ in range(count)]

    def _produce(self, partition: int, records: int) -> bytes:
        batch = raw_batch(records, VALUE, producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                          base_sequence=self.sequences[partition], transactional=True)
        self.sequences[partition] += records
        return _frame(produce_request(TOPIC, {partition: batch}, TRANSACTIONAL_ID))

    async def run(self, frames: list[tuple[bytes, list[bytes], bytes]],
                  wait: Callable[[], None] | None) -> tuple[float, list[float]]:
        """CPU µs per transaction (waits included) and each group's median µs."""
        clock, make_context, txns = time.thread_time_ns, self.make_context, self.services.transactions.txns
        groups: list[list[int]] = [[] for _ in GROUPS]
        started = clock()
        for add, produces, end in frames:
            if wait is not None:
                wait()
            before = clock()
            await dispatch(add, make_context)
            groups[0].append(clock() - before)
            if wait is not None:
                wait()
            before = clock()
            for produce in produces:
                await dispatch(produce, make_context)
            groups[1].append((clock() - before) // len(produces))
            if wait is not None:
                wait()
            before = clock()
            await dispatch(end, make_context)
            after_end = clock()
            for _ in range(_SETTLE_TURNS):  # the coordinator writes the markers on the loop's next turn
                await asyncio.sleep(0)
                if not txns[TRANSACTIONAL_ID].pending_completion:
                    break
            else:
                raise RuntimeError("the markers were not written")
            groups[2].append(after_end - before)
            groups[3].append(clock() - after_end)
        total_us = (clock() - started) / len(frames) / 1000
        return total_us, [statistics.median(samples) / 1000 for samples in groups]

    def error_codes(self) -> dict[str, dict[int, int]]:
        """Error codes other than NONE that the broker answered, by API (its request metrics)."""
        return {name: {code: count for code, count in stats.errors.items() if code}
                for name, stats in self.services.metrics.apis.items()
                if any(code for code in stats.errors)}


def waiting(how: str, gap_s: float) -> Callable[[], None]:
    """A wait of `gap_s`: asleep (the CPU given up, as a broker waiting for its client), or spinning."""
    if how == "sleep":
        return functools.partial(time.sleep, gap_s)

    def spin() -> None:
        end = time.perf_counter() + gap_s
        while time.perf_counter() < end:
            pass
    return spin


def wait_cpu_us(wait: Callable[[], None], count: int) -> float:
    """Thread CPU time of one wait: a sleep's system calls, or the whole of a spin."""
    started = time.thread_time_ns()
    for _ in range(count):
        wait()
    return (time.thread_time_ns() - started) / count / 1000


async def measure(rounds: int, transactions: int, gap_s: float, how: str, directory: Path) -> None:
    server = BrokerServer(BrokerConfig(host="127.0.0.1", port=0, data_dir=directory))
    await server.start()
    try:
        workload = Transactions(server)
        await workload.start()
        await workload.run(workload.frames(200), None)  # warm up: first uses compile codecs, open files
        wait = waiting(how, gap_s)
        waits_us = 3 * wait_cpu_us(wait, 300)
        results: dict[bool, list[tuple[float, list[float]]]] = {False: [], True: []}
        for index in range(rounds):
            for idle in (False, True):
                total, groups = await workload.run(workload.frames(transactions), wait if idle else None)
                total -= waits_us if idle else 0.0
                results[idle].append((total, groups))
                print(f"round {index + 1} {'with waits' if idle else 'back to back':12} {total:8.1f} µs a transaction; "
                      + ", ".join(f"{name} {value:.1f}" for name, value in zip(GROUPS, groups, strict=True)),
                      flush=True)
        errors = workload.error_codes()
        if errors:
            raise SystemExit(f"requests were answered with errors {errors}: these figures are not the workload's")
    finally:
        await server.shutdown()
    print(f"\nmedians over {rounds} rounds of {transactions} transactions (the waits' own CPU, "
          f"{waits_us:.1f} µs a transaction, taken out):")
    work: dict[bool, float] = {}
    for idle in (False, True):
        totals = [total for total, _groups in results[idle]]
        groups = [statistics.median(groups[index] for _total, groups in results[idle]) for index in range(len(GROUPS))]
        # The groups are timed without the waits, so their sum needs no estimate of a wait's own CPU taken out.
        work[idle] = sum(value * (len(RECORDS_PER_PARTITION) if name == GROUPS[1] else 1)
                         for name, value in zip(GROUPS, groups, strict=True))
        label = f"{gap_s * 1e6:.0f} µs {how} before each group" if idle else "back to back"
        print(f"  {label:32} {statistics.median(totals):8.1f} µs a transaction; "
              + ", ".join(f"{name} {value:.1f}" for name, value in zip(GROUPS, groups, strict=True)))
    extra = work[True] - work[False]
    print(f"  the groups' medians add up to {work[False]:.0f} µs back to back and {work[True]:.0f} µs with the "
          f"waits: the three waits cost the work {extra:.0f} µs a transaction, {extra / 3:.0f} µs each")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--transactions", type=int, default=1000, help="transactions per round and side")
    parser.add_argument("--gap-us", type=float, default=300.0, help="the wait before each group of requests")
    parser.add_argument("--wait", choices=("sleep", "spin"), default="sleep",
                        help="sleep (give the CPU up, as a broker waiting for its client does) or spin")
    args = parser.parse_args()
    if min(args.rounds, args.transactions) < 1 or args.gap_us <= 0:
        parser.error("--rounds and --transactions must be at least 1, --gap-us above 0")
    configure_logging(level="warning")
    directory = Path(tempfile.mkdtemp(prefix="minikafka-idle-cost-"))
    try:
        uvloop.run(measure(args.rounds, args.transactions, args.gap_us / 1e6, args.wait, directory))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
