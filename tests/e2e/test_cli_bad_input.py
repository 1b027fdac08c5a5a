"""Every `minikafka` command answers bad arguments with one line on stderr and a non-zero exit, never a
traceback: ports out of range (which the socket module would wrap or reject with its own traceback), URLs
that are not URLs, unknown options and missing values. None of these cases reaches a broker."""

from __future__ import annotations

import subprocess
import sys

import pytest

CASES = [
    ("serve", "--port", "70000"),
    ("serve", "--port", "-5"),
    ("serve", "--port", "65535", "--nodes", "3"),
    ("serve", "--nodes", "abc"),
    ("serve", "--no-such-option"),
    ("no-such-command",),
    ("cluster", "--admin-url", "notaurl", "describe"),
    ("cluster", "--admin-url", "http://127.0.0.1:99999", "describe"),
    ("cluster", "describe"),
    ("transactions", "--bootstrap-server", "127.0.0.1:99999", "list"),
    ("transactions", "--bootstrap-server", "127.0.0.1:9092", "describe"),
    ("transactions",),
    ("consumer-groups", "--list"),
    ("dump-log",),
    ("dump-log", "--files", "x.log", "--key-decoder-class", "com.example.Nope"),
    ("txn-log", "--no-such-option"),
    ("probe", "--bootstrap-server", "127.0.0.1:99999"),
    ("probe",),
]


@pytest.mark.parametrize("argv", CASES, ids=[" ".join(case) for case in CASES])
def test_bad_arguments_get_one_line_and_a_non_zero_exit(argv: tuple[str, ...]) -> None:
    done = subprocess.run([sys.executable, "-m", "minikafka.broker", *argv], capture_output=True, text=True,
                          timeout=60, check=False, stdin=subprocess.DEVNULL)
    assert done.returncode != 0, done
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert done.stdout == "", done.stdout
