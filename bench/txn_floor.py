"""What a transaction costs a Python broker that keeps no state, next to minikafka and Tansu.

    .venv/bin/python bench/txn_floor.py [--rounds 4] [--transactions 1000] [--tansu]

bench.py's one-producer transaction loop (a confluent-kafka producer: begin, 10 messages of 100 B over 3
partitions, commit) runs against each side in alternating rounds, each on fresh processes, and the
side's CPU per transaction is measured as bench.py measures a broker's. The sides:

- floor: a uvloop server that answers the requests of a transaction's cycle itself (AddPartitionsToTxn,
  Produce, EndTxn) and does only the steps that any broker keeping Kafka's log must: it reads the frames
  with minikafka's FrameReceiver, decodes them with kio through minikafka's codec (as the project's rules
  require), checks each batch's CRC-32C, patches its base offset in a copy of its header and appends it to
  its partition's file, appends the three `__transaction_state` records of a cycle (Ongoing,
  PrepareCommit, CompleteCommit) to a file of their own and the three markers to the partitions' files,
  and builds and encodes the answers with minikafka's `build` and encoder. Beyond the CRC it checks
  nothing; it keeps no producer, transaction or offset state. Every other request (ApiVersions, Metadata,
  FindCoordinator, InitProducerId, CreateTopics) is passed to a minikafka broker behind it that advertises
  the floor's port, so the producer's setup works; the measured transactions send none;
- minikafka;
- with `--tansu`, Tansu as bench.py runs it.

What the floor leaves out is what a broker needs for Kafka's guarantees (producer state and its
checks, the transaction coordinator's state machine, offsets and indexes, the observers); the floor is
what remains of a transaction's cost without any of it. Medians are printed, never asserted; not part of
`make bench`.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import statistics
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import floor  # bench/ is the script's folder, so it and bench.py are on sys.path

import bench

_SIZE = struct.Struct(">i")
_BASE_OFFSET = struct.Struct(">q")
_CRC = struct.Struct(">I")
_LAST_OFFSET_DELTA = struct.Struct(">i")
_CRC_AT = 17  # the CRC covers the batch from its attributes on (records.ATTRIBUTES_OFFSET)
# A `__transaction_state` record about as big as the coordinator's: the transactional id as key, the
# producer, state, timeout and partitions as value.
_TXN_STATE_KEY = b"\x00\x00\x00\x18bench-txn-floor-producer"
_TXN_STATE_VALUE = bytes(96)


def serve(port: int, upstream_port: int, directory: Path) -> None:
    """The floor server: the cycle's requests answered here, everything else passed to the upstream broker."""
    import crc32c
    from minikafka.protocol.api_keys import ApiKey
    from minikafka.protocol.build import build
    from minikafka.protocol.codec import decode_request, peek_header, response_class, response_frame
    from minikafka.protocol.framing import FrameReceiver
    from minikafka.protocol.records import (
        ATTRIBUTES_OFFSET,
        HEADER_SIZE,
        LAST_OFFSET_DELTA_OFFSET,
        ControlType,
        build_control_batch,
        build_one_record_batch,
    )

    files: dict[Any, int] = {}
    next_offsets: dict[Any, int] = {}
    in_transaction: list[tuple[str, int]] = []

    def file_of(key: Any) -> int:
        fd = files.get(key)
        if fd is None:
            fd = files[key] = os.open(directory / f"{key}.log", os.O_CREAT | os.O_WRONLY | os.O_APPEND)
        return fd

    def write_txn_state() -> None:
        batch, _header = build_one_record_batch(_TXN_STATE_KEY, _TXN_STATE_VALUE, int(time.time() * 1000))
        os.write(file_of("__transaction_state"), batch)

    def append(partition: tuple[str, int], records: bytes) -> int:
        """One batch (librdkafka sends one a partition) appended with its base offset set."""
        view = memoryview(records)
        (crc,) = _CRC.unpack_from(view, _CRC_AT)
        if crc32c.crc32c(view[ATTRIBUTES_OFFSET:]) != crc:
            raise ValueError("CRC mismatch")
        base_offset = next_offsets.get(partition, 0)
        header = bytearray(view[:HEADER_SIZE])
        _BASE_OFFSET.pack_into(header, 0, base_offset)
        os.writev(file_of(partition), [header, view[HEADER_SIZE:]])
        (last_delta,) = _LAST_OFFSET_DELTA.unpack_from(view, LAST_OFFSET_DELTA_OFFSET)
        next_offsets[partition] = base_offset + last_delta + 1
        return base_offset

    def produce(request: Any) -> Any:
        topics = []
        for topic in request.topic_data:
            results = []
            for part in topic.partition_data:
                base_offset = append((topic.name, part.index), part.records)
                results.append({"index": part.index, "error_code": 0, "base_offset": base_offset,
                                "log_append_time": -1, "log_start_offset": 0})
            topics.append({"name": topic.name, "partition_responses": results})
        return build(response_class(ApiKey.PRODUCE, request.__version__), responses=topics, throttle_time=0)

    def add_partitions(request: Any) -> Any:
        results = []
        for topic in request.v3_and_below_topics:
            in_transaction.extend((topic.name, index) for index in topic.partitions)
            results.append({"name": topic.name, "results_by_partition": [
                {"partition_index": index, "partition_error_code": 0} for index in topic.partitions]})
        write_txn_state()  # Ongoing, with the partitions added
        return build(response_class(ApiKey.ADD_PARTITIONS_TO_TXN, request.__version__), throttle_time=0,
                     results_by_topic_v3_and_below=results)

    def end_txn(request: Any) -> Any:
        write_txn_state()  # PrepareCommit
        return build(response_class(ApiKey.END_TXN, request.__version__), throttle_time=0, error_code=0)

    def write_markers(request: Any) -> None:
        control = ControlType.COMMIT if request.committed else ControlType.ABORT
        for partition in in_transaction:
            marker = bytearray(marker_of(request.producer_id, request.producer_epoch, control))
            base_offset = next_offsets.get(partition, 0)
            _BASE_OFFSET.pack_into(marker, 0, base_offset)
            os.write(file_of(partition), marker)
            next_offsets[partition] = base_offset + 1
        in_transaction.clear()
        write_txn_state()  # CompleteCommit

    @functools.cache
    def marker_of(producer_id: int, producer_epoch: int, control: ControlType) -> bytes:
        """One producer's marker, built once: a floor need not stamp each with its time."""
        return build_control_batch(producer_id=producer_id, producer_epoch=producer_epoch, control_type=control,
                                   coordinator_epoch=0, timestamp=int(time.time() * 1000))

    handlers: dict[int, Callable[[Any], Any]] = {
        ApiKey.PRODUCE: produce, ApiKey.ADD_PARTITIONS_TO_TXN: add_partitions, ApiKey.END_TXN: end_txn}

    async def answer_frames(receiver: FrameReceiver, transport: asyncio.Transport) -> None:
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        while (frame := await receiver.read_frame()) is not None:
            peeked = peek_header(frame)
            api_key, version, correlation_id = peeked.api_key, peeked.api_version, peeked.correlation_id
            handler = handlers.get(api_key)
            # AddPartitionsToTxn from v4 on is the brokers' batched form (KIP-890), which clients do not send.
            if handler is not None and not (api_key == ApiKey.ADD_PARTITIONS_TO_TXN and version > 3):
                request = decode_request(frame, api_key, version).body
                transport.writelines(response_frame(correlation_id, handler(request)).parts())
                if api_key == ApiKey.END_TXN:
                    write_markers(request)  # after the answer, as minikafka and Kafka write them
                continue
            if upstream is None:
                upstream = await asyncio.open_connection("127.0.0.1", upstream_port)
            reader, writer = upstream
            writer.write(_SIZE.pack(len(frame)) + bytes(frame))
            size_bytes = await reader.readexactly(4)
            transport.write(size_bytes + await reader.readexactly(_SIZE.unpack(size_bytes)[0]))
        if upstream is not None:
            upstream[1].close()
        transport.close()

    floor.serve_connections(port, answer_frames)


