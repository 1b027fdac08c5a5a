"""Kafka's LeaderEpochFileCache: the offset at which each leader epoch of a partition started.

Kept in the partition's `leader-epoch-checkpoint` (version 0, a count, then `epoch start_offset` lines),
rewritten atomically when a new epoch starts. A partition starts at epoch 0 from offset 0; an epoch
starts when another node becomes the partition's leader (broker/wire/cluster.py), so OffsetForLeaderEpoch can
tell a client where the epoch it last fetched from ended.
"""

from __future__ import annotations

from bisect import bisect_right
from pathlib import Path

from minikafka.storage.checkpoint import write_atomically

LEADER_EPOCH_FILE = "leader-epoch-checkpoint"
UNDEFINED = -1


def encode_checkpoint(entries: list[tuple[int, int]]) -> bytes:
    return ("0\n" + f"{len(entries)}\n" + "".join(f"{epoch} {start}\n" for epoch, start in entries)).encode()


def read_checkpoint(path: Path) -> list[tuple[int, int]]:
    """The entries of a checkpoint file; [] when it is missing or unreadable (a torn write is rewritten)."""
    try:
        lines = path.read_text().split("\n")
        count = int(lines[1])
        entries = [(int(epoch), int(start)) for epoch, start in (line.split() for line in lines[2:2 + count])]
    except (OSError, ValueError, IndexError):
        return []
    return entries if len(entries) == count else []


class LeaderEpochCache:
    def __init__(self, path: Path, entries: list[tuple[int, int]] | None = None) -> None:
        self.path = path
        self.entries = entries or [(0, 0)]

    @property
    def latest(self) -> int:
        return self.entries[-1][0]

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Start `epoch` at `start_offset`; False (and nothing written) when it is not newer than the latest."""
        if epoch <= self.latest:
            return False
        self.entries.append((epoch, start_offset))
        write_atomically(self.path, encode_checkpoint(self.entries))
        return True

    def end_offset_for(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as LeaderEpochFileCache.endOffsetFor answers: the latest epoch ends at the log
        end; an older one where the next epoch started; an unknown or future one is undefined."""
        if requested == UNDEFINED or requested > self.latest:
            return UNDEFINED, UNDEFINED
        if requested == self.latest:
            return self.latest, log_end_offset
        epochs = [epoch for epoch, _start in self.entries]
        higher = bisect_right(epochs, requested)
        floor_epoch = self.entries[higher - 1][0] if higher > 0 else requested
        return floor_epoch, self.entries[higher][1]
