"""`minikafka serve [PROPERTIES_FILE] [--override KEY=VALUE ...] [--host H] [--port P] [--data-dir DIR] [--nodes N]
[--admin-port P] [--clock manual] [--kafka-version V]`
and `minikafka txn-log [--data-dir DIR] [--transactional-id ID]`;
`minikafka transactions ...`, `minikafka consumer-groups ...` (Kafka's admin tools), `dump-log` and `cluster`:
every sub-command but `serve` is handed to its module in minikafka.tools (tools/*.py, `_TOOLS` below)."""

from __future__ import annotations

import gc
import sys

# kio registers Hypothesis strategies for its types whenever Hypothesis is importable (~130 ms) and
# structlog pulls in rich for pretty tracebacks (~40 ms). A broker process needs neither, so their
# imports are made to fail before anything imports them; both libraries fall back as they do when
# the packages are absent. Only this entry point does this: tests importing the package are unaffected.
for _unwanted in ("hypothesis", "rich"):
    sys.modules.setdefault(_unwanted, None)  # type: ignore[arg-type]
# Importing the broker makes some 50 collections (~3.5% of the instructions to the first answer, more of
# the time on a loaded machine) that can free nothing: modules, classes and functions live as long as
# the process. The collector is off until they are imported, then frozen out of every later collection
# (_serve); the other commands turn it back on.
gc.disable()

import argparse  # noqa: E402
import asyncio  # noqa: E402
import atexit  # noqa: E402
import contextlib  # noqa: E402
import functools  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import NoReturn  # noqa: E402

import structlog  # noqa: E402
from minikafka.broker.config.config import BrokerConfig, ConfigError, build_config  # noqa: E402
from minikafka.broker.config.logsetup import configure_logging  # noqa: E402
from minikafka.tools.cli import OneLineArgumentParser  # noqa: E402


@functools.cache  # built once: a fork server's children (minikafka.testing) find it built
def _parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(prog="minikafka", description="A Kafka-protocol broker in Python.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the broker")
    serve.add_argument("properties", nargs="?", type=Path, help="a server.properties file (Kafka's key names)")
    serve.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="set a property, as kafka-server-start's --override")
    serve.add_argument("--host", help="bind address (default from listeners: 127.0.0.1)")
    serve.add_argument("--port", type=int, help="bind port (default 9092; 0 picks a free port)")
    serve.add_argument("--data-dir", type=Path, help="log directory (default ./data)")
    serve.add_argument("--nodes", type=int, metavar="N",
                       help="serve N nodes from this process, node i on each listener's port + i (docs/cluster.md)")
    serve.add_argument("--admin-port", type=int,
                       help="serve the HTTP admin API (faults, state) on this port, 0 for a free one; "
                            "binds admin.listener.host (default 127.0.0.1). Off by default")
    serve.add_argument("--schema-registry-port", type=int, metavar="PORT",
                       help="serve the Confluent Schema Registry REST API on this port, 0 for a free one "
                            "(docs/schema-registry.md; sets schema.registry.port). Off by default")
    serve.add_argument("--clock", choices=["system", "manual"],
                       help="manual: time moves only when advanced over the admin API (POST /clock/advance), "
                            "so tests reach timeouts at once (sets minikafka.clock)")
    serve.add_argument("--kafka-version", metavar="VERSION",
                       help="behave as this Kafka release: 2.8, 3.0-3.9 (3.x: 3.9), 4.0 or 4.1 (default, the "
                            "newest); limits ApiVersions and defaults to that release's (sets minikafka.kafka.version)")
    serve.add_argument("--trace", metavar="FILE",
                       help="flight recorder: one JSON line per request/response pair to FILE, or - for standard "
                            "output (sets minikafka.trace.file)")
    serve.add_argument("--trace-records", action="store_true",
                       help="the trace also decodes every record of produced and fetched batches")
    serve.add_argument("--trace-api", action="append", default=[], metavar="API",
                       help="trace only this API (Kafka's name, e.g. EndTxn, or SchemaRegistry); repeatable")
    serve.add_argument("--trace-client-id", action="append", default=[], metavar="ID",
                       help="trace only requests of this client id; repeatable")
    serve.add_argument("--trace-topic", action="append", default=[], metavar="TOPIC",
                       help="trace only requests naming this topic; repeatable")
    serve.add_argument("--pcap", metavar="FILE",
                       help="capture the raw conversation to a pcap file Wireshark opens (sets minikafka.pcap.file)")
    serve.add_argument("--log-format", choices=["console", "json"], default="console")
    serve.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="info")
    # Listed here for --help only: main() hands their arguments to the tool's own parser.
    for name, tool in _TOOLS.items():
        commands.add_parser(name, add_help=False, help=f"{tool[1]} (see `minikafka {name} --help`)")
    return parser


