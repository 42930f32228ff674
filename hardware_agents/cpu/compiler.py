"""Compile C solutions into shared objects: in the sandbox, cached by content hash.

The compiler runs in the sandbox too (unprivileged, no network, Landlock): `#include
"/root/..."` or similar would otherwise copy readable files into the compile log, which goes
back to an LLM. Axis values are passed as -D defines. Successes and failures are cached
under `<cache>/cpu/build/<key>.{so,json}` where key = sha256(compiler, flags, defines,
sources), so a repeated kernel costs a file lookup.

Bounds: a shared library over `MAX_LIBRARY_BYTES` is a compile error (`.fill 240000000`
would otherwise be kept and copied into every profile's work dir); the compiler's files are
capped (RLIMIT_FSIZE and a 256 MiB tmpfs work dir). The cache evicts its least recently used
entries beyond `CACHE_BYTES` of libraries or `CACHE_ENTRIES` entries.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

import msgspec

from accelopt.problem import Solution
from hardware_agents.cpu.machine import DEFAULT_CC, compiler_version
from hardware_agents.sandbox import Sandbox, SandboxPolicy

CFLAGS: tuple[str, ...] = ("-std=gnu11", "-O3", "-march=native", "-fopenmp", "-shared", "-fPIC")
LDLIBS: tuple[str, ...] = ("-lm",)
_LOG_LIMIT = 16_000
MAX_LIBRARY_BYTES = 32 << 20  # a kernel's .so; the suites' are ~20 KiB
CACHE_BYTES = 1 << 30  # libraries kept in the build cache
CACHE_ENTRIES = 4096  # verdicts kept (failures have no library)
_EVICT_SPARE_S = 300.0  # entries used this recently are never evicted (a profile may be copying one)


class CompileRequest(msgspec.Struct, kw_only=True):
    cc: str
    args: list[str]
    timeout_s: float


class CompileOutput(msgspec.Struct, kw_only=True):
    ok: bool
    returncode: int
    log: str


class BuildResult(msgspec.Struct, kw_only=True):
    ok: bool
    key: str
    log: str = ""
    so_path: str | None = None
    cached: bool = False
    seconds: float = 0.0
    isolation: dict[str, str] = {}
    unisolated: bool = False  # the sandbox refused to run the compiler without isolation
    infrastructure: bool = False  # the sandbox failed, not the compiler: never cached


def compile_in_child(payload: bytes, workdir: Path) -> CompileOutput:
    """Sandbox target: run the compiler in the work dir."""
    req = msgspec.msgpack.decode(payload, type=CompileRequest)
    try:
        proc = subprocess.run(
            [req.cc, *req.args],
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=req.timeout_s,
            errors="replace",
        )
    except subprocess.TimeoutExpired:
        return CompileOutput(ok=False, returncode=-1, log=f"compiler timed out after {req.timeout_s:.0f} s")
    except OSError as e:
        return CompileOutput(ok=False, returncode=-1, log=f"cannot run {req.cc}: {e}")
    log = (proc.stdout + proc.stderr)[-_LOG_LIMIT:]
    return CompileOutput(
        ok=proc.returncode == 0 and (workdir / "kernel.so").is_file(), returncode=proc.returncode, log=log
    )


def _safe_relpath(p: str) -> str:
    parts = [x for x in p.split("/") if x not in ("", ".")]
    if not parts or p.startswith("/") or ".." in parts:
        raise ValueError(f"source path {p!r} must be relative and stay inside the solution")
    return "/".join(parts)


class Compiler:
    def __init__(
        self,
        cache_dir: Path,
        *,
        cc: str = DEFAULT_CC,
        flags: tuple[str, ...] = CFLAGS,
        timeout_s: float = 60.0,
    ) -> None:
        self.dir = cache_dir / "cpu" / "build"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.cc = shutil.which(cc) or cc
        self.flags = flags
        self.timeout_s = timeout_s
        self.version = compiler_version(cc)

    def key(self, solution: Solution, defines: dict[str, int]) -> str:
        h = hashlib.sha256()
        for part in (
            self.version,
            " ".join(self.flags + LDLIBS),
            ",".join(f"{k}={v}" for k, v in sorted(defines.items())),
        ):
            h.update(part.encode() + b"\0")
        for src in sorted(solution.sources, key=lambda s: s.path):
            h.update(src.path.encode() + b"\0" + src.content.encode() + b"\0")
        return h.hexdigest()[:32]

    def build(self, solution: Solution, defines: dict[str, int]) -> BuildResult:
        key = self.key(solution, defines)
        meta, so = self.dir / f"{key}.json", self.dir / f"{key}.so"
        t0 = time.perf_counter()
        with open(self.dir / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one build per key at a time, across processes
            cached = self._cached(meta, so)
            if cached is not None:
                cached.seconds = time.perf_counter() - t0
                return cached
            result = self._compile(solution, defines, key, so)
            if not (result.unisolated or result.infrastructure):  # the machine's fault: never cached
                tmp = meta.with_suffix(".json.tmp")
                tmp.write_bytes(msgspec.json.encode(result))
                os.replace(tmp, meta)
        result.seconds = time.perf_counter() - t0
        if not result.cached:
            self.evict()
        return result

    def evict(self, max_bytes: int = CACHE_BYTES, max_entries: int = CACHE_ENTRIES) -> int:
        """Remove the least recently used entries (verdict, library, lock) until the libraries
        take at most `max_bytes` and there are at most `max_entries` verdicts; returns how
        many went. An entry being built (its lock held) or used in the last few minutes stays."""
        entries = []
        for meta in self.dir.glob("*.json"):
            so = meta.with_suffix(".so")
            try:
                st = meta.stat()
                size = so.stat().st_size if so.exists() else 0
            except OSError:
                continue
            entries.append((st.st_mtime, meta, size))
        total = sum(e[2] for e in entries)
        if total <= max_bytes and len(entries) <= max_entries:
            return 0
        removed = 0
        now = time.time()
        for mtime, meta, size in sorted(entries, key=lambda e: e[0]):
            if total <= 0.9 * max_bytes and len(entries) - removed <= 0.9 * max_entries:
                break
            if now - mtime < _EVICT_SPARE_S:
                break
            with open(meta.with_suffix(".lock"), "w") as lock:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                meta.unlink(missing_ok=True)
                meta.with_suffix(".so").unlink(missing_ok=True)
            meta.with_suffix(".lock").unlink(missing_ok=True)
            total -= size
            removed += 1
        return removed

    def _cached(self, meta: Path, so: Path) -> BuildResult | None:
        try:
            result = msgspec.json.decode(meta.read_bytes(), type=BuildResult)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None
        if result.ok and not so.is_file():
            return None
        result.cached = True
        with contextlib.suppress(OSError):
            os.utime(meta)  # most recently used: the last to be evicted
        return result

    def _compile(self, solution: Solution, defines: dict[str, int], key: str, so: Path) -> BuildResult:
        policy = SandboxPolicy(
            wall_timeout_s=self.timeout_s + 10,
            max_processes=32,
            max_file_bytes=4 * MAX_LIBRARY_BYTES,
            address_space_bytes=4 << 30,
            workdir_bytes=256 << 20,
        )
        try:
            rels = [_safe_relpath(s.path) for s in solution.sources]
        except ValueError as e:
            return BuildResult(ok=False, key=key, log=str(e))
        with Sandbox(policy, prefix="accelopt-cc-") as box:
            for rel, src in zip(rels, solution.sources, strict=True):
                p = box.workdir / "src" / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(src.content)
            box.give("src")
            for rel in rels:
                box.give(f"src/{rel}")
            c_files = [f"src/{r}" for r in rels if r.endswith(".c")]
            if not c_files:
                return BuildResult(ok=False, key=key, log="no .c source among the solution's files")
            args = [
                *self.flags,
                *(f"-D{k}={v}" for k, v in defines.items()),
                "-Isrc",
                *c_files,
                "-o",
                "kernel.so",
                *LDLIBS,
            ]
            out = box.run(
                "hardware_agents.cpu.compiler:compile_in_child",
                CompileRequest(cc=self.cc, args=args, timeout_s=self.timeout_s),
            )
            iso = out.isolation
            if out.status == "unisolated":
                return BuildResult(ok=False, key=key, log=out.error, isolation=iso, unisolated=True)
            if out.status != "ok":
                return BuildResult(
                    ok=False,
                    key=key,
                    log=f"compiler sandbox {out.status}: {out.error}\n{out.log}",
                    isolation=iso,
                    infrastructure=out.status != "timeout",
                )
            res = out.decode(CompileOutput)
            log = res.log.replace(str(box.workdir) + "/src/", "").replace(str(box.workdir) + "/", "")
            if not res.ok:
                return BuildResult(
                    ok=False, key=key, log=log or f"compiler exited with {res.returncode}", isolation=iso
                )
            try:
                size = (box.workdir / "kernel.so").lstat().st_size
                if size > MAX_LIBRARY_BYTES:
                    return BuildResult(
                        ok=False,
                        key=key,
                        isolation=iso,
                        log=(
                            f"{log}\nthe shared library is {size / 2**20:.1f} MiB; the limit is "
                            f"{MAX_LIBRARY_BYTES >> 20} MiB (large tables belong in code that computes them)"
                        ).strip(),
                    )
                data = box.read_file("kernel.so", max_bytes=MAX_LIBRARY_BYTES)  # no symlinks, bounded
            except OSError as e:
                return BuildResult(ok=False, key=key, log=f"{log}\ncompiler output unusable: {e}")
            tmp = so.with_suffix(f".so.{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, so)
        return BuildResult(ok=True, key=key, log=log, so_path=str(so), isolation=iso)
