"""testing/cowpages.py on real processes: the pages a forked child wrote are found in its pagemap, and
copying pages ahead makes exactly those pages the child's own. Run in a fresh interpreter: forking the test
process (with pytest's and xdist's threads) is not what a fork server does."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from minikafka.testing.forkserver import supported

pytestmark = pytest.mark.skipif(not supported(), reason="pagemap and MADV_POPULATE_WRITE are Linux's")

_SCRIPT = """
import ctypes, json, mmap, os, signal
from minikafka.testing import cowpages

PAGE = mmap.PAGESIZE
buffer = mmap.mmap(-1, 64 * PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
buffer.write(b"x" * len(buffer))  # every page present in the parent before the forks
base = ctypes.addressof(ctypes.c_char.from_buffer(buffer))
pages = lambda first, last: (base + first * PAGE, base + last * PAGE)
within = cowpages.writable_private_ranges()
results = {"buffer_within": any(start <= base and base + 64 * PAGE <= end for start, end in within)}

def stopped_child(work):
    pid = os.fork()
    if pid == 0:
        work()
        os.kill(os.getpid(), signal.SIGSTOP)
        os._exit(0)
    os.waitpid(pid, os.WUNTRACED)
    return pid

def finish(pid):
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)

def write_pages_3_to_5():
    for page in (3, 4, 5):
        buffer[page * PAGE] = ord("y")

child = stopped_child(write_pages_3_to_5)
results["written"] = cowpages.written_ranges(child, [pages(0, 64)])
finish(child)

child = stopped_child(lambda: cowpages.copy_ahead([pages(10, 13), (0, PAGE)]))
results["copied_ahead"] = cowpages.written_ranges(child, [pages(0, 64)])
finish(child)
results["expected_written"] = [pages(3, 6)]
results["expected_copied"] = [pages(10, 13)]
results["page_count"] = cowpages.page_count([pages(10, 13), pages(3, 6)])
print(json.dumps(results))
"""


def test_written_pages_are_found_and_copied_ahead_pages_are_the_childs_own() -> None:
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-3000:]
    results = json.loads(out.stdout)
    assert results["buffer_within"]
    assert results["written"] == results["expected_written"]  # pages 3-5 only: the rest is still shared
    assert results["copied_ahead"] == results["expected_copied"]  # the unmapped page 0 range was skipped
    assert results["page_count"] == 6
