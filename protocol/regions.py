"""A slice of a log file that a response sends as it is, as Kafka's FileRecords are sent.

A Fetch answer is mostly record batches that are already on disk. Reading them into memory with
`pread` and writing them back to the socket copied each byte twice, and a 1 MiB read into new memory
cost more than all the rest of the request. A `FileRegion` stands for the bytes instead: the encoder
keeps it aside in the frame (encoder.FrameBuffer) and the connection hands it to `sendfile(2)`, so
the bytes go from the page cache to the socket without passing through the interpreter. Wherever
bytes are needed after all (TLS, wire taps, tools), `read()` gives them.

The descriptor belongs to the log segment, which does not close it while a region of it is alive
(storage/segment.py): a segment deleted by retention between the read and the send still sends what
was read. A region ends when the last reference to it goes: the response once sent, or the flight
recorder's copy of the exchange once it is reduced to batch summaries, which it reads from the file.
A holder that may keep a region long (the flight recorder) sets `on_orphaned`: the segment calls it when
it is closed or deleted with the region still alive, so the holder can let go and the file's space and
descriptor are not kept for an exchange nobody may ever read.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable


class FileRegion:
    __slots__ = ("__weakref__", "_release", "fd", "length", "offset", "on_orphaned")

    def __init__(self, fd: int, offset: int, length: int, release: Callable[[], None] | None) -> None:
        self.fd = fd
        self.offset = offset
        self.length = length
        self._release = release
        self.on_orphaned: Callable[[], None] | None = None

    def orphaned(self) -> None:
        """The region's file was closed (or deleted) while the region lives: its holder's cue to let go."""
        callback, self.on_orphaned = self.on_orphaned, None
        if callback is not None:
            callback()

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return f"FileRegion(fd={self.fd}, offset={self.offset}, length={self.length})"

    def pread(self, position: int, size: int) -> bytes:
        """Up to `size` bytes from `position` within the region."""
        size = max(min(size, self.length - position), 0)
        return os.pread(self.fd, size, self.offset + position)

    def read(self) -> bytes:
        """The region's bytes; EOFError if the file is shorter now than when the region was taken."""
        data = self.pread(0, self.length)
        if len(data) != self.length:
            raise EOFError(f"{self!r}: the file ends after {len(data)} bytes of it")
        return data

    def __del__(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()


def materialized(parts: Iterable[bytes | memoryview | FileRegion]) -> list[bytes | memoryview]:
    """`parts` with every file region read into bytes."""
    return [part.read() if type(part) is FileRegion else part for part in parts]  # type: ignore[misc]
