"""What a process holds open, read from /proc."""

from __future__ import annotations

import os
from pathlib import Path


def open_descriptor_targets(pid: int | str = "self") -> list[str]:
    """Where a process's open descriptors point (a removed file's ends in " (deleted)")."""
    targets = []
    for entry in Path(f"/proc/{pid}/fd").iterdir():
        try:
            targets.append(os.readlink(entry))
        except OSError:
            continue  # closed while listed (the listing's own descriptor among them)
    return targets
