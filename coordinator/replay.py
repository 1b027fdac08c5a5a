"""Reading one internal topic partition through, from its log start to its log end.

The coordinators keep their state in topics (`__consumer_offsets`, `__transaction_state`,
`__share_group_state`, `_schemas`) and rebuild it at start by replaying each partition once; this is
the one loop they all replay with.
"""

from __future__ import annotations

from collections.abc import Iterator

from minikafka.coordinator.ports import PartitionLog, read_bytes
from minikafka.protocol.records import DecodedBatch, decode_batch, iter_whole_batches

READ_CHUNK_BYTES = 1 << 20


def iter_partition_batches(log: PartitionLog, *, skip_control: bool = False,
                           chunk_bytes: int = READ_CHUNK_BYTES) -> Iterator[DecodedBatch]:
    """Every batch of `log`, decoded and in log order, from its start offset to the end offset it had
    when the replay began. With `skip_control`, transaction markers are passed over undecoded.

    A read starts at the batch holding `position` and may end in a partial batch, so a chunk can bring
    a batch already replayed again (skipped) or only part of the next one (read again from it). The
    replay stops at a read that brings nothing past `position`: every turn moves `position` forward or
    ends the loop, so a log that does not move cannot hold it.
    """
    position, end = log.log_start_offset, log.log_end_offset
    while position < end:
        chunk = read_bytes(log, position, chunk_bytes)
        chunk_start = position
        for pos, header in iter_whole_batches(chunk):
            if header.next_offset <= position:
                continue
            position = header.next_offset
            if skip_control and header.is_control:
                continue
            yield decode_batch(chunk, pos)
        if position == chunk_start:
            return
