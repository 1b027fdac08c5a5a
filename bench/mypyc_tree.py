"""A copy of the broker with its hottest modules compiled by mypyc, to measure what compiled code would buy.

    .venv/bin/python bench/mypyc_tree.py /tmp/minikafka-mypyc [--revision HEAD]   # about 2 minutes of gcc
    .venv/bin/python bench/ab.py --candidate-path /tmp/minikafka-mypyc/path [--workload transactions]

The open question behind it: is the CPU a request costs the interpreter running minikafka's own bytecode
(which compiling would remove), or CPython's object work (allocations, attribute and dict lookups) that
compiled Python still does? The copy is a commit (default HEAD, what bench/ab.py's broker A runs) unpacked
as the soak harness unpacks one (`OUT/path/minikafka`), the modules of HOT_MODULES compiled in place (their
`.so` files are imported before the `.py` beside them), the rest interpreted; broker B of `bench/ab.py`
imports it through PYTHONPATH. Only for measuring: mypyc compiles
code as its annotations say, so a few rare paths differ (a wrong narrowing in the frame receiver's error
path fails `tests/unit/protocol/test_framing.py`), and tests that replace a compiled method cannot.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for the soak harness's unpack_code
from tests.soak.harness import unpack_code  # noqa: E402

# Every module a Produce request or a transaction runs through, except those that generate code at run
# time (protocol/guard.py, encoder.py, build.py: their generated functions would stay interpreted anyway).
HOT_MODULES = (
    "protocol/records.py", "protocol/framing.py", "protocol/codec.py", "protocol/regions.py",
    "storage/log.py", "storage/segment.py", "storage/index.py", "storage/producer_state.py", "storage/files.py",
    "storage/origin.py", "storage/manager.py", "storage/clock.py",
    "coordinator/transaction/coordinator.py", "coordinator/transaction/state.py", "coordinator/transaction/log.py",
    "coordinator/transaction/markers.py",
    "broker/wire/dispatch.py", "broker/wire/connection.py", "broker/wire/hooks.py", "broker/observe/recorder.py",
    "broker/wire/context.py",
    "broker/wiring.py", "broker/wire/waiters.py", "broker/handlers/produce.py",
    "broker/handlers/add_partitions_to_txn.py", "broker/handlers/end_txn.py",
)

# mypyc builds a dataclass's fields from its annotations when the module is imported, and RequestContext
# names three classes that broker/wire/context.py imports only for type checking (they import it in turn).
_RUNTIME_ANNOTATIONS = {
    "broker/wire/context.py": (("    node: Node\n", "    node: Any\n"),
                          ("    services: BrokerServices\n", "    services: Any\n"),
                          ("    session: Session\n", "    session: Any\n")),
}


def use_runtime_annotations(package: Path) -> None:
    for module, replacements in _RUNTIME_ANNOTATIONS.items():
        path = package / module
        text = path.read_text()
        for old, new in replacements:
            if old not in text:
                raise RuntimeError(f"{module} no longer has {old.strip()!r}: update _RUNTIME_ANNOTATIONS")
            text = text.replace(old, new)
        path.write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="a new folder to build the copy in")
    parser.add_argument("--revision", default="HEAD", help="the commit to compile (default HEAD)")
    args = parser.parse_args()
    out = args.out.resolve()
    if out.exists():
        parser.error(f"{out} exists; give a new folder")
    unpacked, python_path = unpack_code(args.revision, out)
    use_runtime_annotations(python_path / "minikafka")
    mypyc = Path(sys.executable).with_name("mypyc")
    # The project's own mypy settings; the build runs where no pyproject.toml is (setuptools would read its
    # metadata).
    subprocess.run([str(mypyc), "--config-file", str(ROOT / "pyproject.toml"),
                    *(f"minikafka/{module}" for module in HOT_MODULES)],
                   cwd=python_path, check=True, stdout=subprocess.DEVNULL)
    where = subprocess.run([sys.executable, "-c", "import minikafka.storage.log as m; print(m.__file__)"],
                           env={**os.environ, "PYTHONPATH": str(python_path)}, capture_output=True, text=True,
                           check=True).stdout.strip()
    if not where.endswith(".so"):
        raise RuntimeError(f"the copy still imports interpreted code: {where}")
    print(f"compiled {len(HOT_MODULES)} modules of {unpacked}")
    print(f"for broker B: bench/ab.py --candidate-path {python_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