# The command-line tools (minikafka.tools), each with its own parser: command -> (module, what it is).
_TOOLS = {
    # Kafka's admin command-line tools, spoken over the wire.
    "transactions": ("transactions", "Kafka's kafka-transactions.sh"),
    "consumer-groups": ("consumer_groups", "Kafka's kafka-consumer-groups.sh"),
    "topics": ("topics", "Kafka's kafka-topics.sh"),
    "acls": ("acls", "Kafka's kafka-acls.sh"),
    "configs": ("configs", "Kafka's kafka-configs.sh, for client quotas"),
    # Not over the wire: read segment, index and snapshot files, as kafka-dump-log.sh does.
    "dump-log": ("dump_log", "Kafka's kafka-dump-log.sh"),
    "txn-log": ("txn_log", "print __transaction_state as Kafka's TransactionLogMessageFormatter does"),
    # Over the admin listener: the nodes of a multi-node broker, and failover drills.
    "cluster": ("cluster", "nodes, leaders, stopping nodes and moving leaders"),
    # Over the wire: one ApiVersions request, exit 0 when the broker serves (container health checks).
    "probe": ("probe", "is a broker serving? one ApiVersions request"),
}


def _run_tool(name: str, argv: list[str]) -> int:
    import importlib

    module = importlib.import_module(f"minikafka.tools.{_TOOLS[name][0]}")
    return int(module.main(argv))


async def _serve(config: BrokerConfig) -> int:
    from minikafka.broker.server import BrokerServer  # imported late so `--help` and config errors stay fast

    # What exists now is the imported code and the configuration, kept for the process's life (and the
    # argument parser's few objects): later collections need not look at it again. The documented
    # gc.disable() ... gc.freeze() ... gc.enable() pattern; the broker's own objects are collected as usual.
    gc.freeze()
    gc.enable()

    log = structlog.get_logger("minikafka")
    server = BrokerServer(config, owns_process=True)
    loop = asyncio.get_running_loop()
    stop_requested = asyncio.Event()

    def on_signal(signum: int) -> None:
        if stop_requested.is_set():
            log.warning("second signal: exiting now", signal=signal.Signals(signum).name)
            os._exit(1)
        stop_requested.set()
        log.info("shutting down", signal=signal.Signals(signum).name)

    # Before the start, not after it: the port opens during start(), and a signal from a client that saw it
    # open (a test harness stopping a broker it just started) must still get a clean shutdown.
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        await server.start()
    except ConfigError as exc:  # what only the start finds out, such as a key store it cannot read
        print(f"minikafka: configuration error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        log.error("cannot start", error=str(exc))
        return 1
    stopped = asyncio.ensure_future(server.wait_stopped())
    signalled = asyncio.ensure_future(stop_requested.wait())
    await asyncio.wait((stopped, signalled), return_when=asyncio.FIRST_COMPLETED)
    if signalled.done():
        await server.shutdown()
    else:
        signalled.cancel()
    await stopped
    return 0


def _debugging_overrides(args: argparse.Namespace) -> list[str]:
    overrides = []
    if args.trace is not None:
        overrides.append(f"minikafka.trace.file={args.trace}")
    if args.trace_records:
        overrides.append("minikafka.trace.records=true")
    for key, values in (("minikafka.trace.apis", args.trace_api), ("minikafka.trace.client.ids", args.trace_client_id),
                        ("minikafka.trace.topics", args.trace_topic)):
        if values:
            overrides.append(f"{key}={','.join(values)}")
    if args.pcap is not None:
        overrides.append(f"minikafka.pcap.file={args.pcap}")
    return overrides


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in _TOOLS:
        gc.enable()
        return _run_tool(argv[0], argv[1:])
    args = _parser().parse_args(argv)
    configure_logging(args.log_format, args.log_level)
    log = structlog.get_logger("minikafka")
    try:
        admin_override = [] if args.admin_port is None else [f"admin.listener.port={args.admin_port}"]
        clock_override = [] if args.clock is None else [f"minikafka.clock={args.clock}"]
        if args.schema_registry_port is not None:
            clock_override.append(f"schema.registry.port={args.schema_registry_port}")
        version_override = [] if args.kafka_version is None else [f"minikafka.kafka.version={args.kafka_version}"]
        version_override += [] if args.nodes is None else [f"minikafka.nodes={args.nodes}"]
        config = build_config(
            properties_file=args.properties, overrides=[*args.override, *admin_override, *clock_override,
                                                          *version_override, *_debugging_overrides(args)],
            host=args.host, port=args.port, data_dir=args.data_dir,
        )
    except ConfigError as exc:
        print(f"minikafka: configuration error: {exc}", file=sys.stderr)
        return 2
    for key in config.unknown_keys:
        log.warning("unknown configuration key ignored", key=key)
    try:
        import uvloop
    except ImportError:
        code = asyncio.run(_serve(config))
    else:
        code = uvloop.run(_serve(config))
    _exit_without_teardown(code)


def _exit_without_teardown(code: int) -> NoReturn:
    """End the broker process once `_serve` has returned: the logs are flushed and closed (the clean-
    shutdown marker written) and the event loop closed, so what the interpreter's teardown would still
    do, collecting every module's objects one by one, only delays the exit, by 100-200 ms of the time
    from SIGTERM to exit that a test fixture stopping brokers hundreds of times a run pays each time.
    What of the teardown matters is kept: atexit callbacks run and the standard streams are flushed
    (logs go to them). The only threads left are daemon directory removers, which a normal exit would
    not wait for either."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed or broken pipe: nothing more to save
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
