"""Speedups on a loaded host, through the user's command: `accelopt profile <problem> --json`
of a suite baseline and of a tuned variant of it (one process per profile, sandbox on),
interleaved (ABAB, BABA) on fresh seeds, in four conditions: the host quiet or loaded
(spinners in sessions of their own, as another user's work is, and a memory hog), each with
the timed intervals at real-time priority (the default) and without (`ACCELOPT_REALTIME_TIMING=0`).

Per condition and problem: each side's median latency, the speedup (ratio of the medians),
and each round's own speedup; the headline is how far each condition's speedup lies from
the quiet real-time one, and how far two halves of the same condition's rounds lie apart
(what a user who measures twice sees).

    python benchmarks/load_bench.py [--rounds 4] [--spinners 6] [--hog-gb 3] [--out load_bench]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._common import median, save  # noqa: E402
from benchmarks.newcomer_bench import HOG, SPIN  # noqa: E402

ACCELOPT = [str(ROOT / ".venv" / "bin" / "accelopt")]
# problem -> the tuned values of its baseline's `// tune:` constants (legal values of each)
VARIANTS = {
    "cpu_v2/silu": {"VEC": "16", "EXP_IMPL": "2"},
    "cpu_v2/rope_single_freq_apply": {"VEC": "8", "UNROLL": "2"},
}


def variant_source(problem: str, tuned: dict[str, str]) -> str:
    src = (ROOT / "suites" / problem / "baseline.c").read_text()
    for name, value in tuned.items():
        src, n = re.subn(rf"^#define {name} \S+$", f"#define {name} {value}", src, flags=re.M)
        assert n == 1, (problem, name)
    return src


def profile(problem: str, solution: Path | None, seeds: list[int], realtime: bool) -> dict[str, Any]:
    env = dict(os.environ)
    if not realtime:
        env["ACCELOPT_REALTIME_TIMING"] = "0"
    args = [*ACCELOPT, "profile", problem, "--json", "--seeds", ",".join(map(str, seeds))]
    if solution is not None:
        args += ["--solution", str(solution)]
    t = time.monotonic()
    r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    wall = time.monotonic() - t
    try:
        p = json.loads(r.stdout)
    except json.JSONDecodeError:
        return {
            "status": f"exit {r.returncode}",
            "latency_ms": None,
            "wall_s": wall,
            "stderr": r.stderr[-300:],
        }
    lat = p.get("latency") or {}
    return {
        "status": p.get("status"),
        "latency_ms": lat.get("median_ms"),
        "timing": (p.get("isolation") or {}).get("timing"),
        "wall_s": round(wall, 1),
    }


class Load:
    """Spinners, each in a session of its own (another user's work), and a hog holding memory."""

    def __init__(self, spinners: int, hog_gb: float) -> None:
        self.procs = [
            subprocess.Popen([sys.executable, "-S", "-c", SPIN], start_new_session=True)
            for _ in range(spinners)
        ]
        if hog_gb > 0:
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, "-S", "-c", HOG, str(int(hog_gb * 2**30))], start_new_session=True
                )
            )
        self.loads: list[float] = []

    def sample(self) -> None:
        self.loads.append(os.getloadavg()[0])

    def stop(self) -> None:
        for p in self.procs:
            p.kill()
            p.wait()


def condition(problems: dict[str, Path], rounds: int, realtime: bool, seed0: int, load: Load | None) -> dict:
    out: dict[str, Any] = {}
    for problem, variant in problems.items():
        sides: dict[str, list[dict[str, Any]]] = {"baseline": [], "variant": []}
        for r in range(rounds):
            seeds = [seed0 + 1000 * r + k for k in (0, 21, 42)]
            order = ["baseline", "variant"] if r % 2 == 0 else ["variant", "baseline"]
            for side in order:
                sides[side].append(profile(problem, None if side == "baseline" else variant, seeds, realtime))
                if load is not None:
                    load.sample()
        ms = {k: [p["latency_ms"] for p in v if p["latency_ms"]] for k, v in sides.items()}
        per_round = [b / v for b, v in zip(ms["baseline"], ms["variant"], strict=False)]
        half = rounds // 2
        halves = [
            median(ms["baseline"][:half]) / median(ms["variant"][:half]),
            median(ms["baseline"][half:]) / median(ms["variant"][half:]),
        ]
        out[problem] = {
            "baseline_ms": ms["baseline"],
            "variant_ms": ms["variant"],
            "statuses": sorted({p["status"] for v in sides.values() for p in v}),
            "timing": sorted({str(p.get("timing")) for v in sides.values() for p in v}),
            "speedup": median(ms["baseline"]) / median(ms["variant"]),
            "round_speedups": per_round,
            "halves_speedups": halves,
            "halves_apart": max(halves) / min(halves) - 1,
            "profile_wall_s_median": median([p["wall_s"] for v in sides.values() for p in v]),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--spinners", type=int, default=6)
    ap.add_argument("--hog-gb", type=float, default=3.0)
    ap.add_argument("--out", default="load_bench")
    args = ap.parse_args()
    t0 = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="load-bench-"))
    problems = {}
    for problem, tuned in VARIANTS.items():
        path = work / (problem.replace("/", "_") + ".c")
        path.write_text(variant_source(problem, tuned))
        problems[problem] = path
    for problem, path in problems.items():  # compile both sides once: every timed profile then hits the cache
        profile(problem, None, [1], True)
        profile(problem, path, [1], True)
    results: dict[str, Any] = {}
    for loaded in (False, True):
        load = Load(args.spinners, args.hog_gb) if loaded else None
        if load is not None:
            time.sleep(20)  # the load average catches up
        try:
            for realtime in (True, False):
                name = f"{'loaded' if loaded else 'quiet'}_{'realtime' if realtime else 'ordinary'}"
                before = os.getloadavg()[0]
                results[name] = condition(
                    problems, args.rounds, realtime, 5_000_000 + len(results) * 100_000, load
                )
                results[name]["load1_at_start"] = before
                if load is not None:
                    results[name]["load1_samples"] = load.loads[:]
                    load.loads.clear()
                print(
                    name, {p: round(v["speedup"], 2) for p, v in results[name].items() if isinstance(v, dict)}
                )
        finally:
            if load is not None:
                load.stop()
    reference = results["quiet_realtime"]
    deviation = {
        name: {p: results[name][p]["speedup"] / reference[p]["speedup"] - 1 for p in VARIANTS}
        for name in results
    }
    save(
        args.out,
        {
            "rounds": args.rounds,
            "spinners": args.spinners,
            "hog_gb": args.hog_gb,
            "variants": VARIANTS,
            "conditions": results,
            "speedup_vs_quiet_realtime": deviation,
            "halves_apart": {
                name: {p: results[name][p]["halves_apart"] for p in VARIANTS} for name in results
            },
            "bench_wall_s": round(time.monotonic() - t0, 1),
        },
    )


if __name__ == "__main__":
    main()
