"""The seam through which log data reaches the disk, so tests can make it fail like a full disk.

Segments and their indexes write through a `FileWriter`; the default is `os.write`. A writer may
write fewer bytes than asked (as `write(2)` may): `write_fully` loops, and a writer that makes no
progress is an I/O error rather than an endless loop. A writer may also have `writev`, as the default
does (`os.writev`): several buffers then go out in one call.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from typing import Protocol


class FileWriter(Protocol):
    def write(self, fd: int, data: memoryview) -> int:
        """Write some prefix of `data` to `fd`; return how many bytes, or raise OSError."""
        ...


class OsWriter:
    def write(self, fd: int, data: memoryview) -> int:
        return os.write(fd, data)

    def writev(self, fd: int, buffers: list[memoryview]) -> int:
        return os.writev(fd, buffers)


OS_WRITER: FileWriter = OsWriter()


def write_fully(writer: FileWriter, fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    written = 0
    while written < len(view):
        count = writer.write(fd, view[written:])
        if count <= 0:
            raise OSError(errno.EIO, "write made no progress")
        written += count


def write_parts_fully(writer: FileWriter, fd: int, parts: Sequence[bytes | bytearray | memoryview]) -> None:
    """Write `parts` one after another: in one `writev` where the writer has it, else one write each."""
    views = [memoryview(part) for part in parts if len(part)]
    writev = getattr(writer, "writev", None)
    while views:
        count = writev(fd, views) if writev is not None and len(views) > 1 else writer.write(fd, views[0])
        if count <= 0:
            raise OSError(errno.EIO, "write made no progress")
        while views and count >= len(views[0]):
            count -= len(views[0])
            del views[0]
        if count:
            views[0] = views[0][count:]
