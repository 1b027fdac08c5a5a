"""The seam through which log data reaches the disk, so tests can make it fail like a full disk.

Segments and their indexes write through a `FileWriter`; the default is `os.write`. A writer may
write fewer bytes than asked (as `write(2)` may): `write_fully` loops, and a writer that makes no
progress is an I/O error rather than an endless loop.
"""

from __future__ import annotations

import errno
import os
from typing import Protocol


class FileWriter(Protocol):
    def write(self, fd: int, data: memoryview) -> int:
        """Write some prefix of `data` to `fd`; return how many bytes, or raise OSError."""
        ...


class OsWriter:
    def write(self, fd: int, data: memoryview) -> int:
        return os.write(fd, data)


OS_WRITER: FileWriter = OsWriter()


def write_fully(writer: FileWriter, fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    written = 0
    while written < len(view):
        count = writer.write(fd, view[written:])
        if count <= 0:
            raise OSError(errno.EIO, "write made no progress")
        written += count
