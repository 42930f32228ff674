"""Triton's compile cache kept per solution: compilation paid once per kernel, not per profile.

A harness child's Triton cache is `~/.triton/cache` in its work dir (HOME), new with every
child, so every profile compiled (and autotuned) its kernel again. The agent keeps what a
child's cache held when it ended in a folder of its own per solution hash (the sources and
the entry point), and stages it into the next child of the same solution before that child
runs. A kernel can write anything there, but only its own later profiles read it, and they
check everything again: it can poison nothing but itself. Another solution's child never
sees it.

    store = SolutionCache(root)
    stage.update(store.staged(solution))        # relative path -> bytes, into the work dir
    ...                                         # the child runs and ends
    store.keep(solution, box.workdir)           # what its cache holds now, bounded

Entries are read from the ended child's work dir as regular files only (no links), within
`MAX_FILES` files and `MAX_BYTES` bytes; the warm-up entry the sandbox writes is left out.
All solutions together keep at most `MAX_TOTAL_BYTES` (a kernel that fills its cache, edited
a thousand times, is a thousand solutions): the least recently used are dropped.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

from accelopt.problem import Solution
from hardware_agents.triton.warmup import WARMUP_KEY

CACHE_REL = ".triton/cache"  # in the child's work dir (its HOME)
MAX_FILES = 4096
MAX_BYTES = 512 << 20
MAX_TOTAL_BYTES = 4 << 30  # all solutions together: the least recently used go first


def solution_key(solution: Solution) -> str:
    """The sources and the entry point: what the child compiles (the name aside)."""
    return solution.content_hash()


class SolutionCache:
    """Each solution's Triton cache entries under `root/<solution key>/<entry>/<file>`."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def folder(self, solution: Solution) -> Path:
        return self.root / solution_key(solution)

    def staged(self, solution: Solution) -> dict[str, bytes]:
        """The solution's kept entries as files to stage in a child's work dir."""
        d = self.folder(solution)
        if not d.is_dir():
            return {}
        with contextlib.suppress(OSError):
            os.utime(d)  # used now: the last to be dropped
        out: dict[str, bytes] = {}
        try:
            for entry in sorted(d.iterdir()):
                for f in sorted(entry.iterdir()) if entry.is_dir() else []:
                    if f.is_file() and not f.is_symlink():
                        out[f"{CACHE_REL}/{entry.name}/{f.name}"] = f.read_bytes()
        except OSError:  # dropped (`_bound`) by another profile just now: compiled again
            return {}
        return out

    def keep(self, solution: Solution, workdir: Path) -> int:
        """Replace the solution's entries with what the ended child's cache holds; the number of
        files kept. Only regular files one level below an entry, within the bounds."""
        src = workdir / CACHE_REL
        try:
            entries = [e for e in os.scandir(src) if e.is_dir(follow_symlinks=False) and e.name != WARMUP_KEY]
        except OSError:
            return 0
        files: list[tuple[str, str, bytes]] = []
        total = 0
        for e in entries:
            for f in os.scandir(e.path):
                st = f.stat(follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode) or len(files) >= MAX_FILES or total + st.st_size > MAX_BYTES:
                    continue
                fd = os.open(f.path, os.O_RDONLY | os.O_NOFOLLOW)
                with os.fdopen(fd, "rb") as fh:
                    data = fh.read(st.st_size + 1)
                if len(data) != st.st_size:  # changed under us: not kept
                    continue
                files.append((e.name, f.name, data))
                total += len(data)
        dest = self.folder(solution)
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=self.root))
        for entry, name, data in files:
            (tmp / entry).mkdir(exist_ok=True)
            (tmp / entry / name).write_bytes(data)
        shutil.rmtree(dest, ignore_errors=True)
        try:
            tmp.rename(dest)
        except OSError:  # another profile of the same solution kept its entries just now
            shutil.rmtree(tmp, ignore_errors=True)
        self._bound(keep=dest.name)
        return len(files)

    def _bound(self, keep: str) -> None:
        """Drop the least recently used solutions' folders while all hold over MAX_TOTAL_BYTES."""
        sized: list[tuple[float, int, Path]] = []
        total = 0
        for d in self.root.iterdir():
            if d.name.startswith(".") or not d.is_dir() or d.is_symlink():
                continue
            n = sum(f.stat().st_size for e in d.iterdir() if e.is_dir() for f in e.iterdir() if f.is_file())
            sized.append((d.stat().st_mtime, n, d))
            total += n
        for _, n, d in sorted(sized):
            if total <= MAX_TOTAL_BYTES:
                break
            if d.name != keep:
                shutil.rmtree(d, ignore_errors=True)
                total -= n


__all__ = ["CACHE_REL", "MAX_BYTES", "MAX_FILES", "MAX_TOTAL_BYTES", "SolutionCache", "solution_key"]
