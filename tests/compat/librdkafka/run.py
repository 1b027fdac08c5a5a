"""librdkafka's own integration suite (its tests/test-runner) against minikafka: `make compat-librdkafka
LIBRDKAFKA_SRC=/path/to/librdkafka`.

It builds the runner in the given source tree (configure, `make libs`, `make -C tests build`), then runs
every entry of the suite that needs a broker, one test-runner process per test number (`-p1 -E -L`:
one at a time, no socket-emulator tests, no local-only tests; full mode, not -Q), each against a fresh
broker configured as the suite's "default" scenario expects, once per consumer group protocol. The
results (entry, pass/fail/skip/timeout, seconds, cause) go to a Markdown page and a JSON file.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from minikafka.testing import Broker

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
KAFKA_PATH = HERE  # holds bin/kafka-topics.sh and bin/kafka-acls.sh, which entries run under $KAFKA_PATH/bin/
DEFAULT_MARKDOWN = REPO / "docs" / "compatibility" / "librdkafka.md"
DEFAULT_WORK_DIR = REPO / "build" / "compat-librdkafka"
KAFKA_VERSION = "4.2.0"
DEFAULT_TIMEOUT_S = 300.0
# Entries that outlive the default in full mode on a shared 2-core machine: 0081 (the Admin API, some 40
# sub-tests each waiting on timeouts of its own) and 0113 (cooperative rebalancing, dozens of rebalances).
ENTRY_TIMEOUTS_S = {"0081": 900.0, "0113": 900.0}
MODES = {"classic": None, "consumer": "consumer"}  # mode -> TEST_CONSUMER_GROUP_PROTOCOL
BROKER_START_TIMEOUT_S = 60.0
# The suite's scenarios/default.json (topics auto-created with 4 partitions) on a broker with Kafka's defaults:
# minikafka's group.initial.rebalance.delay.ms is 0 where Kafka's is 3000, and 0089_max_poll_interval counts
# on the delay (without it the second consumer's join moves the partition before max.poll.interval.ms).
# Kafka's test clusters (librdkafka's trivup) run an authorizer that allows everyone on resources without
# ACLs: CreateAcls works (0081) and the ACL entries (0109, 0115, 0119) can deny a topic with kafka-acls.sh.
DEFAULT_SCENARIO = {"auto.create.topics.enable": "true", "num.partitions": "4",
                    "group.initial.rebalance.delay.ms": "3000",
                    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                    "allow.everyone.if.no.acl.found": "true"}
# The suite's scenarios (tests/scenarios/*.json) as broker properties; test-runner runs only the entries whose
# .scenario names the one in TEST_SCENARIO, so each scenario an entry of a number needs is a run of its own.
SCENARIOS = {"default": DEFAULT_SCENARIO,
             "noautocreate": {**DEFAULT_SCENARIO, "auto.create.topics.enable": "false"}}
# Entries that create topics with replication factor 3 (test_create_topic*(..., partitions, 3, ...) or
# Test::create_topic(..., 3)) or need three brokers (0008 asks for default.replication.factor=3 and
# acks=all over 3 brokers), found by reading the test sources; they get a 3-node broker.
THREE_NODE_ENTRIES = frozenset({"0008", "0098", "0101", "0103", "0107", "0111", "0126", "0142"})
# test.conf's test.timeout.multiplier: the suite's own timeouts, stretched for a shared 2-core machine.
TIMEOUT_MULTIPLIER = 2.0
# pkg-config name -> Debian package. configure builds without the last three, but then the compression
# entries lose zstd/external lz4 and 0053, 0098 and 0110 skip themselves ("RapidJSON >=1.1.0 not available").
BUILD_PACKAGES = {"libssl": "libssl-dev", "zlib": "zlib1g-dev", "libzstd": "libzstd-dev", "liblz4": "liblz4-dev",
                  "RapidJSON": "rapidjson-dev"}
ANSI = re.compile(r"\x1b\[[0-9;]*m")
FAILURE = re.compile(r'### Test "(?P<name>[^" (]+)(?: \((?P<sub>.*)\))?" failed at (?P<where>\S+?)\(\) at [^#]*###\n'
                     r"(?P<message>[^\n]*)")
SUMMARY_ROW = re.compile(r"^\|\s*(?P<name>\d{4}_\S+)\s*\|\s*(?P<state>[A-Z_]+)\s*\|\s*(?P<seconds>[\d.]+)s\s*\|"
                         r"\s*(?P<detail>.*)$")
SUB_TEST_STARTED = re.compile(r"\[ (?P<sub>[^\]]+?) \]$")


class CompatError(Exception):
    """A problem the run cannot get past, said in one line."""


@dataclasses.dataclass(frozen=True, slots=True)
class Entry:
    """One `_TEST(...)` of the suite's tests[] table in tests/test.c."""

    name: str
    flags: str
    scenario: str

    @property
    def number(self) -> str:
        return self.name[:4]


