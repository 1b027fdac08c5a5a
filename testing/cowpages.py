"""The copy-on-write pages a forked broker's start writes, found once and copied ahead of later starts.

A child of the fork server shares the server's memory until it writes to it. CPython writes to every object
it touches (reference counts), so a start copies about 2,000 of the server's pages (8 MB), one page fault
each: measured, 1,900 faults and 7-9 ms of a 13-17 ms forked start. The pages a start writes are nearly the
same every time (the same modules' objects, at the same addresses in every child of one server), so the
server finds them once, in a throwaway child it starts as a broker (`forkserver._scout_written_pages`), and every
spare child copies them while it waits for its request (`madvise(MADV_POPULATE_WRITE)`, Linux 5.14): the
start then faults about 170 times and runs in 6-8 ms. The copying takes the spare 10-13 ms of CPU, a little
more than the faults it saves (the scout writes about a fifth more pages than one start does), spent while
the spare waits rather than in a start; the memory is what the start would have copied anyway.

Linux only (/proc/PID/pagemap's "exclusively mapped" bit, since 4.2; the madvise, since 5.14). Where either
is missing nothing is copied ahead and a start faults as it did before.
"""

from __future__ import annotations

import ctypes
import os

Range = tuple[int, int]  # [start, end) addresses, page-aligned

_PAGE = os.sysconf("SC_PAGE_SIZE")
_MADV_POPULATE_WRITE = 23
# /proc/PID/pagemap: one 64-bit entry a page; bit 63 "present", bit 56 "exclusively mapped" (the page is
# this process's alone: written since the fork, or first touched by it).
_PRESENT = 1 << 63
_EXCLUSIVE = 1 << 56


def writable_private_ranges() -> list[Range]:
    """This process's private writable mappings (heap, anonymous memory, modules' data), the memory a child
    copies when it writes to it; the main thread's stack is left out (a child's use of it differs)."""
    ranges = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            permissions = fields[1]
            name = fields[5] if len(fields) > 5 else ""
            if permissions[1] != "w" or permissions[3] != "p" or name == "[stack]":
                continue
            start, end = (int(address, 16) for address in fields[0].split("-"))
            ranges.append((start, end))
    return ranges


def written_ranges(pid: int, within: list[Range]) -> list[Range]:
    """The pages of `within` that process `pid` holds exclusively (its parent's ranges: what it has written
    since its fork), merged into ranges. Empty where the pagemap cannot be read."""
    found: list[Range] = []
    try:
        pagemap = open(f"/proc/{pid}/pagemap", "rb", buffering=0)  # noqa: SIM115 - closed below
    except OSError:
        return found
    with pagemap:
        for start, end in within:
            try:
                pagemap.seek(start // _PAGE * 8)
                entries = memoryview(pagemap.read((end - start) // _PAGE * 8)).cast("Q")
            except OSError:
                continue
            run_start = None
            for index, entry in enumerate(entries):
                written = entry & _PRESENT and entry & _EXCLUSIVE
                if written and run_start is None:
                    run_start = start + index * _PAGE
                elif not written and run_start is not None:
                    found.append((run_start, start + index * _PAGE))
                    run_start = None
            if run_start is not None:
                found.append((run_start, start + len(entries) * _PAGE))
    return found


def page_count(ranges: list[Range]) -> int:
    return sum(end - start for start, end in ranges) // _PAGE


def copy_ahead(ranges: list[Range]) -> None:
    """Copy `ranges` into this process now, as writing to them would. A range no longer mapped is skipped
    (madvise fails on it), and so is every range on a kernel without MADV_POPULATE_WRITE (EINVAL)."""
    madvise = ctypes.CDLL(None, use_errno=True).madvise
    madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    madvise.restype = ctypes.c_int
    for start, end in ranges:
        madvise(start, end - start, _MADV_POPULATE_WRITE)

