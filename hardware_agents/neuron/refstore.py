"""A disk store of the float64 references that are slow to compute, across processes.

Every `accelopt profile` is its own process, and a Ray worker's in-memory `DataCache` keeps
two problems: NKIBench's references cost seconds to minutes (six float64 evaluations of a
4096x12288x5120 matmul; bmm_softmax's 16 x 4096 x 4096 softmax), for every profile of the
problem again. The store keeps one entry per case (the problem's content hash, the case's
seed and init expressions, the numpy version and `STORE_VERSION` make its key, so a changed
definition or input generation never reads an old entry): each output's reference as .npy,
its norm, and, once computed, its float32 floor (`fp32.Fp32Floor`).

It keeps only what pays: a case whose references took longer to compute than reading them
back from a disk would (`READ_BYTES_S`, 200 MB/s: writing them, and reading them when the
page cache no longer holds them, is disk work); silu's 224 MiB (0.3 s) and bmm's 2 GiB
(~3 s) are recomputed, gqa_full's 64 MiB (~10 s) and matmul's 384 MiB (~11 s) kept. An
entry over a quarter of the budget is never kept; past `budget_bytes` (8 GiB by default,
`$ACCELOPT_NKI_REFERENCE_STORE_BYTES`; 0 turns the store off) the entries that save the
least computing time per byte go first (the least recently used among equals): the 14
NKIBench problems hold more than 8 GiB worth keeping, and cycling through them evicted
every entry before its next use when the oldest went first. (Keeping bmm's and
bmm_softmax's 12 GiB each, at 1 GB/s, crowded this 23 GiB machine's page cache.)

Trust: the store is the agent's (a 0700 directory under the user's cache dir; entries
written to a temporary directory and renamed into place, so a reader sees a whole entry or
none); no sandbox may read it (its uid and Landlock keep it out of every read
path), like the references' private directory of each problem.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from accelopt.problem import Problem
from hardware_agents.neuron.protocol import KernelArg
from hardware_agents.pipeline import compare, fp32, inputgen

STORE_VERSION = 1
ARGS_META = "args.json"  # the case's staged kernel arguments, kept with its references
ARG_FILE = "arg{}.kernel-input"  # (not `<output>.npy`: no output name can collide with it)
READ_BYTES_S = 200e6
DEFAULT_BUDGET = 8 << 30


def default_root(cache_dir: str | Path | None = None) -> Path:
    base = Path(cache_dir or os.environ.get("ACCELOPT_CACHE_DIR") or Path.home() / ".cache" / "accelopt")
    return base / "nki" / "references"


def case_key(problem: Problem, case: inputgen.InputCase) -> str:
    raw = json.dumps(
        [
            STORE_VERSION,
            np.__version__,
            problem.content_hash(),
            case.name,
            case.seed,
            sorted(case.inits.items()),
        ]
    )
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


class Entry:
    """One case's stored references: `files` (output name -> .npy path), `norms`, the floor."""

    def __init__(self, path: Path, manifest: dict[str, Any]) -> None:
        self.path = path
        self.files = {n: str(path / f) for n, f in manifest["files"].items()}
        self.norms: dict[str, tuple[float, float, bool]] = {  # norm, RMS, finite
            n: (float(v[0]), float(v[1]), bool(v[2])) for n, v in manifest["norms"].items()
        }

    def args(self, cdir: Path) -> list[KernelArg] | None:
        """The case's kernel arguments as staged when its references were kept (`put_args`),
        linked (or copied, across file systems) into `cdir`, world-readable as `write_args`
        leaves them; None where they are not kept whole. The inputs are a function of the
        entry's key (the seed, the init expressions, the problem, numpy's version), so these
        are the bytes a fresh draw would stage."""
        try:
            rec = json.loads((self.path / ARGS_META).read_text())
            specs = []
            for i, a in enumerate(rec["args"]):
                if "size" not in a:
                    specs.append(KernelArg(scalar=a["scalar"]))
                    continue
                src, dst = self.path / ARG_FILE.format(i), cdir / f"arg{i}.npy"
                if os.path.getsize(src) != a["size"]:
                    return None
                try:
                    os.link(src, dst)
                except OSError:
                    shutil.copyfile(src, dst)
                os.chmod(dst, 0o644)
                specs.append(KernelArg(path=str(dst)))
            return specs
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def floor(self) -> dict[str, fp32.Fp32Floor] | None:
        meta = self.path / "floor.json"
        if not meta.is_file():
            return None
        rel = json.loads(meta.read_text())
        return {
            n: fp32.Fp32Floor(rows=np.load(self.path / f"{n}.floor.npy", allow_pickle=False), rel_l2=r)
            for n, r in rel.items()
        }


