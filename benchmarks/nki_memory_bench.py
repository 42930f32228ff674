"""Peak memory of an emulated NKI profile, the way a user runs it: `accelopt profile
<suite>/<problem> --json` of each baseline, one process each, sandbox on, an empty reference
store (cold: every reference computed, the most a profile holds), against what the agent
declares for it (hardware_agents/neuron/memory.py: what Ray and the campaign scheduler reserve).

    .venv/bin/python benchmarks/nki_memory_bench.py --nkibench DIR [--problems a,b] [--out NAME]

The process tree is measured, not the biggest process: each command runs in a memory cgroup
of its own (cgroup v1 `memory`, or v2 where that is the mount), which every child joins at
fork, the sandboxed execute children included; it is sampled every 50 ms. Per problem:
- `peak_bytes`: the most anonymous memory plus shared memory (tmpfs: the children's work dirs)
  the tree held at once (`memory.stat` rss + shmem, v2: anon + shmem): what the host cannot
  take back without swap; this is the figure held against the declaration and the target;
- `peak_tree_rss_bytes`: the most the tree's processes' VmRSS summed to (shared pages counted
  once per process that maps them, file pages it maps included);
- `max_usage_bytes`: the cgroup's own high-water mark, page cache included (the reference
  files written on the way: reclaimable, so an upper bound).
Without a cgroup (no permission) only the sampled VmRSS of the process tree is reported.
Results: benchmarks/results/<out>.json, with the target (`TARGET_BYTES`) and whether every
problem met it and its declaration.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._common import save  # noqa: E402

TARGET_BYTES = 6 << 30  # an emulated NKI profile of any NKIBench problem: at most 6 GiB
CLI = [
    sys.executable,
    "-c",
    "import sys; from cli.main import main; sys.argv = ['accelopt', *sys.argv[1:]]; sys.exit(main())",
]
V1 = Path("/sys/fs/cgroup/memory")
V2 = Path("/sys/fs/cgroup")


class Cgroup:
    """A memory cgroup for one command (v1 or v2), removed afterwards."""

    def __init__(self, name: str) -> None:
        self.v1 = (V1 / "memory.stat").is_file()
        base = V1 if self.v1 else V2
        self.path = base / name
        self.path.mkdir()

    def join(self) -> None:
        """Run in the child before exec: it and everything it forks are in the cgroup."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def stat(self) -> dict[str, int]:
        out = {}
        for line in (self.path / "memory.stat").read_text().splitlines():
            k, _, v = line.partition(" ")
            out[k] = int(v)
        return out

    def held(self) -> int:
        s = self.stat()
        return s.get("rss", s.get("anon", 0)) + s.get("shmem", 0)

    def pids(self) -> list[int]:
        return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]

    def max_usage(self) -> int | None:
        f = self.path / ("memory.max_usage_in_bytes" if self.v1 else "memory.peak")
        try:
            return int(f.read_text())
        except (OSError, ValueError):
            return None

    def remove(self) -> None:
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.1)


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def measure(args: list[str], env: dict[str, str], timeout: float) -> dict[str, Any]:
    """Run one CLI command in a cgroup of its own, sampling what its process tree holds."""
    try:
        cg: Cgroup | None = Cgroup(f"accelopt-nki-memory-{os.getpid()}-{time.monotonic_ns()}")
    except OSError:
        cg = None
    peak = {"held": 0, "tree_rss": 0}
    done = threading.Event()
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [*CLI, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        preexec_fn=cg.join if cg else None,
    )

    def sample() -> None:
        while not done.is_set():
            try:
                if cg is not None:
                    peak["held"] = max(peak["held"], cg.held())
                    pids = cg.pids()
                else:
                    pids = _descendants(proc.pid)
                peak["tree_rss"] = max(peak["tree_rss"], sum(_rss(p) for p in pids))
            except OSError:
                pass
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    wall = time.perf_counter() - t0
    done.set()
    sampler.join()
    row: dict[str, Any] = {
        "exit_code": proc.returncode,
        "wall_s": round(wall, 1),
        "peak_tree_rss_bytes": peak["tree_rss"],
        "stdout": out.decode(errors="replace"),
    }
    if cg is not None:
        row["peak_bytes"] = peak["held"]
        row["max_usage_bytes"] = cg.max_usage()
        cg.remove()
    else:
        row["peak_bytes"] = peak["tree_rss"]
    return row