@dataclasses.dataclass(slots=True)
class Result:
    mode: str
    entry: str
    result: str  # pass, fail, skip, timeout
    seconds: float
    sub_test: str = ""
    cause: str = ""


# --- the suite's list of entries -----------------------------------------------------------


def read_entries(source: Path) -> list[Entry]:
    text = (source / "tests" / "test.c").read_text(errors="replace")
    start = text.index("struct test tests[] = {")
    table = re.sub(r"/\*.*?\*/", "", text[start:text.index("};", start)], flags=re.S)
    entries = []
    for chunk in table.split("_TEST(")[1:]:
        name, _sep, rest = chunk.partition(",")
        flags = rest.split(",")[0].split(")")[0].strip()
        scenario = re.search(r'\.scenario\s*=\s*"([^"]*)"', rest)
        entries.append(Entry(name.strip(), flags, scenario.group(1) if scenario else "default"))
    return entries


def broker_entries(entries: Sequence[Entry]) -> list[Entry]:
    """The entries that need a broker: not local-only (TEST_F_LOCAL, which -L leaves out) nor manual."""
    return [e for e in entries if "TEST_F_LOCAL" not in e.flags and "TEST_F_MANUAL" not in e.flags]


# --- building the runner -------------------------------------------------------------------


def _missing_packages() -> list[str]:
    if shutil.which("pkg-config") is None:
        return ["pkg-config", *BUILD_PACKAGES.values()]
    return [package for module, package in BUILD_PACKAGES.items()
            if subprocess.run(["pkg-config", "--exists", module], check=False).returncode != 0]


def ensure_build_dependencies() -> None:
    """Installs what is missing when it can (root with apt-get, as in CI), otherwise says what to install."""
    missing = _missing_packages()
    if not missing:
        return
    if os.geteuid() == 0 and shutil.which("apt-get") and os.environ.get("CI"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "install", "-y", "-q", *missing], check=True, env=env)
        return
    raise CompatError(f"librdkafka's build needs: apt-get install {' '.join(missing)}")