class ReferenceStore:
    def __init__(self, root: Path, budget_bytes: int = DEFAULT_BUDGET) -> None:
        self.root = root
        self.budget = budget_bytes
        self._lock = threading.Lock()

    @classmethod
    def default(cls, cache_dir: str | Path | None = None) -> ReferenceStore | None:
        budget = int(os.environ.get("ACCELOPT_NKI_REFERENCE_STORE_BYTES", DEFAULT_BUDGET))
        return cls(default_root(cache_dir), budget) if budget > 0 else None

    def _dir(self) -> Path:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.root, 0o700)
        return self.root

    def get(self, key: str) -> Entry | None:
        path = self.root / key
        try:
            manifest = json.loads((path / "manifest.json").read_text())
            entry = Entry(path, manifest)
            for name, f in entry.files.items():
                if os.path.getsize(f) != manifest["sizes"][name]:
                    return None
            now = time.time_ns()  # recently used (the fine clock: a plain utime takes the coarse one)
            os.utime(path, ns=(now, now))
            return entry
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def worth_keeping(self, seconds: float, nbytes: int) -> bool:
        return self.budget > 0 and nbytes <= self.budget // 4 and seconds > nbytes / READ_BYTES_S

    def put(
        self, key: str, files: dict[str, str], stats: dict[str, compare.RefStats], seconds: float = 0.0
    ) -> Entry | None:
        """Store one case's references, `files` (output name -> its float64 .npy, linked where
        the store is on the same file system, else copied), whole or not at all (`seconds`: what
        computing them took); the entry, or None."""
        try:
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self._dir()))
            names, sizes = {}, {}
            for name, src in files.items():
                f = f"{name}.npy"
                try:
                    os.link(src, tmp / f)
                except OSError:
                    shutil.copyfile(src, tmp / f)
                names[name], sizes[name] = f, os.path.getsize(tmp / f)
            norms = {n: [st.norm, st.rms, st.finite] for n, st in stats.items()}
            manifest = {"files": names, "sizes": sizes, "norms": norms, "seconds": seconds}
            (tmp / "manifest.json").write_text(json.dumps(manifest))
            try:
                os.rename(tmp, self.root / key)
            except OSError:  # another process stored it first
                shutil.rmtree(tmp, ignore_errors=True)
            self._evict()
        except OSError:
            return None
        return self.get(key)

    def put_floor(self, entry: Entry, floor: dict[str, fp32.Fp32Floor]) -> None:
        try:
            for name, f in floor.items():
                tmp = entry.path / f".{name}.floor.tmp"
                with open(tmp, "wb") as out:  # (np.save would add .npy to the name)
                    np.save(out, np.asarray(f.rows), allow_pickle=False)
                os.replace(tmp, entry.path / f"{name}.floor.npy")
            meta = entry.path / ".floor.json.tmp"
            meta.write_text(json.dumps({n: f.rel_l2 for n, f in floor.items()}))
            os.replace(meta, entry.path / "floor.json")
        except OSError:
            pass

    def put_args(self, entry: Entry, args: list[KernelArg], seconds: float = 0.0) -> None:
        """Keep a case's staged kernel arguments with its references: a later profile of the
        problem stages them without drawing the inputs again (NKIBench's matmul draws 84 M
        normal numbers a case, adamw 90 M; `seconds`: what drawing and staging them took,
        which the entry now saves too). The manifest goes in last: a reader sees all of them
        or none."""
        try:
            rec = []
            for i, a in enumerate(args):
                if not a.path:
                    rec.append({"scalar": a.scalar})
                    continue
                tmp = entry.path / f".{ARG_FILE.format(i)}.tmp"
                shutil.copyfile(a.path, tmp)
                os.replace(tmp, entry.path / ARG_FILE.format(i))
                rec.append({"size": os.path.getsize(entry.path / ARG_FILE.format(i))})
            meta = entry.path / f".{ARGS_META}.tmp"
            meta.write_text(json.dumps({"args": rec, "seconds": seconds}))
            os.replace(meta, entry.path / ARGS_META)
            self._evict()
        except OSError:
            pass

    def _evict(self) -> None:
        """Entries out, those that save the least computing time per byte first (then the
        least recently used), until the store holds at most `budget` bytes."""
        with self._lock:
            entries = []
            for d in self.root.iterdir():
                if d.name.startswith("."):
                    continue
                try:
                    size = sum(f.stat().st_size for f in d.iterdir())
                    seconds = float(json.loads((d / "manifest.json").read_text()).get("seconds", 0.0))
                    if (d / ARGS_META).is_file():  # the arguments' drawing time is saved too
                        seconds += float(json.loads((d / ARGS_META).read_text()).get("seconds", 0.0))
                    entries.append((seconds / max(1, size), d.stat().st_mtime, size, d))
                except (OSError, ValueError):
                    continue
            total = sum(e[2] for e in entries)
            for _, _, size, d in sorted(entries, key=lambda e: (e[0], e[1])):
                if total <= self.budget:
                    break
                shutil.rmtree(d, ignore_errors=True)
                total -= size


__all__ = [
    "ARGS_META",
    "ARG_FILE",
    "DEFAULT_BUDGET",
    "STORE_VERSION",
    "Entry",
    "ReferenceStore",
    "case_key",
    "default_root",
]