class FloorBroker(bench.Broker):
    """The floor server on `port`, with a minikafka broker behind it that advertises that port."""

    def __init__(self) -> None:
        floor_port = bench.free_port()
        self.upstream = bench.minikafka_broker()
        inner = self.upstream.command
        self.upstream.command = lambda port, data: [
            *inner(port, data), "--override", f"advertised.listeners=PLAINTEXT://127.0.0.1:{floor_port}"]
        super().__init__("floor", lambda port, data: [
            sys.executable, __file__, "--serve", str(port), "--upstream", str(self.upstream.port),
            "--dir", str(data)], ready_line=False)
        self.floor_port = floor_port

    def start(self, keep_data: bool = False) -> float:
        self.upstream.start()
        self.stop()
        self.starts += 1
        data = self.workdir / f"data-{self.starts}"
        data.mkdir(parents=True)
        self.log_path = self.workdir / f"floor-{self.starts}.log"
        started = time.perf_counter()
        with open(self.log_path, "w") as log:
            self.process = floor.start_server(self.command(self.floor_port, data), stderr=log)
        self.port = self.floor_port
        return time.perf_counter() - started

    def cleanup(self) -> None:
        super().cleanup()
        self.upstream.cleanup()


def transaction_round(broker: bench.Broker, transactions: int) -> float:
    broker.start()
    try:
        return bench.run_transactions(broker, "txn-floor", 1, transactions).broker_cpu_us_each
    finally:
        broker.cleanup()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--transactions", type=int, default=1000, help="measured transactions per side and round")
    parser.add_argument("--tansu", action="store_true", help="measure Tansu's side too")
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--upstream", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve, args.upstream, args.dir)
        return 0
    if min(args.rounds, args.transactions) < 1:
        parser.error("--rounds and --transactions must be at least 1")
    brokers: dict[str, Callable[[], bench.Broker]] = {"floor": FloorBroker,
                                                      **floor.brokers_compared(parser, args.tansu)}
    measured = floor.alternate_rounds({side: lambda make=make: transaction_round(make(), args.transactions)
                                       for side, make in brokers.items()}, args.rounds)
    print(f"\nbroker CPU per transaction (one producer, {bench.MESSAGES_PER_TRANSACTION} messages over "
          f"{bench.PRODUCE_PARTITIONS} partitions), medians of {args.rounds} rounds:")
    for side in brokers:
        print(f"  {side:10} {statistics.median(measured[side]):7.0f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
