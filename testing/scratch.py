"""Where the test kit puts the temporary directories it makes: in memory when the machine has room.

A broker's data directory in a test is thrown away when the test ends, so nothing is gained by writing it to
a disk, and much is lost: on the ext4 disk of the 2-core machine `bench/suite.py` runs on, creating a file
or a directory costs 100-400 µs of CPU, and a broker creates about 400 of them for its internal topics
(`__consumer_offsets` and `__transaction_state`, 50 partitions each) and removes them again at its close or
reset; the same work on tmpfs takes about 1 ms in all. On that disk a fresh in-process broker's test of
`bench/suite.py` took a median of 290-475 ms against 240-250 ms in memory, and a reset's removal on its
background thread took enough CPU from the next test's client that librdkafka's 500 ms producer-id retry
hit 12-24 of 50 tests after a reset against 5-7 in memory (docs/performance.md, "Suite time").

So a directory the kit makes (not one the caller gives) goes to `/dev/shm` when it is writable with at least
1 GiB free, and to `tempfile`'s usual place otherwise: where TMPDIR is set (the caller chose a place),
outside Linux, and where `/dev/shm` is small (Docker gives containers 64 MB). A killed test process cannot
remove its directories, and memory, unlike a disk's /tmp, is not cleaned up by the system until a reboot;
so the directories are named after the process and its PID namespace, and the first directory a process
makes removes those in the same place of the same user and namespace whose process is gone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

MEMORY_ROOT = "/dev/shm"
MEMORY_MIN_FREE_BYTES = 1 << 30
PREFIX = "minikafka-"

_swept = False


def scratch_root() -> str | None:
    """The directory the kit's temporary directories go in: MEMORY_ROOT where it is usable, else None
    (`tempfile`'s default)."""
    if os.environ.get("TMPDIR") or not hasattr(os, "statvfs"):
        return None
    try:
        stats = os.statvfs(MEMORY_ROOT)
    except OSError:
        return None
    if stats.f_bavail * stats.f_frsize < MEMORY_MIN_FREE_BYTES or not os.access(MEMORY_ROOT, os.W_OK | os.X_OK):
        return None
    return MEMORY_ROOT


def make_scratch_directory() -> Path:
    """A new temporary directory for one `Broker` (its data directory and log), removed by its `close()`."""
    global _swept
    root = scratch_root() or tempfile.gettempdir()
    tag = owner_tag()
    if tag is None:
        return Path(tempfile.mkdtemp(prefix=PREFIX, dir=root))
    if not _swept:
        _swept = True
        remove_orphans(root, tag)
    return Path(tempfile.mkdtemp(prefix=f"{tag}{os.getpid()}-", dir=root))


def remove_orphans(root: str, tag: str) -> int:
    """Remove the directories under `root` named `tag` (owner_tag) and a PID whose process is gone, if this user
    owns them; returns how many. Another namespace's directories are left alone: its PIDs mean nothing here."""
    removed = 0
    with contextlib.suppress(OSError), os.scandir(root) as entries:
        for entry in entries:
            if not entry.name.startswith(tag):
                continue
            pid_text = entry.name[len(tag):].partition("-")[0]
            if not pid_text.isdigit() or _alive(int(pid_text)):
                continue
            with contextlib.suppress(OSError):
                if entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_uid == os.getuid():
                    shutil.rmtree(entry.path, ignore_errors=True)
                    removed += 1
    return removed


def owner_tag() -> str | None:
    """PREFIX plus this process's PID namespace: the part of a directory's name that says whose PIDs follow it.
    None where the namespace cannot be read (outside Linux, or without /proc): directories are then named as
    tempfile names them and never swept, since a PID alone could be another namespace's live process."""
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None
    return f"{PREFIX}{namespace}-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True
