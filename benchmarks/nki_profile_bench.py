"""NKIBench through the user's path: `accelopt profile <suite>/<problem>` of each baseline, at
NKIBench's real sizes, on a host without the Neuron SDK (the emulate mode: the NKI emulator
and the trn1 cost model), the sandbox on.

    .venv/bin/python benchmarks/nki_profile_bench.py --nkibench DIR [--problems a,b] [--repeat 1]
    .venv/bin/python benchmarks/nki_profile_bench.py            # the NKIBench-style test kernels

The NKIBench folder is imported with `accelopt suite import-nkibench` into a temporary suite
(nothing of it is kept or saved), then every problem is profiled by its own `accelopt
profile --json` process, one after another, as a user runs them. Per problem: status, the
wall time of the whole command (our clock around the process), the CPU time of its process
tree (user + system, from the kernel's accounting of the process and its waited-for
children: what the profile costs whatever else the machine runs), the profile's phase
timings (the `phase_<name>_s` counters, measured by the agent on its own clock, kept by
name), the ESTIMATED latency and % of peak, and the load average before and after.
`--repeat 2` runs the 14 again: run 1 starts with an empty reference store (the profiles'
`--cache-dir`, a temporary one), run 2 finds what run 1 kept there
(hardware_agents/neuron/refstore.py). Summary: median and max wall time, and the estimates
against the trn1 latencies the paper published for the same 14 baselines (`PAPER_TRN1_MS`, a
held-out check: the cost model is fitted to nothing): Spearman rank correlation and how many
lie within 2x. Results: benchmarks/results/<out>.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._common import median, save  # noqa: E402
from hardware_agents.pipeline.phases import phases_of  # noqa: E402

# The trn1 latencies (ms, median of the paper's timing loop) of NKIBench's 14 baseline kernels as
# published with the paper: github.com/zhang677/AccelOpt, experiments/full_complete_local/
# profile_results.csv (commit 2dbeab4), column `latency`. Used only to check the cost model
# afterwards; nothing is fitted to them.
PAPER_TRN1_MS: dict[str, float] = {
    "adamw": 1.999829,
    "add_rmsnorm_matmul": 1.221911,
    "bmm": 4.610889,
    "bmm_softmax": 11.999614,
    "gqa_full": 19.110503,
    "lora": 30.16637,
    "mamba": 2.888663,
    "matmul": 35.199742,
    "matmul_add_rmsnorm": 2.66658,
    "rmsnorm_matmul": 1.05576,
    "rope_single_freq_apply": 4.33301,
    "silu": 1.333232,
    "swiglu": 4.221777,
    "transpose_matmul": 9.610311,
}

CLI = [
    sys.executable,
    "-c",
    "import sys; from cli.main import main; sys.argv = ['accelopt', *sys.argv[1:]]; sys.exit(main())",
]


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _cpu_pressure() -> float | None:
    """/proc/pressure/cpu `some avg10`: the share of the last 10 s in which a runnable task waited."""
    try:
        line = Path("/proc/pressure/cpu").read_text().splitlines()[0]
        return float(line.split()[1].split("=")[1])
    except (OSError, IndexError, ValueError):
        return None


def run_cli(args: list[str], env: dict[str, str], timeout: float) -> tuple[int, str, float, float]:
    """(exit code, stdout, wall s, CPU s of the process tree) of one CLI command."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [*CLI, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    out_chunks: list[bytes] = []
    assert proc.stdout is not None
    deadline = t0 + timeout
    while True:
        chunk = proc.stdout.read(1 << 16)
        if not chunk:
            break
        out_chunks.append(chunk)
        if time.perf_counter() > deadline:
            proc.kill()
            break
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime  # the process and the children it waited for (the sandboxes)
    return proc.returncode, b"".join(out_chunks).decode(errors="replace"), wall, cpu


def spearman(xs: list[float], ys: list[float]) -> float:
    def ranks(v: list[float]) -> list[float]:
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        for pos, i in enumerate(order):
            r[i] = float(pos)
        return r

    rx, ry = ranks(xs), ranks(ys)
    n = len(xs)
    mx, my = sum(rx) / n, sum(ry) / n
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    sx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    sy = math.sqrt(sum((b - my) ** 2 for b in ry))
    return cov / (sx * sy) if sx and sy else float("nan")