def _step(command: Sequence[str], cwd: Path, log: Path) -> None:
    with open(log, "ab") as out:
        out.write(f"\n$ {' '.join(command)}\n".encode())
        out.flush()
        done = subprocess.run(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise CompatError(f"`{' '.join(command)}` failed in {cwd} (exit {done.returncode}); see {log}")


def build_runner(source: Path, work_dir: Path) -> Path:
    runner = source / "tests" / "test-runner"
    ensure_build_dependencies()
    log = work_dir / "build.log"
    jobs = f"-j{os.cpu_count() or 1}"
    if not (source / "Makefile.config").exists():
        _step(["./configure", "--disable-gssapi", "--disable-curl"], source, log)
    _step(["make", jobs, "libs"], source, log)
    _step(["make", jobs, "-C", "tests", "build"], source, log)
    if not runner.exists():
        raise CompatError(f"the build made no {runner}; see {log}")
    return runner


# --- running one test number ---------------------------------------------------------------


def scenario_of(entry: Entry) -> str | None:
    """The first of the entry's scenarios this runner can set a broker up for (None: none of them)."""
    return next((name for name in entry.scenario.split(",") if name in SCENARIOS), None)


def entry_timeout(number: str, default: float) -> float:
    return ENTRY_TIMEOUTS_S.get(number, default)


def _broker_config(number: str, scenario: str, overrides: dict[str, str]) -> tuple[dict[str, str], int]:
    nodes = 3 if number in THREE_NODE_ENTRIES else 1
    return {**SCENARIOS[scenario], "default.replication.factor": str(nodes), **overrides}, nodes


def _runner_env(number: str, scenario: str, bootstrap: str, mode: str, conf: Path,
                report: Path) -> dict[str, str]:
    env = {**os.environ, "TESTS": number, "TEST_SCENARIO": scenario, "TEST_KAFKA_VERSION": KAFKA_VERSION,
           "RDKAFKA_TEST_CONF": str(conf),
           "TEST_REPORT": str(report), "KAFKA_PATH": str(KAFKA_PATH), "BROKERS": bootstrap,
           "MINIKAFKA_PYTHON": sys.executable, "LD_LIBRARY_PATH": "../src:../src-cpp"}
    env.pop("TEST_CONSUMER_GROUP_PROTOCOL", None)
    protocol = MODES[mode]
    if protocol is not None:
        env["TEST_CONSUMER_GROUP_PROTOCOL"] = protocol
    return env


def _run_process(command: Sequence[str], cwd: Path, env: dict[str, str], log: Path,
                 timeout: float) -> tuple[int | None, float]:
    """Exit code (None on timeout, when the runner's whole process group is killed) and wall seconds."""
    started = time.monotonic()
    with open(log, "wb") as out:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
        code: int | None = None
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        finally:  # on the timeout, and when this run is interrupted: the runner is in a session of its own
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    return code, time.monotonic() - started


def _report_states(report: Path) -> dict[str, tuple[str, float]]:
    """State and seconds of each test from the runner's TEST_REPORT file, when it wrote one."""
    try:
        data = json.loads(report.read_text(errors="replace"))
    except (OSError, ValueError):
        return {}
    return {name: (str(t.get("state", "")), float(t.get("duration", 0.0)))
            for name, t in data.get("tests", {}).items()}


def _summary_rows(output: str) -> dict[str, tuple[str, float, str]]:
    rows = {}
    for line in output.splitlines():
        match = SUMMARY_ROW.match(line.strip())
        if match:
            rows[match["name"]] = (match["state"], float(match["seconds"]), match["detail"].strip().rstrip("|"))
    return rows


def _failures(output: str) -> dict[str, tuple[str, str]]:
    """The first failure of each test: (sub-test, where and message)."""
    found: dict[str, tuple[str, str]] = {}
    for match in FAILURE.finditer(output):
        found.setdefault(match["name"], (match["sub"] or "", f"{match['where']}(): {match['message'].strip()}"))
    return found


def _last_sub_test(output: str) -> str:
    subs = [m["sub"] for line in output.splitlines() if (m := SUB_TEST_STARTED.search(line))
            and ": PASS (" not in m["sub"] and ": SKIP:" not in m["sub"]]
    return subs[-1] if subs else ""


def _classify(entries: Sequence[Entry], mode: str, code: int | None, wall: float, output: str,
              report: Path, scenario: str = "default") -> list[Result]:
    states = _report_states(report)
    rows = _summary_rows(output)
    failures = _failures(output)
    results = []
    for entry in entries:
        state, seconds = states.get(entry.name, ("", 0.0))
        row = rows.get(entry.name)
        if row is not None:
            state, seconds = state or row[0], seconds or row[1]
        detail = row[2] if row else ""
        if scenario not in entry.scenario.split(","):
            results.append(Result(mode, entry.name, "skip", 0.0, cause=f"needs scenario {entry.scenario}"))
        elif code is None and state in ("", "RUNNING", "NOT_STARTED"):
            results.append(Result(mode, entry.name, "timeout", round(wall, 1), _last_sub_test(output),
                                  "killed after the per-entry timeout"))
        elif state == "PASSED":
            results.append(Result(mode, entry.name, "pass", round(seconds, 1)))
        elif state == "SKIPPED":
            results.append(Result(mode, entry.name, "skip", round(seconds, 1), cause=detail))
        elif state == "FAILED" or entry.name in failures:
            sub, cause = failures.get(entry.name, ("", detail))
            results.append(Result(mode, entry.name, "fail", round(seconds or wall, 1), sub, cause))
        elif code not in (0, None):
            # No state: the runner died (assert, signal) before its summary.
            sub, cause = failures.get(entry.name, (_last_sub_test(output), ""))
            how = f"signal {-code}" if code < 0 else f"exit {code}"
            results.append(Result(mode, entry.name, "fail", round(wall, 1), sub,
                                  cause or f"test-runner ended with {how} before its summary"))
        else:
            results.append(Result(mode, entry.name, "skip", 0.0, cause="not run by test-runner"))
    return results


def run_number(runner: Path, number: str, entries: Sequence[Entry], mode: str, work_dir: Path,
               timeout: float, overrides: dict[str, str]) -> list[Result]:
    """The number's entries, one test-runner run per scenario they need."""
    by_scenario: dict[str | None, list[Entry]] = {}
    for entry in entries:
        by_scenario.setdefault(scenario_of(entry), []).append(entry)
    results = [Result(mode, e.name, "skip", 0.0, cause=f"needs scenario {e.scenario}")
               for e in by_scenario.pop(None, [])]
    for scenario, chosen in by_scenario.items():
        assert scenario is not None
        results += _run_scenario(runner, number, scenario, chosen, mode, work_dir, timeout, overrides)
    order = {entry.name: index for index, entry in enumerate(entries)}
    return sorted(results, key=lambda r: order[r.entry])


def _run_scenario(runner: Path, number: str, scenario: str, entries: Sequence[Entry], mode: str,
                  work_dir: Path, timeout: float, overrides: dict[str, str]) -> list[Result]:
    run_dir = work_dir / mode / (number if scenario == "default" else f"{number}-{scenario}")
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    config, nodes = _broker_config(number, scenario, overrides)
    with Broker(config, mode="process", nodes=nodes, data_dir=run_dir / "data", log_file=run_dir / "broker.log",
                timeout=BROKER_START_TIMEOUT_S) as broker:
        conf = run_dir / "test.conf"
        conf.write_text(f"metadata.broker.list={broker.bootstrap_servers}\n"
                        f"test.timeout.multiplier={TIMEOUT_MULTIPLIER}\n")
        report = run_dir / "report.json"
        env = _runner_env(number, scenario, broker.bootstrap_servers, mode, conf, report)
        log = run_dir / "test-runner.log"
        code, wall = _run_process([str(runner), "-p1", "-E", "-L"], runner.parent, env, log, timeout)
    output = ANSI.sub("", log.read_text(errors="replace"))
    results = _classify(entries, mode, code, wall, output, report, scenario)
    shutil.rmtree(run_dir / "data", ignore_errors=True)
    return results


# --- results -------------------------------------------------------------------------------


def counts(results: Sequence[Result], mode: str) -> dict[str, int]:
    tally = {"pass": 0, "fail": 0, "skip": 0, "timeout": 0}
    for result in results:
        if result.mode == mode:
            tally[result.result] += 1
    return tally


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def librdkafka_version(source: Path) -> str:
    """From src/rdkafka.h's RD_KAFKA_VERSION (0xMMmmrrxx); the directory's name when it cannot be read."""
    try:
        header = (source / "src" / "rdkafka.h").read_text(errors="replace")
    except OSError:
        return source.name
    found = re.search(r"#define RD_KAFKA_VERSION\s+0x([0-9a-fA-F]{8})", header)
    if found is None:
        return source.name
    value = int(found.group(1), 16)
    return f"v{value >> 24}.{(value >> 16) & 0xFF}.{(value >> 8) & 0xFF}"


def _timeouts_text() -> str:
    by_seconds: dict[float, list[str]] = {}
    for number, seconds in sorted(ENTRY_TIMEOUTS_S.items()):
        by_seconds.setdefault(seconds, []).append(number)
    return "; ".join(f"{seconds:.0f} s for {' and '.join(numbers)}" for seconds, numbers in by_seconds.items())


def markdown(results: Sequence[Result], modes: Sequence[str], source: Path, timeout: float, note: str) -> str:
    lines = ["# librdkafka's integration suite against minikafka", "",
             "Generated by `make compat-librdkafka` (tests/compat/librdkafka/run.py) with the tests/test-runner "
             f"of librdkafka {librdkafka_version(source)}: `test-runner -p1 -E -L` with `TESTS=<number>`, "
             f"`TEST_KAFKA_VERSION={KAFKA_VERSION}`, full mode (not `-Q`), one process per test number and "
             f"scenario under a {timeout:.0f} s timeout ({_timeouts_text()}), each against a fresh broker "
             "(`auto.create.topics.enable=true`, `num.partitions=4`, `group.initial.rebalance.delay.ms=3000` as "
             "in Kafka, and the authorizer of Kafka's test clusters: `authorizer.class.name=org.apache.kafka."
             "metadata.authorizer.StandardAuthorizer` with `allow.everyone.if.no.acl.found=true`; "
             "the entries of the suite's noautocreate scenario run with `TEST_SCENARIO=noautocreate` against "
             f"`auto.create.topics.enable=false`; 3 nodes for {', '.join(sorted(THREE_NODE_ENTRIES))}), "
             f"`test.timeout.multiplier={TIMEOUT_MULTIPLIER}`. The classic mode runs the consumer group "
             "tests with `group.protocol=classic`, the consumer mode with `TEST_CONSUMER_GROUP_PROTOCOL=consumer` "
             "(KIP-848).", ""]
    if note:
        lines += [note, ""]
    lines += ["| mode | pass | fail | skip | timeout |", "|---|---|---|---|---|"]
    for mode in modes:
        tally = counts(results, mode)
        lines.append(f"| {mode} | {tally['pass']} | {tally['fail']} | {tally['skip']} | {tally['timeout']} |")
    for mode in modes:
        lines += ["", f"## {mode}", "", "| entry | result | seconds | sub-test | cause |", "|---|---|---|---|---|"]
        lines += [f"| {r.entry} | {r.result} | {r.seconds:.1f} | {_cell(r.sub_test)} | {_cell(r.cause)} |"
                  for r in sorted(results, key=lambda r: r.entry) if r.mode == mode]
    return "\n".join(lines) + "\n"


def write_results(results: Sequence[Result], modes: Sequence[str], source: Path, timeout: float, note: str,
                  markdown_path: Path, json_path: Path) -> None:
    markdown_path.parent.mkdir(parents=True, exist_ok=True)
    markdown_path.write_text(markdown(results, modes, source, timeout, note))
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps({
        "kafka_version": KAFKA_VERSION, "timeout_s": timeout, "note": note,
        "counts": {mode: counts(results, mode) for mode in modes},
        "results": [dataclasses.asdict(r) for r in results]}, indent=1) + "\n")


