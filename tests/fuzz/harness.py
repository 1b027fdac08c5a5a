"""Fuzz a broker subprocess with mutated client frames; count crashes, hangs, memory and data loss.

    .venv/bin/python -m tests.fuzz.harness run --frames 1000000 --seed 1
    .venv/bin/python -m tests.fuzz.harness replay fuzz-replays/crash-1-seed1.jsonl

`run` produces records with acks=all first, then sends mutated corpus frames over several connections
(reconnecting whenever the broker hangs up, reading responses with a short timeout), checks every few
hundred frames that a NEW connection gets ApiVersions and Metadata answered within 5 s, watches the
broker's exit code and RSS, and reads the acknowledged records back at the end. On a crash, an RSS over
the limit or an unanswered health check, the last frames sent go to a replay file, the broker is
restarted on the same data and the run goes on (bounded by --max-restarts). It exits non-zero on any
crash, unanswered health check, RSS over the limit or lost acknowledged record.

`replay` sends a replay file's frames one at a time to a fresh broker and names the first frame after
which it died, grew past the RSS limit or stopped answering.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, deque
from dataclasses import asdict, dataclass, field
from pathlib import Path

import structlog
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v12.request import MetadataRequest
from minikafka.protocol.codec import encode_request

from . import corpus
from .broker import FuzzBroker
from .mutator import Mutant, Mutator

_log = structlog.get_logger("fuzz.harness")

HEALTH_TIMEOUT_S = 5.0
# Responses larger than this are not read: the fuzzer only needs to know an answer came.
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
ACKED_TOPIC = "fuzz-acked-records"
ACKED_PARTITIONS = 3
PROGRESS_EVERY = 50_000
# A graceful stop that takes longer is reported (and the broker killed), not waited for.
STOP_TIMEOUT_S = 120.0


@dataclass
class FuzzConfig:
    frames: int = 1_000_000
    seed: int = 1
    connections: int = 16
    health_every: int = 300
    response_timeout_s: float = 0.3
    rss_limit_mb: int = 1536
    # Also an address-space cap, so a runaway allocation fails inside the broker instead of taking the machine.
    address_space_limit_mb: int = 12_288
    max_restarts: int = 10
    # A crash follows its frame within milliseconds; a stall shows only at the next health check, so
    # its replay holds every frame since the broker last answered anything (up to stalled_frames).
    last_frames: int = 50
    stalled_frames: int = 5000
    acked_records: int = 300
    replay_dir: Path = Path("fuzz-replays")
    corpus_path: Path = corpus.CORPUS_PATH
    pythonpath: str | None = None
    work_dir: Path | None = None


@dataclass
class Incident:
    kind: str  # "crash", "rss_limit" or "unanswered_health_check"
    at_frame: int
    detail: str
    replay_file: str
    log_tail: str


@dataclass
class FuzzResult:
    frames_sent: int = 0
    seconds: float = 0.0
    responses: int = 0
    broker_hangups: int = 0
    response_timeouts: int = 0
    health_checks: int = 0
    crashes: int = 0
    unanswered_health_checks: int = 0
    rss_limit_exceeded: int = 0
    max_rss_bytes: int = 0
    acked_records: int = 0
    acked_intact: bool = False
    acked_problems: list[str] = field(default_factory=list)
    incidents: list[Incident] = field(default_factory=list)
    stack_traces: dict[str, int] = field(default_factory=dict)
    stopped_early: str = ""
    stop_seconds: float = 0.0
    stop_exit_code: int | None = 0

    @property
    def frames_per_second(self) -> float:
        return self.frames_sent / self.seconds if self.seconds else 0.0

    @property
    def ok(self) -> bool:
        return (self.crashes == 0 and self.unanswered_health_checks == 0 and self.rss_limit_exceeded == 0
                and self.acked_intact and not self.stopped_early)

    def summary(self) -> str:
        lines = [
            f"frames sent: {self.frames_sent}",
            f"frames/s: {self.frames_per_second:.0f} ({self.seconds:.1f} s)",
            f"responses: {self.responses}, broker hang-ups: {self.broker_hangups}, "
            f"response timeouts: {self.response_timeouts}",
            f"crashes: {self.crashes}",
            f"unanswered health checks: {self.unanswered_health_checks} of {self.health_checks}",
            f"rss over limit: {self.rss_limit_exceeded}",
            f"max RSS: {self.max_rss_bytes / 2**20:.1f} MiB",
            f"acked data intact: {'yes' if self.acked_intact else 'no'} ({self.acked_records} records)",
        ]
        lines += [f"  {problem}" for problem in self.acked_problems[:10]]
        if self.stopped_early:
            lines.append(f"stopped early: {self.stopped_early}")
        stop = "killed after the timeout" if self.stop_exit_code is None else f"exit code {self.stop_exit_code}"
        lines.append(f"graceful stop at the end: {self.stop_seconds:.1f} s, {stop}")
        for incident in self.incidents:
            lines.append(f"{incident.kind} at frame {incident.at_frame}: {incident.detail}; "
                         f"replay {incident.replay_file}")
        if self.stack_traces:
            lines.append(f"broker stack traces: {sum(self.stack_traces.values())}")
            lines += [f"  {count} x {trace}" for trace, count in sorted(self.stack_traces.items(), key=lambda i: -i[1])]
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class SentFrame:
    seq: int
    connection: int
    sent_at: float
    mutant: Mutant


def _health_frames() -> bytes:
    versions = ApiVersionsRequest(client_software_name="minikafka-fuzz", client_software_version="1")
    metadata = MetadataRequest(topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return encode_request(1, versions) + encode_request(2, metadata)


async def _read_response(reader: asyncio.StreamReader) -> bool:
    """Read one response frame; False when it is too large to bother (the caller hangs up)."""
    size = int.from_bytes(await reader.readexactly(4), "big", signed=True)
    if not 0 < size <= MAX_RESPONSE_BYTES:
        return False
    await reader.readexactly(size)
    return True


async def health_check(port: int) -> bool:
    """A new connection gets ApiVersions and Metadata answered within HEALTH_TIMEOUT_S."""
    try:
        async with asyncio.timeout(HEALTH_TIMEOUT_S):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                writer.write(_health_frames())
                answered = await _read_response(reader) and await _read_response(reader)
            finally:
                writer.close()
        return answered
    except (TimeoutError, OSError, asyncio.IncompleteReadError):
        return False


class FuzzRun:
    def __init__(self, config: FuzzConfig, work_dir: Path) -> None:
        self.config = config
        self.frames = corpus.load(config.corpus_path)
        self.mutator = Mutator(self.frames, config.seed)
        self.result = FuzzResult()
        self.broker = FuzzBroker(work_dir / "data", work_dir, pythonpath=config.pythonpath,
                                 address_space_limit_mb=config.address_space_limit_mb)
        self.recent: deque[SentFrame] = deque(maxlen=max(config.last_frames, config.stalled_frames))
        self.last_answer_at = time.monotonic()
        self.broker_up = asyncio.Event()
        self.done = False
        self.restarts = 0
        self._next_health_check = config.health_every
        self._incident_lock = asyncio.Lock()
        self._acked: dict[tuple[int, int], bytes] = {}
        self._started = time.monotonic()

    # --- acknowledged data ---------------------------------------------------------------------------------------

    def produce_acked(self) -> None:
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, NewTopic

        bootstrap = f"127.0.0.1:{self.broker.port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(ACKED_TOPIC, ACKED_PARTITIONS, 1)], operation_timeout=10).values():
            future.result(timeout=15)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                             "enable.idempotence": True})
        errors: list[str] = []

        def delivered(error: object, message: object) -> None:
            if error is not None:
                errors.append(str(error))
            else:
                self._acked[(message.partition(), message.offset())] = message.value()  # type: ignore[attr-defined]

        for i in range(self.config.acked_records):
            producer.produce(ACKED_TOPIC, value=f"acked-{self.config.seed}-{i}".encode(),
                             partition=i % ACKED_PARTITIONS, on_delivery=delivered)
        producer.flush(30)
        if errors or len(self._acked) != self.config.acked_records:
            raise RuntimeError(f"could not produce the acked records: {len(self._acked)} acked, errors {errors[:3]}")

    def verify_acked(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{self.broker.port}", "group.id": "fuzz-verify",
                             "enable.auto.commit": False, "fetch.wait.max.ms": 100})
        consumer.assign([TopicPartition(ACKED_TOPIC, p, 0) for p in range(ACKED_PARTITIONS)])
        read: dict[tuple[int, int], bytes | None] = {}
        problems: list[str] = []
        deadline = time.monotonic() + 30
        try:
            while not self._acked.keys() <= read.keys() and time.monotonic() < deadline:
                for message in consumer.consume(num_messages=1000, timeout=0.2):
                    if message.error():
                        problems.append(f"consume error: {message.error()}")
                        continue
                    partition, offset = message.partition(), message.offset()
                    if partition is not None and offset is not None:
                        read[(partition, offset)] = message.value()
        finally:
            consumer.close()
        for position, value in sorted(self._acked.items()):
            if position not in read:
                problems.append(f"acked record at partition {position[0]} offset {position[1]} not read back")
            elif read[position] != value:
                problems.append(f"partition {position[0]} offset {position[1]}: {read[position]!r} != {value!r}")
        self.result.acked_records = len(self._acked)
        self.result.acked_problems = problems
        self.result.acked_intact = bool(self._acked) and not problems

    # --- incidents -------------------------------------------------------------------------------------------------

    def _write_replay(self, kind: str) -> str:
        self.config.replay_dir.mkdir(parents=True, exist_ok=True)
        number = len(self.result.incidents) + 1
        path = self.config.replay_dir / f"{kind}-{number}-seed{self.config.seed}.jsonl"
        frames = list(self.recent)
        if kind == "unanswered_health_check":
            # From a second before the last answer on: the frame that stalled the broker is among them.
            since = self.last_answer_at - 1.0
            frames = [sent for sent in frames if sent.sent_at >= since] or frames[-self.config.last_frames:]
        else:
            frames = frames[-self.config.last_frames:]
        with open(path, "w") as out:
            for sent in frames:
                source = self.frames[sent.mutant.source] if sent.mutant.source >= 0 else None
                out.write(json.dumps({
                    "seq": sent.seq, "connection": sent.connection, "kind": sent.mutant.kind,
                    "hang_up": sent.mutant.hang_up, "source": sent.mutant.source,
                    "client": source.client if source else None, "api": source.api_key if source else None,
                    "version": source.api_version if source else None, "data": sent.mutant.data.hex(),
                }) + "\n")
        return str(path)

    async def _incident(self, kind: str, detail: str) -> None:
        """Record the last frames, restart the broker on the same data, and let the senders go on."""
        async with self._incident_lock:
            if not self.broker_up.is_set():
                return  # another watcher is already handling this broker's end
            self.broker_up.clear()
            replay = self._write_replay(kind)
            if kind != "crash":
                self.broker.kill()
            await asyncio.to_thread(self._wait_exit)
            tail = self.broker.log_tail(8)
            if reason := self.broker.crash_reason():
                detail = f"{detail}: {reason}"
            self.result.incidents.append(Incident(kind, self.result.frames_sent, detail, replay, tail))
            _log.error("fuzz incident", kind=kind, detail=detail, at_frame=self.result.frames_sent, replay=replay,
                       log_tail=tail)
            if self.restarts >= self.config.max_restarts:
                self.result.stopped_early = f"{self.restarts} restarts (--max-restarts)"
                self.done = True
                self.broker_up.set()  # wakes the senders, which see `done` and stop
                return
            self.restarts += 1
            try:
                await asyncio.to_thread(self.broker.start)
            except (RuntimeError, TimeoutError) as exc:
                self.result.stopped_early = f"restart failed: {str(exc)[:300]}"
                self.done = True
            self.broker_up.set()

    def _wait_exit(self) -> None:
        if self.broker.process is not None:
            self.broker.process.wait(30)

    async def watch_broker(self) -> None:
        """Exit code and RSS, sampled often: a runaway allocation grows by gigabytes a second."""
        while not self.done:
            if self.broker_up.is_set():
                code = self.broker.exit_code()
                if code is not None:
                    self.result.crashes += 1
                    name = signal.Signals(-code).name if code < 0 else f"exit {code}"
                    await self._incident("crash", f"broker died ({name})")
                    continue
                rss = self.broker.rss_bytes()
                self.result.max_rss_bytes = max(self.result.max_rss_bytes, rss)
                if rss > self.config.rss_limit_mb * 2**20:
                    self.result.rss_limit_exceeded += 1
                    await self._incident("rss_limit", f"RSS {rss / 2**20:.0f} MiB over {self.config.rss_limit_mb} MiB")
                    continue
            await asyncio.sleep(0.02)

    # --- health checks ---------------------------------------------------------------------------------------------

    async def health_check(self) -> bool:
        return await health_check(self.broker.port)

    async def check_health(self) -> None:
        while not self.done:
            if self.result.frames_sent < self._next_health_check or not self.broker_up.is_set():
                await asyncio.sleep(0.01)
                continue
            self._next_health_check = self.result.frames_sent + self.config.health_every
            self.result.health_checks += 1
            if await self.health_check() or not self.broker_up.is_set():
                continue
            if self.broker.exit_code() is not None:
                continue  # died meanwhile: the crash watcher counts it
            self.result.unanswered_health_checks += 1
            await self._incident("unanswered_health_check",
                                 f"no ApiVersions+Metadata answer within {HEALTH_TIMEOUT_S} s")

    # --- senders ---------------------------------------------------------------------------------------------------

    async def sender(self, connection: int) -> None:
        streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        while not self.done:
            if self.result.frames_sent >= self.config.frames:
                break
            if not self.broker_up.is_set():
                self._hang_up(streams)
                streams = None
                await self.broker_up.wait()
                continue
            if streams is None:
                try:
                    streams = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", self.broker.port), 5)
                except (OSError, TimeoutError):
                    await asyncio.sleep(0.05)  # the broker is restarting or gone; the watcher decides which
                    continue
            if self.result.frames_sent >= self.config.frames:
                break  # others sent the last frames while this one connected
            mutant = self.mutator.next()
            self.result.frames_sent += 1
            if self.result.frames_sent % PROGRESS_EVERY == 0:
                self._log_progress()
            self.recent.append(SentFrame(self.result.frames_sent, connection, time.monotonic(), mutant))
            streams = await self._exchange(streams, mutant)
        self._hang_up(streams)

    async def _exchange(self, streams: tuple[asyncio.StreamReader, asyncio.StreamWriter],
                        mutant: Mutant) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        reader, writer = streams
        try:
            writer.write(mutant.data)
            await asyncio.wait_for(writer.drain(), self.config.response_timeout_s * 10)
            if mutant.hang_up:
                self._hang_up(streams)
                return None
            if await asyncio.wait_for(_read_response(reader), self.config.response_timeout_s):
                self.result.responses += 1
                self.last_answer_at = time.monotonic()
                return streams
            self._hang_up(streams)
            return None
        except TimeoutError:
            # No answer in time: acks=0, a long fetch wait, or a broker waiting for bytes a lying prefix
            # promised. The connection's state is unknown, so start over on a new one.
            self.result.response_timeouts += 1
        except (OSError, asyncio.IncompleteReadError):
            self.result.broker_hangups += 1
        self._hang_up(streams)
        return None

    def _log_progress(self) -> None:
        result = self.result
        _log.info("fuzz progress", frames=result.frames_sent,
                  frames_per_s=round(result.frames_sent / (time.monotonic() - self._started)),
                  crashes=result.crashes, unanswered_health_checks=result.unanswered_health_checks,
                  max_rss_mib=round(result.max_rss_bytes / 2**20, 1))

    @staticmethod
    def _hang_up(streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None) -> None:
        if streams is not None:
            streams[1].transport.abort()
        return None

    async def run(self) -> FuzzResult:
        await asyncio.to_thread(self.broker.start)
        self.broker_up.set()
        await asyncio.to_thread(self.produce_acked)
        started = self._started = time.monotonic()
        watchers = [asyncio.create_task(self.watch_broker()), asyncio.create_task(self.check_health())]
        await asyncio.gather(*(self.sender(i) for i in range(self.config.connections)))
        self.result.seconds = time.monotonic() - started
        # A last check after the final frame, so a run shorter than --health-every still has one.
        if self.broker_up.is_set() and not self.done:
            self.result.health_checks += 1
            if not await self.health_check() and self.broker.exit_code() is None:
                self.result.unanswered_health_checks += 1
                await self._incident("unanswered_health_check", "final check unanswered")
        await asyncio.sleep(0.1)  # one more watcher sample: a crash from the last frames counts
        self.done = True
        for task in watchers:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        try:
            if self.broker.exit_code() is not None:  # stopped early on a dead broker: the data must survive a restart
                await asyncio.to_thread(self.broker.start)
            await asyncio.to_thread(self.verify_acked)
            stopping = time.monotonic()
            try:
                self.result.stop_exit_code = await asyncio.to_thread(self.broker.stop, STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.result.stop_exit_code = None  # killed after the timeout, by `stop`
            self.result.stop_seconds = time.monotonic() - stopping
        except (RuntimeError, TimeoutError) as exc:
            self.result.acked_problems.append(f"broker not back for the read-back: {str(exc)[:300]}")
        self.result.stack_traces = stack_traces(self.broker.log_dir)
        return self.result


_FRAME_LINE = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def stack_traces(log_dir: Path) -> dict[str, int]:
    """Distinct tracebacks in the broker logs, named by event, innermost minikafka frame and exception."""
    traces: Counter[str] = Counter()
    for path in sorted(log_dir.glob("broker-*.log")):
        for line in path.read_text(errors="replace").splitlines():
            if '"exception"' not in line:
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            exception = str(entry.get("exception", ""))
            frames = [m for m in _FRAME_LINE.findall(exception) if "site-packages" not in m[0]]
            where = f"{Path(frames[-1][0]).name}:{frames[-1][1]} {frames[-1][2]}" if frames else "?"
            last = exception.strip().splitlines()[-1] if exception.strip() else "?"
            traces[f"{entry.get('event')} | {where} | {last[:160]}"] += 1
    return dict(traces)


def run_fuzz(config: FuzzConfig) -> FuzzResult:
    with tempfile.TemporaryDirectory(prefix="minikafka-fuzz-") as tmp:
        work_dir = config.work_dir or Path(tmp)
        work_dir.mkdir(parents=True, exist_ok=True)
        fuzz = FuzzRun(config, work_dir)
        try:
            return asyncio.run(fuzz.run())
        finally:
            fuzz.broker.kill()


# --- replay ------------------------------------------------------------------------------------------------------

async def _replay_one(port: int, data: bytes, hang_up: bool, timeout: float) -> str:
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
    except (OSError, TimeoutError):
        return "connect failed"
    try:
        writer.write(data)
        if hang_up:
            await writer.drain()
            return "sent, hung up"
        return "answered" if await asyncio.wait_for(_read_response(reader), timeout) else "oversized answer"
    except TimeoutError:
        return "no answer"
    except (OSError, asyncio.IncompleteReadError):
        return "broker closed the connection"
    finally:
        writer.transport.abort()


def replay(path: Path, pythonpath: str | None, rss_limit_mb: int, address_space_limit_mb: int) -> int:
    entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    with tempfile.TemporaryDirectory(prefix="minikafka-replay-") as tmp:
        broker = FuzzBroker(Path(tmp) / "data", Path(tmp), pythonpath=pythonpath,
                            address_space_limit_mb=address_space_limit_mb)
        broker.start()
        try:
            for entry in entries:
                outcome = asyncio.run(_replay_one(broker.port, bytes.fromhex(entry["data"]), entry["hang_up"], 0.3))
                # The health check doubles as the wait: an abort or a stall shows by the time it is answered.
                healthy = asyncio.run(health_check(broker.port)) and broker.exit_code() is None
                rss = broker.rss_bytes()
                print(f"seq {entry['seq']} {entry['client']} api {entry['api']} v{entry['version']} {entry['kind']}: "
                      f"{outcome}, RSS {rss / 2**20:.0f} MiB{'' if healthy else ', HEALTH CHECK UNANSWERED'}")
                if not healthy and broker.exit_code() is None:
                    print(f"\nCULPRIT: seq {entry['seq']} (health check unanswered within {HEALTH_TIMEOUT_S} s)\n"
                          f"frame: {entry['data']}")
                    return 1
                if broker.exit_code() is not None or rss > rss_limit_mb * 2**20:
                    code = broker.exit_code()
                    print(f"\nCULPRIT: seq {entry['seq']} (exit code {code}, RSS {rss / 2**20:.0f} MiB)\n"
                          f"frame: {entry['data']}\nbroker: {broker.crash_reason() or broker.log_tail(5)}")
                    return 1
            print("no frame killed, bloated or stalled the broker")
            return 0
        finally:
            broker.kill()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="fuzz a broker subprocess")
    defaults = FuzzConfig()
    run_parser.add_argument("--frames", type=int, default=defaults.frames)
    run_parser.add_argument("--seed", type=int, default=defaults.seed)
    run_parser.add_argument("--connections", type=int, default=defaults.connections)
    run_parser.add_argument("--health-every", type=int, default=defaults.health_every)
    run_parser.add_argument("--response-timeout", type=float, default=defaults.response_timeout_s)
    run_parser.add_argument("--max-restarts", type=int, default=defaults.max_restarts)
    run_parser.add_argument("--replay-dir", type=Path, default=defaults.replay_dir)
    run_parser.add_argument("--corpus", type=Path, default=defaults.corpus_path)
    run_parser.add_argument("--work-dir", type=Path, help="keep the broker's data and logs here")
    run_parser.add_argument("--json", type=Path, help="also write the result as JSON here")
    for sub in (run_parser, replay_parser := commands.add_parser("replay", help="find the frame in a replay file")):
        sub.add_argument("--pythonpath", help="run the broker from this tree (a minikafka/ folder of packages)")
        sub.add_argument("--rss-limit-mb", type=int, default=defaults.rss_limit_mb)
        sub.add_argument("--address-space-limit-mb", type=int, default=defaults.address_space_limit_mb)
    replay_parser.add_argument("file", type=Path)
    args = parser.parse_args(argv)
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    # SIGTERM (make, CI timeouts) unwinds like Ctrl-C, so the broker subprocess is killed on the way out.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    if args.command == "replay":
        return replay(args.file, args.pythonpath, args.rss_limit_mb, args.address_space_limit_mb)
    config = FuzzConfig(frames=args.frames, seed=args.seed, connections=args.connections,
                        health_every=args.health_every, response_timeout_s=args.response_timeout,
                        rss_limit_mb=args.rss_limit_mb, address_space_limit_mb=args.address_space_limit_mb,
                        max_restarts=args.max_restarts, replay_dir=args.replay_dir, corpus_path=args.corpus,
                        pythonpath=args.pythonpath, work_dir=args.work_dir)
    result = run_fuzz(config)
    print(result.summary())
    if args.json:
        payload = asdict(result) | {"frames_per_second": result.frames_per_second, "ok": result.ok}
        args.json.write_text(json.dumps(payload, indent=1))
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