def profile_one(
    suite: Path, name: str, env: dict[str, str], timeout: float, cache: Path, run: int
) -> dict[str, Any]:
    before, pressure = _loadavg(), _cpu_pressure()
    rc, out, wall, cpu = run_cli(
        ["profile", f"{suite}/{name}", "--json", "--cache-dir", str(cache)], env, timeout
    )
    row: dict[str, Any] = {
        "problem": name,
        "run": run,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "load_before": before,
        "load_after": _loadavg(),
        "cpu_pressure_avg10_before": pressure,
    }
    try:
        prof = json.loads(out)
    except json.JSONDecodeError:
        row.update(status="no profile", exit_code=rc, log=out[-2000:])
        return row
    est = prof.get("estimate") or {}
    row.update(
        status=prof["status"],
        cases=[
            {"case": c["case"], "passed": c["passed"], "rel_l2": c.get("rel_l2")} for c in prof["correctness"]
        ],
        phases_s={k: round(v, 2) for k, v in phases_of(prof.get("counters", {})).items()},
        estimated_ms=est.get("latency_ms"),
        estimated_pct_peak=est.get("pct_peak"),  # Profile.estimate.peak_fraction, as encoded
        t_peak_ms=est.get("t_peak_ms"),
        bound=est.get("bound"),
        model=est.get("model"),
    )
    if prof["status"] != "unmeasured" or not all(c["passed"] for c in prof["correctness"]):
        row["log"] = prof.get("log", "")[:2000]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nkibench", help="an NKIBench folder (default: the NKIBench-style test fixtures)")
    ap.add_argument("--problems", default="", help="comma-separated subset")
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="runs over the problems (run 2 on: the reference store run 1 filled)",
    )
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--out", default="nki_profile_bench")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="nki-profile-bench-"))
    if a.nkibench:
        src = Path(a.nkibench)
    else:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from nki_emulator_bench import fixture_folder

        src = fixture_folder(tmp / "src")
    suite = tmp / "suite"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    rc, out, _, _ = run_cli(
        ["suite", "import-nkibench", str(src), "--out", str(suite), "--name", "nkibench"], env, 600
    )
    if rc != 0:
        raise SystemExit(f"import-nkibench failed:\n{out}")
    names = sorted(p.name for p in suite.iterdir() if (p / "definition.json").is_file())
    if a.problems:
        names = [n for n in a.problems.split(",") if n]
    rows = []
    cache = tmp / "cache"  # the profiles' cache dir (the reference store): empty for run 1
    for run in range(1, a.repeat + 1):
        for n in names:
            row = profile_one(suite, n, env, a.timeout, cache, run)
            rows.append(row)
            print(
                f"{n:24s} {row['status']:12s} wall {row['wall_s']:7.1f}s cpu {row['cpu_s']:7.1f}s "
                f"est {row.get('estimated_ms') or 0:8.3f} ms "
                f"load {row['load_before'][0]:.1f}->{row['load_after'][0]:.1f} "
                f"{row.get('phases_s', {})}",
                flush=True,
            )
    per_run = {
        f"run{k}": {
            "median_wall_s": round(median([r["wall_s"] for r in rows if r["run"] == k]), 2),
            "max_wall_s": round(max(r["wall_s"] for r in rows if r["run"] == k), 2),
            "median_cpu_s": round(median([r["cpu_s"] for r in rows if r["run"] == k]), 2),
        }
        for k in range(1, a.repeat + 1)
    }
    walls = [r["wall_s"] for r in rows]
    summary: dict[str, Any] = {
        "runs": "run 1: an empty reference store (every reference computed); run k > 1: the store run 1 filled",
        "per_run": per_run,
        "kernels": f"NKIBench folder ({len(names)} baselines)"
        if a.nkibench
        else "tests/hardware_agents/neuron/nkibench_kernels.py",
        "path": "accelopt profile <suite>/<problem> --json, one process per profile, sandbox on, emulate mode",
        "problems": rows,
        "all_correct": all(
            r["status"] == "unmeasured" and all(c["passed"] for c in r["cases"]) for r in rows
        ),
        "median_wall_s": round(median(walls), 2),
        "max_wall_s": round(max(walls), 2),
        "median_cpu_s": round(median([r["cpu_s"] for r in rows]), 2),
        "max_cpu_s": round(max(r["cpu_s"] for r in rows), 2),
    }
    paired = [
        (r["estimated_ms"], PAPER_TRN1_MS[r["problem"]])
        for r in rows
        if r["run"] == 1 and r.get("estimated_ms") and r["problem"] in PAPER_TRN1_MS
    ]
    if len(paired) >= 3:
        summary["vs_paper_trn1"] = {
            "pairs": len(paired),
            "spearman": round(spearman([e for e, _ in paired], [m for _, m in paired]), 3),
            "within_2x": sum(1 for e, m in paired if 0.5 <= e / m <= 2.0),
            "ratios": {
                r["problem"]: round(r["estimated_ms"] / PAPER_TRN1_MS[r["problem"]], 3)
                for r in rows
                if r["run"] == 1 and r.get("estimated_ms") and r["problem"] in PAPER_TRN1_MS
            },
        }
    save(a.out, summary)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