# --- entry point ---------------------------------------------------------------------------


def _selected(entries: Sequence[Entry], wanted: str | None) -> list[tuple[str, list[Entry]]]:
    """The entries by test number: all in order, or the --tests numbers in the order given."""
    by_number: dict[str, list[Entry]] = {}
    for entry in entries:
        by_number.setdefault(entry.number, []).append(entry)
    if not wanted:
        return sorted(by_number.items())
    numbers = list(dict.fromkeys(n.strip() for n in wanted.split(",") if n.strip()))
    unknown = [n for n in numbers if n not in by_number]
    if unknown:
        raise CompatError(f"not broker entries of this suite: {', '.join(unknown)}")
    return [(n, by_number[n]) for n in numbers]


def _in_scenarios(entries: Sequence[Entry], wanted: str | None) -> list[Entry]:
    if not wanted:
        return list(entries)
    names = {n.strip() for n in wanted.split(",") if n.strip()}
    unknown = names - set(SCENARIOS)
    if unknown:
        raise CompatError(f"--scenarios takes {', '.join(SCENARIOS)}, not {', '.join(sorted(unknown))}")
    return [e for e in entries if scenario_of(e) in names]


def _load(paths: Sequence[Path]) -> list[Result]:
    """The results of several runs; a later file's row for the same mode and entry replaces an earlier one."""
    results: dict[tuple[str, str], Result] = {}
    for path in paths:
        try:
            data = json.loads(path.read_text())
            for row in data["results"]:
                result = Result(**row)
                results[(result.mode, result.entry)] = result
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CompatError(f"cannot read results from {path}: {exc}") from None
    return list(results.values())


