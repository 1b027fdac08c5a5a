"""Producer id allocation from persisted blocks, so ids are never reused across restarts.

Kafka's controller hands brokers blocks of 1000 ids (AllocateProducerIds) and records each block in
its metadata log. Here the block's end is written (tmp, fsync, rename, directory fsync) before any id
of the block is handed out; after a crash the next block starts past it, skipping at most one
block's unused ids. A torn write can only leave the temporary file, never a half-written block file.

When the block cannot be written (full or read-only disk), no id is handed out and the request gets
COORDINATOR_LOAD_IN_PROGRESS, as from Kafka's RPCProducerIdManager while it waits for its next block
("older clients treat REQUEST_TIMED_OUT as fatal when it should be retriable"): every client retries
it against the same broker, where NOT_COORDINATOR would send transactional clients to look the
coordinator up again for nothing and means little to an idempotent producer, which has none.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.checkpoint import write_atomically

BLOCK_SIZE = 1000
FILE_NAME = "producer-id-block.json"

_log = logging.getLogger("minikafka.coordinator.producer_ids")


class ProducerIdBlockUnavailable(KafkaError):
    """No producer id can be handed out until the next block is persisted; clients retry."""

    error_code = ErrorCode.coordinator_load_in_progress


def write_durably(path: Path, data: bytes) -> None:
    """Atomic replace, then an fsync of the directory so the rename itself survives a crash."""
    write_atomically(path, data)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


class ProducerIdManager:
    def __init__(self, data_dir: Path, block_size: int = BLOCK_SIZE,
                 write_file: Callable[[Path, bytes], None] = write_durably) -> None:
        """`write_file` persists the block file; tests pass one that fails like a full disk."""
        self._path = data_dir / FILE_NAME
        self._block_size = block_size
        self._write_file = write_file
        self._next = 0
        self._block_end = 0  # exclusive
        self._failing = False  # the block file write is failing: logged once per streak
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
        data = json.dumps({"version": 1, "next_block_start": end}).encode()
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            self._write_file(self._path, data)
        except OSError as exc:
            if not self._failing:
                _log.warning("cannot persist the next producer id block to %s: %s; InitProducerId is answered "
                             "COORDINATOR_LOAD_IN_PROGRESS until it can", self._path, exc.strerror or exc)
                self._failing = True
            raise ProducerIdBlockUnavailable(f"no producer id block: {exc.strerror or exc}") from exc
        if self._failing:
            _log.info("producer id block persisted again")
            self._failing = False
        self._block_end = end
