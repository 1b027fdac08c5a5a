"""The seam through which log data reaches the disk, so tests can make it fail like a full disk.

Segments and their indexes write through a `FileWriter`; the default is `os.write`. A writer may
write fewer bytes than asked (as `write(2)` may): `write_fully` loops, and a writer that makes no
progress is an I/O error rather than an endless loop. A writer may also have `writev`, as the default
does (`os.writev`): several buffers then go out in one call. `sync_filesystem` makes a whole
filesystem durable at once (a clean close, where there is syncfs).
"""

from __future__ import annotations

import errno
import functools
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol


class FileWriter(Protocol):
    def write(self, fd: int, data: bytes | bytearray | memoryview) -> int:
        """Write some prefix of `data` to `fd`; return how many bytes, or raise OSError."""
        ...


class OsWriter:
    def write(self, fd: int, data: bytes | bytearray | memoryview) -> int:
        return os.write(fd, data)

    def writev(self, fd: int, buffers: list[memoryview]) -> int:
        return os.writev(fd, buffers)


OS_WRITER: FileWriter = OsWriter()


def write_fully(writer: FileWriter, fd: int, data: bytes | bytearray | memoryview) -> None:
    count = writer.write(fd, data)
    if count == len(data):
        return  # nearly always: a regular file takes the whole buffer at once
    view = memoryview(data)
    written = 0
    while True:
        if count <= 0:
            raise OSError(errno.EIO, "write made no progress")
        written += count
        if written >= len(view):
            return
        count = writer.write(fd, view[written:])


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


@functools.cache
def _libc_syncfs() -> Callable[[int], None] | None:
    """Linux's syncfs(2) from the C library (the os module has no binding for it), raising OSError as the os
    module's calls do; None elsewhere. Looked up at the first clean close, not at import: ctypes would add
    about 2 ms to every broker's start."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        function = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int]
    function.restype = ctypes.c_int

    def syncfs(fd: int) -> None:
        if function(fd) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))

    return syncfs


def can_sync_filesystem() -> bool:
    return _libc_syncfs() is not None


def sync_filesystem(directory: Path) -> None:
    """Make every file of the filesystem holding `directory` durable, with one syncfs(2): the data and
    metadata of all of them, renames included. OSError if it failed, or where there is no syncfs; since
    Linux 5.8 it reports a writeback that failed on that filesystem, as fsync does for its one file."""
    syncfs = _libc_syncfs()
    if syncfs is None:
        raise OSError(errno.ENOSYS, "syncfs is not available here")
    fd = os.open(directory, os.O_RDONLY)
    try:
        syncfs(fd)
    finally:
        os.close(fd)