def run_all(runner: Path, selection: Sequence[tuple[str, list[Entry]]], modes: Sequence[str],
            args: argparse.Namespace) -> list[Result]:
    """Every selected number in every mode, the page rewritten after each; stops early at --budget."""
    started = time.monotonic()
    json_path = args.json or args.markdown.with_suffix(".json")
    results: list[Result] = []
    for mode in modes:
        for number, entries in selection:
            if args.budget is not None and time.monotonic() - started > args.budget:
                print(f"{mode}: --budget spent, {number} and later not run", flush=True)
                break
            done = run_number(runner, number, entries, mode, args.work_dir, entry_timeout(number, args.timeout),
                              args.override)
            results += done
            for result in done:
                print(f"{mode:9} {result.entry:52} {result.result:8} {result.seconds:7.1f}s {result.cause[:100]}",
                      flush=True)
            write_results(results, modes, Path(args.librdkafka_src), args.timeout, args.note, args.markdown,
                          json_path)
    return results


def _config_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {text!r}")
    return key, value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.compat.librdkafka.run", description=__doc__)
    parser.add_argument("--librdkafka-src", default=os.environ.get("LIBRDKAFKA_SRC"),
                        help="the librdkafka source tree (default: $LIBRDKAFKA_SRC)")
    parser.add_argument("--modes", default=",".join(MODES), help="classic, consumer or both (comma-separated)")
    parser.add_argument("--tests", help="only these test numbers, comma-separated (e.g. 0001,0103)")
    parser.add_argument("--scenarios", help=f"only the entries run in these scenarios ({', '.join(SCENARIOS)}; "
                                            "comma-separated; default: all)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                        help=f"seconds per test number and scenario (the entries of ENTRY_TIMEOUTS_S excepted: "
                             f"{_timeouts_text()})")
    parser.add_argument("--markdown", type=Path, default=DEFAULT_MARKDOWN, help="the results page")
    parser.add_argument("--json", type=Path, help="the results as JSON (default: the page's path with .json)")
    parser.add_argument("--work-dir", type=Path, default=DEFAULT_WORK_DIR, help="logs, one directory per run")
    parser.add_argument("--no-build", action="store_true", help="use the test-runner already built")
    parser.add_argument("--note", default="", help="a line for the page (e.g. which subset ran and why)")
    parser.add_argument("--override", type=_config_pair, action="append", default=[], metavar="KEY=VALUE",
                        help="a broker property on top of the default scenario's (repeatable)")
    parser.add_argument("--budget", type=float, help="start no new test number after this many seconds")
    parser.add_argument("--merge", type=Path, nargs="+", metavar="JSON",
                        help="run nothing: write the page from these results files (e.g. one per mode)")
    return parser


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt  # so the broker and the runner of the current entry are stopped on the way out


def main(argv: Sequence[str]) -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    args = _parser().parse_args(list(argv))
    args.override = dict(args.override)
    args.work_dir = args.work_dir.resolve()  # the runner's files are named in test.conf, read from tests/
    try:
        if not args.librdkafka_src:
            raise CompatError("LIBRDKAFKA_SRC is required: the path of a librdkafka source tree "
                              "(make compat-librdkafka LIBRDKAFKA_SRC=/path/to/librdkafka)")
        source = Path(args.librdkafka_src).resolve()
        if not (source / "tests" / "test.c").is_file():
            raise CompatError(f"LIBRDKAFKA_SRC={args.librdkafka_src} is not a librdkafka source tree "
                              "(no tests/test.c)")
        modes = [m.strip() for m in args.modes.split(",") if m.strip()]
        unknown = [m for m in modes if m not in MODES]
        if unknown or not modes:
            raise CompatError(f"--modes takes {', '.join(MODES)}, not {args.modes!r}")
        json_path = args.json or args.markdown.with_suffix(".json")
        if args.merge:
            write_results(_load(args.merge), modes, source, args.timeout, args.note, args.markdown, json_path)
            return 0
        args.work_dir.mkdir(parents=True, exist_ok=True)
        runner = source / "tests" / "test-runner"
        if not args.no_build:
            runner = build_runner(source, args.work_dir)
        elif not runner.exists():
            raise CompatError(f"--no-build but there is no {runner}")
        selection = _selected(_in_scenarios(broker_entries(read_entries(source)), args.scenarios), args.tests)
        results = run_all(runner, selection, modes, args)
        write_results(results, modes, source, args.timeout, args.note, args.markdown, json_path)
        for mode in modes:
            print(f"{mode}: {counts(results, mode)}")
    except CompatError as exc:
        print(f"compat-librdkafka: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
