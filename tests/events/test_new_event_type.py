"""The walk of docs/architecture.md, done: a new event type is two files, its class in
`accelopt/catalog.py` (declaring the readers of a run's log it changes nothing for) and its
row in the one reader that acts on it. In a copy of the project's packages, a role's
`KernelNoted` is added that way (the fold shows it, the coordinator skips it): it encodes,
decodes, has its subject, is folded, and the catalog's checks pass. Its class alone, without
the row, fails them naming it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("accelopt", "events", "replay", "memory_index", "prompts", "suites", "hardware_agents", "actors")

CLASS = '''

class KernelNoted(Event, tag=True, frozen=True):
    """A role's note on a kernel (the walk of docs/architecture.md)."""

    subject: ClassVar[str] = "kernel.noted"
    author: ClassVar[Author] = "role"
    ignored_by: ClassVar[frozenset[RunReader]] = frozenset({"coordinator"})

    kernel_id: str
    note: str
'''
ANCHOR = "\n\n# --- the LLM roles: the one table of them"
ROW = "            ev.on(ev.KernelProfiled, self._on_kernel_profiled),\n"
HANDLER = """
    def _on_kernel_noted(self, e: ev.KernelNoted) -> None:
        self.notes.append(e.note)
"""
INIT = "        self.completed: ev.RunCompleted | None = None\n"
CHECK = """
from accelopt import catalog as ev
from accelopt.coordinator import CoordinatorCore
from events.codec import decode, encode
from events.subjects import subject_for
from replay.fold import RunView

e = ev.KernelNoted(**ev.envelope(ev.KernelNoted, "r1", "k", ts=1.0), kernel_id="k", note="tiles of 64")
assert decode(encode(e)) == e and subject_for(e) == "accelopt.r1.kernel.noted"
assert ev.KernelNoted in ev.RUN_TYPES and ev.KernelNoted in CoordinatorCore.IGNORED
view = RunView()
view.apply(e)
assert view.notes == ["tiles of 64"]
print("walked")
"""
CATALOG_TESTS = (
    "handled_or_declared_ignored or dispatch_tables_are or named_for_an_event_type or declares_its_subject"
)


def _copy(tmp: Path) -> Path:
    dst = tmp / "project"
    for name in PACKAGES:
        shutil.copytree(ROOT / name, dst / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", dst)
    for part in ("conftest.py", "shared", "events"):
        src = ROOT / "tests" / part
        if src.is_dir():
            shutil.copytree(src, dst / "tests" / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (dst / "tests").mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dst / "tests" / part)
    return dst


def _patch(path: Path, anchor: str, text: str, *, before: bool = False) -> None:
    source = path.read_text()
    assert source.count(anchor) == 1, anchor
    path.write_text(source.replace(anchor, text + anchor if before else anchor + text))


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env
    )


def test_a_new_event_type_is_its_class_and_one_reader_s_row(tmp_path: Path) -> None:
    project = _copy(tmp_path)
    _patch(project / "accelopt" / "catalog.py", ANCHOR, CLASS, before=True)
    # its class alone: the fold neither handles nor skips it
    r = _run(
        project,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/events/test_event_catalog.py",
        "-k",
        CATALOG_TESTS,
    )
    assert r.returncode == 1 and "KernelNoted" in r.stdout, r.stdout + r.stderr
    # the second file: the fold's row (and what it keeps)
    fold = project / "replay" / "fold.py"
    _patch(fold, ROW, "            ev.on(ev.KernelNoted, self._on_kernel_noted),\n")
    _patch(fold, INIT, "        self.notes: list[str] = []\n")
    _patch(fold, "    def _on_run_completed(", HANDLER.lstrip("\n") + "\n", before=True)
    r = _run(project, "-c", CHECK)
    assert r.returncode == 0 and "walked" in r.stdout, r.stdout + r.stderr
    r = _run(
        project,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/events/test_event_catalog.py",
        "-k",
        CATALOG_TESTS,
    )
    assert r.returncode == 0, r.stdout + r.stderr
