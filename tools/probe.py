"""`minikafka probe`: is a broker serving? One ApiVersions request over the wire, for health checks.

    minikafka probe --bootstrap-server 127.0.0.1:9092 [--timeout 5]

Exits 0 when the broker answers ApiVersions with error code NONE, 1 when it cannot be reached or its
answer is not that, 2 on bad arguments; prints one line in every case (stdout when serving, stderr
otherwise). It speaks only the Kafka protocol, so it probes any Kafka broker.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import NoReturn

from minikafka.protocol.api_keys import ApiKey
from minikafka.tools.admin_client import AdminError, Connection

PROG = "minikafka probe"
DEFAULT_TIMEOUT_S = 5.0
EXIT_SERVING = 0
EXIT_NOT_SERVING = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad arguments: reported in one line, exit 2."""


class _OneLineParser(argparse.ArgumentParser):
    """argparse prints the usage before its error; a health check's log keeps one line per probe."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def parse_address(text: str) -> tuple[str, int]:
    """HOST:PORT (an IPv6 host in brackets) with a port from 1 to 65535."""
    host, sep, port = text.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port:
        raise UsageError(f"--bootstrap-server {text!r}: expected HOST:PORT")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise UsageError(f"--bootstrap-server {text!r}: the port must be a number from 1 to 65535")
    return host, int(port)


def parse_timeout(text: str) -> float:
    try:
        timeout = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < timeout < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: the timeout must be more than 0 seconds")
    return timeout


def _parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="the broker to probe")
    parser.add_argument("--timeout", type=parse_timeout, default=DEFAULT_TIMEOUT_S, metavar="S",
                        help=f"seconds for connecting and the answer together (default {DEFAULT_TIMEOUT_S:g})")
    return parser


def probe(host: str, port: int, timeout_s: float) -> str:
    """One line saying how the broker answered; AdminError when it did not answer ApiVersions with NONE."""
    started = time.monotonic()
    # Connection sends ApiVersions (v3, or v0 when the broker asks for it) and checks the error code.
    connection = Connection(host, port, started + timeout_s)
    try:
        if ApiKey.API_VERSIONS not in connection.versions:
            raise AdminError(f"{host}:{port} answered ApiVersions without listing ApiVersions")
        elapsed_ms = (time.monotonic() - started) * 1000
        return f"{host}:{port} is serving: ApiVersions answered NONE with {len(connection.versions)} APIs " \
               f"in {elapsed_ms:.1f} ms"
    finally:
        connection.close()


def main(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
        host, port = parse_address(args.bootstrap_server)
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        print(probe(host, port, args.timeout))
    except AdminError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_NOT_SERVING
    except Exception as exc:
        # Whatever else goes wrong (an answer that does not decode, say) means the broker is not serving
        # Kafka there; a health check wants that as exit 1 and one line, never a traceback.
        print(f"{PROG}: {host}:{port} gave no valid ApiVersions answer: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_NOT_SERVING
    return EXIT_SERVING