def declared(suite: Path, name: str) -> int | None:
    """What the agent declares for a profile of this problem (None: not an NKI problem)."""
    import suites
    from hardware_agents.neuron import Trn1Agent

    agent = Trn1Agent(mode="emulate")
    try:
        for p in suites.load_suite(str(suite)):
            if p.name == name:
                return agent.memory_bytes(p)
        return None
    finally:
        agent.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nkibench", required=True, help="an NKIBench folder")
    ap.add_argument("--problems", default="", help="comma-separated subset")
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--out", default="nki_memory_bench")
    ap.add_argument(
        "--redeclare",
        action="store_true",
        help="only recompute `declared_bytes` of the saved rows with this checkout's declaration",
    )
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="nki-memory-bench-"))  # the suite, the reference stores
    try:
        if a.redeclare:
            _redeclare(a.nkibench, a.out, tmp)
        else:
            _run(a, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run(a: argparse.Namespace, tmp: Path) -> None:
    import json

    suite = tmp / "suite"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    imp = subprocess.run(
        [*CLI, "suite", "import-nkibench", a.nkibench, "--out", str(suite), "--name", "nkibench"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if imp.returncode != 0:
        raise SystemExit(f"import-nkibench failed:\n{imp.stderr}")
    names = sorted(p.name for p in suite.iterdir() if (p / "definition.json").is_file())
    if a.problems:
        names = [n for n in a.problems.split(",") if n]
    rows = []
    for name in names:
        cache = tmp / f"cache-{name}"  # an empty reference store: every reference computed
        load = [round(x, 2) for x in os.getloadavg()]
        r = measure(["profile", f"{suite}/{name}", "--json", "--cache-dir", str(cache)], env, a.timeout)
        try:
            prof = json.loads(r.pop("stdout"))
            status = prof.get("status", "no profile")
            passed = all(c["passed"] for c in prof.get("correctness", [])) and bool(prof.get("correctness"))
        except json.JSONDecodeError:
            status, passed = "no profile", False
        decl = declared(suite, name)
        row = {
            "problem": name,
            "status": status,
            "all_cases_passed": passed,
            **r,
            "declared_bytes": decl,
            "declared_over_peak": round(decl / r["peak_bytes"], 2) if decl and r["peak_bytes"] else None,
            "load_before": load,
        }
        rows.append(row)
        gib = r["peak_bytes"] / (1 << 30)
        print(
            f"{name}: {status} peak {gib:.2f} GiB (tree RSS {r['peak_tree_rss_bytes'] / (1 << 30):.2f}, "
            f"declared {(decl or 0) / (1 << 30):.2f}) {r['wall_s']} s",
            flush=True,
        )
        _save(a.out, rows)  # after each problem: a run cut short keeps what it measured


def _redeclare(nkibench: str, out: str, tmp: Path) -> None:
    import json

    rows = json.loads((ROOT / "benchmarks" / "results" / f"{out}.json").read_text())["rows"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [*CLI, "suite", "import-nkibench", nkibench, "--out", str(tmp / "suite"), "--name", "nkibench"]
    subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, check=True)
    for r in rows:
        r["declared_bytes"] = decl = declared(tmp / "suite", r["problem"])
        r["declared_over_peak"] = round(decl / r["peak_bytes"], 2) if decl and r["peak_bytes"] else None
    _save(out, rows)


def _save(out: str, rows: list[dict[str, Any]]) -> None:
    save(
        out,
        {
            "command": "accelopt profile nkibench/<problem> --json --cache-dir <empty>",
            "target_bytes": TARGET_BYTES,
            "rows": rows,
            "max_peak_bytes": max(r["peak_bytes"] for r in rows),
            "all_within_target": all(r["peak_bytes"] <= TARGET_BYTES for r in rows),
            "all_within_declared": all(
                r["declared_bytes"] and r["peak_bytes"] <= r["declared_bytes"] for r in rows
            ),
        },
    )


if __name__ == "__main__":
    main()
