"""Kafka's offset checkpoint files and small atomic state files.

Checkpoint text format (OffsetCheckpointFile): a version line `0`, a count line, then one
`topic partition offset` line per partition. Every file is written to a temporary name, fsynced,
then renamed over the old one, so a crash leaves either the old or the new version.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

TopicPartition = tuple[str, int]

# The log cleaner's (storage/cleaner.py): named here so a reset can remove it without loading the cleaner.
CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"


def write_atomically(path: Path, data: bytes, durable: bool = True) -> None:
    """Write through a temporary file and a rename; `durable` fsyncs it before the rename."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError:
        # On a full disk a torn temporary file would only hold on to space the next write needs.
        tmp.unlink(missing_ok=True)
        raise


def write_checkpoint(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    lines = ["0", str(len(offsets))] + [f"{topic} {partition} {offset}" for (topic, partition), offset in
                                         sorted(offsets.items())]
    write_atomically(path, ("\n".join(lines) + "\n").encode())


def read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """Offsets of a checkpoint file; an absent or malformed file reads as empty (full recovery)."""
    try:
        lines = path.read_text().splitlines()
    except (FileNotFoundError, UnicodeDecodeError):
        return {}
    try:
        if lines[0].strip() != "0":
            return {}
        count = int(lines[1])
        result: dict[TopicPartition, int] = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.rsplit(" ", 2)
            result[(topic, int(partition))] = int(offset)
        return result if len(result) == count else {}
    except (IndexError, ValueError):
        return {}
