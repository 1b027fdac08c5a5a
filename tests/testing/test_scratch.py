"""Where the kit makes its temporary directories (minikafka.testing.scratch): in memory where there is room,
where TMPDIR says when it is set, and what a killed test process left there is removed."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from minikafka.testing import Broker, Mode, scratch

pytestmark = pytest.mark.e2e


@pytest.fixture
def memory_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for /dev/shm with room enough, TMPDIR unset, and no sweep made yet in this process."""
    root = tmp_path / "shm"
    root.mkdir()
    monkeypatch.setattr(scratch, "MEMORY_ROOT", str(root))
    monkeypatch.setattr(scratch, "MEMORY_MIN_FREE_BYTES", 0)
    monkeypatch.setattr(scratch, "_swept", False)
    monkeypatch.delenv("TMPDIR", raising=False)
    return root


def _tag() -> str:
    tag = scratch.owner_tag()
    assert tag is not None, "the kit's tests run on Linux, where /proc/self/ns/pid names the PID namespace"
    return tag


def _dead_pid() -> int:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                           capture_output=True, text=True)
    return int(child.stdout)


@pytest.mark.parametrize("mode", ["inprocess", "process"])
def test_a_brokers_own_directories_are_made_in_memory_and_removed_on_close(memory_root: Path, mode: Mode) -> None:
    with Broker(mode=mode) as broker:
        workdir = broker.data_dir.parent
        assert workdir.parent == memory_root
        assert workdir.name.startswith(f"{_tag()}{os.getpid()}-")
        assert broker.log_file.parent == workdir
        assert "broker ready" in broker.logs()
    assert list(memory_root.iterdir()) == []


def test_tmpdir_set_is_where_they_go(memory_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chosen = tmp_path / "chosen"
    chosen.mkdir()
    monkeypatch.setenv("TMPDIR", str(chosen))
    monkeypatch.setattr(tempfile, "tempdir", str(chosen))  # tempfile reads TMPDIR once per process
    orphan = chosen / f"{_tag()}{_dead_pid()}-abc"
    orphan.mkdir()
    assert scratch.scratch_root() is None
    with Broker() as broker:
        assert broker.data_dir.parent.parent == chosen
        assert broker.data_dir.parent.name.startswith(f"{_tag()}{os.getpid()}-")
        assert not orphan.exists()  # swept there too: a disk's /tmp is cleaned by the system only now and then
    assert list(memory_root.iterdir()) == []
    assert list(chosen.iterdir()) == []


def test_a_small_or_missing_memory_root_is_not_used(memory_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert scratch.scratch_root() == str(memory_root)
    monkeypatch.setattr(scratch, "MEMORY_MIN_FREE_BYTES", 1 << 60)
    assert scratch.scratch_root() is None
    monkeypatch.setattr(scratch, "MEMORY_MIN_FREE_BYTES", 0)
    monkeypatch.setattr(scratch, "MEMORY_ROOT", str(memory_root / "absent"))
    assert scratch.scratch_root() is None


def test_directories_of_gone_processes_are_removed_and_others_kept(memory_root: Path) -> None:
    tag = _tag()
    orphan = memory_root / f"{tag}{_dead_pid()}-abc"
    (orphan / "data" / "t-0").mkdir(parents=True)
    (orphan / "broker.log").write_text("broker ready\n")
    live = memory_root / f"{tag}{os.getpid()}-def"
    other_namespace = memory_root / f"{scratch.PREFIX}1-{_dead_pid()}-ghi"
    unrelated = memory_root / "someone-else"
    old_style = memory_root / f"{scratch.PREFIX}xyz"  # the names tempfile's default gave, no PID in them
    for kept in (live, other_namespace, unrelated, old_style):
        kept.mkdir()

    assert scratch.remove_orphans(str(memory_root), _tag()) == 1
    assert sorted(path.name for path in memory_root.iterdir()) == sorted(
        path.name for path in (live, other_namespace, unrelated, old_style))


def test_the_first_directory_a_process_makes_sweeps_the_orphans_once(memory_root: Path) -> None:
    first_orphan = memory_root / f"{_tag()}{_dead_pid()}-one"
    first_orphan.mkdir()
    made = scratch.make_scratch_directory()
    assert not first_orphan.exists()
    second_orphan = memory_root / f"{_tag()}{_dead_pid()}-two"
    second_orphan.mkdir()
    made_again = scratch.make_scratch_directory()
    assert second_orphan.exists()  # one sweep per process: a start pays for the listing once
    assert made.parent == made_again.parent == memory_root


def test_without_a_known_pid_namespace_nothing_is_swept(memory_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    orphan = memory_root / f"{_tag()}{_dead_pid()}-abc"
    orphan.mkdir()
    monkeypatch.setattr(scratch, "owner_tag", lambda: None)
    made = scratch.make_scratch_directory()
    assert orphan.exists()
    assert made.parent == memory_root and made.name.startswith(scratch.PREFIX)
    assert "-" not in made.name.removeprefix(scratch.PREFIX)  # tempfile's random letters only: no namespace, no PID
