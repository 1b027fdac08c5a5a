"""Compare a built wheel and sdist with the source tree they came from; exit 1 on any difference.

    python tests/install/check_dists.py SOURCE_DIR WHEEL SDIST

The wheel must hold exactly the modules of the layer folders, renamed to `minikafka.<layer>` (a
folder missing from the package list is how the wheel once shipped without `minikafka.coordinator.group`),
and nothing else of the checkout (tests/, bench/, ...). The sdist must hold what rebuilding the wheel
needs; check_install.sh then proves it by installing the sdist. Standard library only: this runs before
any venv exists.
"""

from __future__ import annotations

import argparse
import sys
import tarfile
import zipfile
from email.parser import HeaderParser
from pathlib import Path, PurePosixPath

LAYERS = ("protocol", "storage", "coordinator", "tools", "broker", "pipeline", "testing")
# Beyond the packages, what `setup.py sdist` output must carry to build the wheel again.
SDIST_BUILD_INPUTS = ("pyproject.toml", "setup.py", "README.md", "PKG-INFO")
LICENSE_EXPRESSION = "Apache-2.0"


def source_modules(source_dir: Path) -> set[str]:
    """Every .py file under the layer folders, as a path relative to the source root."""
    return {
        path.relative_to(source_dir).as_posix()
        for layer in LAYERS
        for path in (source_dir / layer).rglob("*.py")
        if "__pycache__" not in path.parts
    }


def check_wheel(wheel: Path, expected_sources: set[str]) -> list[str]:
    problems: list[str] = []
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        dist_infos = {PurePosixPath(name).parts[0] for name in names if ".dist-info/" in name}
        if len(dist_infos) != 1:
            return [f"wheel: expected one .dist-info folder, found {sorted(dist_infos)}"]
        dist_info = dist_infos.pop()
        metadata = HeaderParser().parsestr(archive.read(f"{dist_info}/METADATA").decode())
        entry_points = archive.read(f"{dist_info}/entry_points.txt").decode()
    package_files = {name for name in names if not name.startswith(f"{dist_info}/")}
    expected = {f"minikafka/{source}" for source in expected_sources}
    problems += [f"wheel lacks {name}" for name in sorted(expected - package_files)]
    problems += [f"wheel has {name}, which is no module of the layer folders" for name in
                 sorted(package_files - expected)]
    if metadata.get("License-Expression") != LICENSE_EXPRESSION:
        problems.append(f"wheel METADATA License-Expression is {metadata.get('License-Expression')!r}, "
                        f"expected {LICENSE_EXPRESSION!r}")
    if "minikafka = minikafka.broker.__main__:main" not in entry_points:
        problems.append(f"wheel has no `minikafka` console script:\n{entry_points}")
    return problems


def check_sdist(sdist: Path, expected_sources: set[str]) -> list[str]:
    with tarfile.open(sdist) as archive:
        members = [PurePosixPath(member.name) for member in archive.getmembers() if member.isfile()]
    roots = {member.parts[0] for member in members}
    if len(roots) != 1:
        return [f"sdist: expected one top folder, found {sorted(roots)}"]
    files = {PurePosixPath(*member.parts[1:]).as_posix() for member in members}
    needed = expected_sources | set(SDIST_BUILD_INPUTS)
    return [f"sdist lacks {name}" for name in sorted(needed - files)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source_dir", type=Path)
    parser.add_argument("wheel", type=Path)
    parser.add_argument("sdist", type=Path)
    args = parser.parse_args(argv)
    expected = source_modules(args.source_dir)
    # An empty tree would make both comparisons vacuous.
    if not any(name.startswith("coordinator/group/") for name in expected):
        print(f"check_dists: no coordinator/group modules under {args.source_dir}", file=sys.stderr)
        return 1
    problems = check_wheel(args.wheel, expected) + check_sdist(args.sdist, expected)
    for problem in problems:
        print(f"check_dists: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"check_dists: wheel and sdist hold all {len(expected)} modules of {', '.join(LAYERS)}, and the wheel "
          f"nothing else")
    return 0


if __name__ == "__main__":
    sys.exit(main())
