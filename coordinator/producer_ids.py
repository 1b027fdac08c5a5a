"""Producer id allocation from persisted blocks, so ids are never reused across restarts.

Kafka's controller hands brokers blocks of 1000 ids (AllocateProducerIds) and records each block in
its metadata log. Here the block's end is written (tmp, fsync, rename) before any id of the block
is handed out; after a crash the next block starts past it, skipping at most one block's unused ids.
"""

from __future__ import annotations

import json
from pathlib import Path

from minikafka.storage.checkpoint import write_atomically

BLOCK_SIZE = 1000
FILE_NAME = "producer-id-block.json"


class ProducerIdManager:
    def __init__(self, data_dir: Path, block_size: int = BLOCK_SIZE) -> None:
        self._path = data_dir / FILE_NAME
        self._block_size = block_size
        self._next = 0
        self._block_end = 0  # exclusive
        if self._path.exists():
            persisted = json.loads(self._path.read_text())
            self._next = self._block_end = int(persisted["next_block_start"])

    def allocate(self) -> int:
        if self._next >= self._block_end:
            self._persist_block_end(self._next + self._block_size)
        producer_id = self._next
        self._next += 1
        return producer_id

    def _persist_block_end(self, end: int) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self._path, json.dumps({"version": 1, "next_block_start": end}).encode())
        self._block_end = end
