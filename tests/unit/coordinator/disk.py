"""A disk whose chosen partition directories are full, through the LogManager's writer seam."""

from __future__ import annotations

import errno
import os
from pathlib import Path


class FullPartitions:
    """Writes to files of the partition directories in `full` fail with ENOSPC (nothing written,
    as on a full filesystem); every other write goes to disk."""

    def __init__(self) -> None:
        self.full: set[str] = set()
        self.refused = 0

    def write(self, fd: int, data: memoryview) -> int:
        if Path(os.readlink(f"/proc/self/fd/{fd}")).parent.name in self.full:
            self.refused += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return os.write(fd, data)
