"""Reading a FlashInfer-Bench folder as people publish it: one file's defect skips that file
(or line), with the reason, and the rest is read.

Published folders differ from what FlashInfer-Bench's own writer produces: workloads and
traces saved one per file as pretty-printed `.json` (FlashInfer-Bench's `save_json_file`)
beside or instead of `.jsonl` lines, and solution files that share a name (a `deprecated_`
copy kept beside the current file). FlashInfer-Bench's loader reads only `.jsonl` and stops at
the first duplicate; we read both forms and choose among duplicates (`choose_duplicate`),
recording every file we pass over in `Skipped`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec


class Skipped(msgspec.Struct, frozen=True):
    """A file (or one line of it) left out of the import, and why."""

    path: str  # relative to the folder's root; "file:line" for one line of a .jsonl
    reason: str


class Record(msgspec.Struct, frozen=True):
    """One JSON record of a folder: where it came from and its raw JSON."""

    path: str  # relative to the root
    line: int | None  # the line in a .jsonl file; None for a .json file
    raw: Any

    @property
    def where(self) -> str:
        return self.path if self.line is None else f"{self.path}:{self.line}"


# file names that mark a copy as superseded: deprecated_x.json, old-x.json, x_backup.json, x.bak.json
_SUPERSEDED = re.compile(r"(^|[_.-])(deprecated|obsolete|old|backup|bak|orig|copy)([_.-]|$)", re.IGNORECASE)


def superseded(path: str) -> bool:
    """Whether a file's name marks it as a superseded copy."""
    return bool(_SUPERSEDED.search(Path(path).name.removesuffix(".json")))


def records(root: Path, top: str, *, lines: bool, decode: Any) -> tuple[list[Record], list[Skipped]]:
    """Every record under `root/top`: the objects of `*.json` files and, with `lines`, the lines
    of `*.jsonl` files, in path order; unreadable ones become `Skipped`."""
    base = root / top
    out: list[Record] = []
    skipped: list[Skipped] = []
    patterns = ("*.json", "*.jsonl") if lines else ("*.json",)
    files = sorted({p for pat in patterns for p in base.rglob(pat) if p.is_file()})
    for f in files:
        rel = str(f.relative_to(root))
        try:
            text = f.read_text()
        except (OSError, UnicodeDecodeError) as e:
            skipped.append(Skipped(rel, f"not readable: {e}"))
            continue
        if f.suffix == ".json":
            try:
                out.append(Record(rel, None, decode(json.loads(text))))
            except json.JSONDecodeError as e:
                skipped.append(Skipped(rel, f"not valid JSON: {e}"))
            continue
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                out.append(Record(rel, i, decode(json.loads(line))))
            except json.JSONDecodeError as e:
                skipped.append(Skipped(f"{rel}:{i}", f"not valid JSON: {e}"))
    return out, skipped


def choose_duplicate(
    name: str, copies: Sequence[Record], preferred: Iterable[str] = ()
) -> tuple[Record, list[Skipped]]:
    """The copy to keep of several solution files named `name`, and why each other one is left
    out: a file the user named (`preferred`: paths relative to the root); else the first whose
    file name does not mark it superseded (`deprecated_...`, `..._old`, ...), in path order;
    identical copies are left out as such."""
    wanted = set(preferred)
    named = [c for c in copies if c.path in wanted]
    current = [c for c in copies if not superseded(c.path)]
    keep = (named or current or list(copies))[0]
    skipped = []
    for c in copies:
        if c is keep:
            continue
        if c.raw == keep.raw:
            reason = f"identical to {keep.path}"
        elif named:
            reason = f"a second solution named {name!r}; --solution-file chose {keep.path}"
        elif superseded(c.path) and not superseded(keep.path):
            reason = f"a second solution named {name!r}, its file name marks it superseded; kept {keep.path}"
        else:
            reason = (
                f"a second solution named {name!r}; kept {keep.path}, the first in path order "
                f"(choose with --solution-file {c.path})"
            )
        skipped.append(Skipped(c.path, reason))
    return keep, skipped


__all__ = ["Record", "Skipped", "choose_duplicate", "records", "superseded"]
