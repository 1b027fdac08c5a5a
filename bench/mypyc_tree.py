"""A copy of the broker with its hottest modules compiled by mypyc, to measure what compiled code would buy.

    .venv/bin/python bench/mypyc_tree.py /tmp/minikafka-mypyc          # about 2 minutes of gcc
    .venv/bin/python bench/ab.py --candidate-path /tmp/minikafka-mypyc [--workload transactions]

The open question behind it: is the CPU a request costs the interpreter running minikafka's own bytecode
(which compiling would remove), or CPython's object work (allocations, attribute and dict lookups) that
compiled Python still does? The copy is the working tree's layers under `OUT/minikafka`, the modules of
HOT_MODULES compiled in place (their `.so` files are imported before the `.py` beside them), the rest
interpreted; broker B of `bench/ab.py` imports it through PYTHONPATH. Only for measuring: mypyc compiles
code as its annotations say, so a few rare paths differ (a wrong narrowing in the frame receiver's error
path fails `tests/unit/protocol/test_framing.py`), and tests that replace a compiled method cannot.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("protocol", "storage", "coordinator", "broker", "pipeline", "testing")

# Every module a Produce request or a transaction runs through, except those that generate code at run
# time (protocol/guard.py, encoder.py, build.py: their generated functions would stay interpreted anyway).
HOT_MODULES = (
    "protocol/records.py", "protocol/framing.py", "protocol/codec.py", "protocol/regions.py",
    "storage/log.py", "storage/segment.py", "storage/index.py", "storage/producer_state.py", "storage/files.py",
    "storage/origin.py", "storage/manager.py", "storage/clock.py",
    "coordinator/transaction/coordinator.py", "coordinator/transaction/state.py", "coordinator/transaction/log.py",
    "coordinator/transaction/markers.py",
    "broker/dispatch.py", "broker/connection.py", "broker/observe.py", "broker/recorder.py", "broker/context.py",
    "broker/transactions.py", "broker/waiters.py", "broker/handlers/produce.py",
    "broker/handlers/add_partitions_to_txn.py", "broker/handlers/end_txn.py",
)

# mypyc builds a dataclass's fields from its annotations when the module is imported, and RequestContext
# names three classes that broker/context.py imports only for type checking (they import it in turn).
_RUNTIME_ANNOTATIONS = {
    "broker/context.py": (("    node: Node\n", "    node: Any\n"),
                          ("    services: BrokerServices\n", "    services: Any\n"),
                          ("    session: Session\n", "    session: Any\n")),
}


def copy_layers(out: Path) -> None:
    package = out / "minikafka"
    if package.exists():
        shutil.rmtree(package)
    package.mkdir(parents=True)
    (package / "__init__.py").touch()
    for layer in LAYERS:
        shutil.copytree(ROOT / layer, package / layer, ignore=shutil.ignore_patterns("__pycache__"))
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
    parser.add_argument("out", type=Path, help="folder to build the copy in (its minikafka/ is replaced)")
    args = parser.parse_args()
    out = args.out.resolve()
    copy_layers(out)
    shutil.rmtree(out / "build", ignore_errors=True)
    mypyc = Path(sys.executable).with_name("mypyc")
    # The project's own mypy settings; the build runs in `out`, where no pyproject.toml is (setuptools would
    # read its metadata).
    subprocess.run([str(mypyc), "--config-file", str(ROOT / "pyproject.toml"),
                    *(f"minikafka/{module}" for module in HOT_MODULES)], cwd=out, check=True, stdout=subprocess.DEVNULL)
    where = subprocess.run([sys.executable, "-c", "import minikafka.storage.log as m; print(m.__file__)"],
                           env={**os.environ, "PYTHONPATH": str(out)}, capture_output=True, text=True,
                           check=True).stdout.strip()
    if not where.endswith(".so"):
        raise RuntimeError(f"the copy still imports interpreted code: {where}")
    print(f"compiled {len(HOT_MODULES)} modules; for broker B: bench/ab.py --candidate-path {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
