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
    ("topics", "--create"),
    ("topics", "--bootstrap-server", "127.0.0.1:99999", "--list"),
    ("topics", "--bootstrap-server", "127.0.0.1:9092", "--create", "--topic", "t", "--partitions", "abc"),
    ("probe",),
    ("acls", "--list"),
    ("acls", "--bootstrap-server", "127.0.0.1:99999", "--list"),
    ("acls", "--bootstrap-server", "127.0.0.1:9092", "--add", "--topic", "t"),
    ("configs", "--describe", "--entity-type", "clients"),
    ("configs", "--bootstrap-server", "127.0.0.1:99999", "--describe", "--entity-type", "clients"),
    ("configs", "--bootstrap-server", "127.0.0.1:9092", "--alter", "--entity-type", "clients"),
    ("configs", "--bootstrap-server", "127.0.0.1:9092", "--alter", "--entity-type", "clients", "--entity-name", "a",
     "--add-config", "producer_byte_rate=fast"),
    ("configs", "--bootstrap-server", "127.0.0.1:9092", "--describe", "--entity-type", "topics"),
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


_WITHOUT_CRYPTOGRAPHY = (
    "import sys\n"
    "sys.modules['cryptography'] = None  # as if the tls extra were not installed\n"
    "from minikafka.broker.__main__ import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def test_a_pkcs12_key_store_without_the_tls_extra_is_one_line_naming_the_key_and_the_package(tmp_path) -> None:
    store = tmp_path / "broker.p12"
    store.write_bytes(b"\x30\x82not really a key store")
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_CRYPTOGRAPHY, "serve", "--port", "0", "--data-dir", str(tmp_path / "data"),
         "--override", "listeners=SSL://127.0.0.1:0", "--override", "ssl.keystore.type=PKCS12",
         "--override", f"ssl.keystore.location={store}", "--override", "ssl.keystore.password=secret"],
        capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "ssl.keystore.location" in line and "cryptography" in line and "minikafka[tls]" in line, line
