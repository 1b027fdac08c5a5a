"""`minikafka txn-log`: print `__transaction_state` as Kafka's TransactionLogMessageFormatter does.

The same JSON lines as `kafka-console-consumer.sh --topic __transaction_state --from-beginning
--formatter org.apache.kafka.tools.consumer.TransactionLogMessageFormatter`, read straight from the
segment files of a data directory, so no JVM and no client are needed. Reading a running broker's
directory is safe: segments are only appended to, and a batch still being written is skipped as a
torn tail. Records come partition by partition, in offset order within each.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from minikafka.coordinator.internal_topics import TRANSACTION_STATE_TOPIC
from minikafka.coordinator.transaction.log import encode_key, formatter_json
from minikafka.protocol.errors import CorruptRecord
from minikafka.protocol.records import decode_batch, iter_whole_batches
from minikafka.tools.cli import OneLineArgumentParser

_PARTITION_DIR = re.compile(rf"^{TRANSACTION_STATE_TOPIC}-(\d+)$")


def partition_dirs(data_dir: Path) -> dict[int, Path]:
    found = {}
    for entry in data_dir.iterdir() if data_dir.is_dir() else ():
        match = _PARTITION_DIR.match(entry.name)
        if match and entry.is_dir():
            found[int(match.group(1))] = entry
    return found


def records_of(partition_dir: Path) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every data record in the partition's segments, oldest first."""
    for segment in sorted(partition_dir.glob("*.log")):
        data = segment.read_bytes()
        for position, header in iter_whole_batches(data):
            if header.is_control:
                continue
            for record in decode_batch(data, position).records:
                yield record.offset, record.key, record.value


def dump(partitions: dict[int, Path], out: TextIO, transactional_id: str | None = None) -> int:
    """Write one JSON line per record of `partitions` (from `partition_dirs`); returns how many."""
    # Every partition is scanned even for one transactional id: the partition count is the
    # broker's config, and `__transaction_state` is small. Keys are compared as bytes: a key's
    # encoding is unique, so only the matching records are decoded.
    wanted_key = encode_key(transactional_id) if transactional_id is not None else None
    written = 0
    for partition in sorted(partitions):
        for offset, key, value in records_of(partitions[partition]):
            if wanted_key is not None and key != wanted_key:
                continue
            try:
                line = formatter_json(key, value)
            except CorruptRecord as exc:
                print(f"{TRANSACTION_STATE_TOPIC}-{partition} offset {offset}: {exc}", file=sys.stderr)
                continue
            if line is not None:
                out.write(json.dumps(line, separators=(",", ":")) + "\n")
                written += 1
    return written


def main(argv: list[str]) -> int:
    parser = OneLineArgumentParser(
        prog="minikafka txn-log",
        description="print __transaction_state as Kafka's TransactionLogMessageFormatter does")
    parser.add_argument("--data-dir", type=Path, default=Path("data"), help="the broker's log directory")
    parser.add_argument("--transactional-id", help="only the records of this transactional id")
    args = parser.parse_args(argv)
    partitions = partition_dirs(args.data_dir)
    if not partitions:
        print(f"minikafka: no __transaction_state partitions under {args.data_dir}", file=sys.stderr)
        return 1
    dump(partitions, sys.stdout, args.transactional_id)
    return 0
