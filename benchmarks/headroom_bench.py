"""Headroom of the cpu_v2 suite: baseline vs the best point of a search over its `// tune:` space vs numpy.

    .venv/bin/python benchmarks/headroom_bench.py [--points 8] [--climb 40] [--starts 3] [--problems silu ...]

For every problem of `cpu_v2` (or `--problems`), through the real CPU agent:

1. the baseline (the values the file ships with);
2. a search over the declared space (suites/cpu_v2/README.md): `--points` distinct random
   points, then first-improvement hill-climbs from the `--starts` best ones (the neighbouring
   legal values of every knob, in random order; a climb moves to the first >= 3% faster one),
   `--climb` more profiles in all (a quicker timing budget than the agent's default while
   searching);
3. a re-measure of the baseline and the `--top` fastest points found, interleaved over
   `--rounds` rounds (median of rounds), so the winner is not a lucky sample;
4. numpy's time for the definition's numpy reference (float32 inputs, hot cache, its default
   BLAS threads), as in benchmarks/profiler_bench.py.

% of peak: the agent's roofline for the kernels (cold data rotated through >= 2x L3, bandwidth at
that working set), the hot-cache roofline for numpy (which runs on hot data). "beats numpy"
compares times. Prints a table and saves benchmarks/results/headroom_bench.json (after every
problem, with `complete: false` until the last one).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import accelopt  # noqa: F401  (environment defaults)
import suites
from accelopt.problem import Problem, Solution
from benchmarks._common import save
from benchmarks.profiler_bench import numpy_time
from hardware_agents.cpu import CpuAgent
from hardware_agents.pipeline.device_spec import t_peak
from replay.summary import geomean
from suites.tuning import Knob, default_point, parse_space, sample_points, set_values, space_size

SUITE = "cpu_v2"
Point = dict[str, int]
# the GEMM family's i-k-j loop: re-measured beside the baseline (the textbook i-j-k), so the
# headroom that is not the loop order alone is visible (`best_vs_ikj`)
IKJ = {"LOOP_ORDER": 2}


def _key(point: Point) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(point.items()))


def _solution(problem: Problem, source: str, point: Point) -> Solution:
    src = problem.baseline.sources[0]
    return msgspec.structs.replace(
        problem.baseline, sources=[msgspec.structs.replace(src, content=set_values(source, point))]
    )


class Search:
    """Profiles points of one problem's space, each at most once (measured latency or None)."""

    def __init__(self, agent: CpuAgent, problem: Problem) -> None:
        self.agent, self.problem = agent, problem
        self.source = problem.baseline.sources[0].content
        self.knobs: list[Knob] = parse_space(self.source)
        self.ms: dict[tuple[tuple[str, int], ...], float | None] = {}
        self.failures: list[str] = []

    def measure(self, point: Point) -> float | None:
        key = _key(point)
        if key not in self.ms:
            prof = self.agent.profile(self.problem, _solution(self.problem, self.source, point))
            ok = prof.status == "passed" and prof.latency is not None
            self.ms[key] = prof.latency.median_ms if ok and prof.latency else None
            if not ok:
                self.failures.append(f"{point}: {prof.status}: {prof.log.strip().splitlines()[:1]}")
        return self.ms[key]

    def best(self, n: int = 1) -> list[Point]:
        done = sorted((ms, k) for k, ms in self.ms.items() if ms is not None)
        return [dict(k) for _, k in done[:n]]

    def neighbours(self, point: Point) -> list[Point]:
        out = []
        for k in self.knobs:
            i = k.values.index(point[k.name])
            for j in (i - 1, i + 1):
                if 0 <= j < len(k.values):
                    out.append({**point, k.name: k.values[j]})
        return out

    def run(self, points: int, climb: int, seed: int, starts: int = 1) -> None:
        """The baseline, `points` random points, then first-improvement hill-climbs from the
        `starts` best ones (`climb` profiles shared between them): neighbours in random order,
        move to the first that is >= 3% faster, until the climb's share is spent or no
        neighbour improves. Several starts keep one basin (e.g. a loop order whose other knobs
        happened to be good) from hiding a faster one."""
        rng = random.Random(seed)
        self.measure(default_point(self.knobs))
        for p in sample_points(self.knobs, points, seed=seed):
            self.measure(p)
        origins = self.best(starts)
        for i, origin in enumerate(origins):
            self.climb(origin, climb // len(origins) + (1 if i < climb % len(origins) else 0), rng)

    def climb(self, current: Point, budget: int, rng: random.Random) -> None:
        spent = 0
        while spent < budget:
            current_ms = self.ms[_key(current)]
            todo = [p for p in self.neighbours(current) if _key(p) not in self.ms]
            rng.shuffle(todo)
            improved = False
            for p in todo[: budget - spent]:
                ms = self.measure(p)
                spent += 1
                if ms is not None and current_ms is not None and ms < 0.97 * current_ms:
                    current, improved = p, True
                    break
            if not improved:
                return  # a local optimum (or the budget is spent)


def remeasure(
    agent: CpuAgent,
    problem: Problem,
    source: str,
    points: list[Point],
    rounds: int,
) -> list[tuple[float, float]]:
    """(median latency ms, median % of peak) of each point over `rounds` interleaved rounds."""
    lat: list[list[float]] = [[] for _ in points]
    pct: list[list[float]] = [[] for _ in points]
    for _ in range(rounds):
        for i, point in enumerate(points):
            prof = agent.profile(problem, _solution(problem, source, point))
            if prof.status == "passed" and prof.latency is not None and prof.peak_fraction is not None:
                lat[i].append(prof.latency.median_ms)
                pct[i].append(prof.peak_fraction)
    return [
        (statistics.median(x), statistics.median(y)) if x else (float("inf"), 0.0)
        for x, y in zip(lat, pct, strict=True)
    ]


def summarize(
    rows: dict[str, dict[str, Any]],
    args: argparse.Namespace,
    spec: Any,
    load_start: list[float],
    wall_s: float,
    *,
    complete: bool,
    table: bool,
    parts: list[str] | None = None,
    skipped: dict[str, list[str]] | None = None,
) -> None:
    """Save the figures so far (after every problem, so a cut-off run keeps them); print the table."""
    speedup = geomean([r["speedup"] for r in rows.values()], strict=True) or 0.0
    vs_ikj = geomean([r["best_vs_ikj"] for r in rows.values() if r.get("best_vs_ikj")])
    beats = sorted(n for n, r in rows.items() if r["best_vs_numpy"] > 1.0)
    if table:
        print(
            f"\n{'problem':24s} {'baseline':>16s} {'best':>16s} {'speedup':>8s} {'numpy':>16s} {'best/numpy':>10s}"
        )
        for n, r in rows.items():
            print(
                f"{n:24s} {r['baseline_ms']:8.3f} {100 * r['baseline_pct_peak']:6.2f}% {r['best_ms']:8.3f} "
                f"{100 * r['best_pct_peak']:6.2f}% {r['speedup']:7.2f}x {r['numpy_ms']:8.3f} "
                f"{100 * r['numpy_pct_peak']:6.2f}% {r['best_vs_numpy']:9.2f}x"
            )
        print(
            f"\ngeomean speedup best/baseline: {speedup:.2f}x (target >= 3x); best beats numpy on {len(beats)} of "
            f"{len(rows)} (target >= 7): {', '.join(beats)}"
        )
        if vs_ikj:
            print(
                f"GEMM family, best over the i-k-j loop order alone: geomean {vs_ikj:.2f}x "
                f"over {sum(1 for r in rows.values() if r.get('best_vs_ikj'))} problems"
            )
    save(
        args.name,
        {
            "suite": SUITE,
            "complete": complete,
            "device": spec
            if isinstance(spec, dict)
            else {
                "name": spec.name,
                "peak_bw_gb_s": spec.peak_bw_bytes_s / 1e9,
                "peak_matmul_gflop_s": spec.peak_matmul_flops / 1e9,
                "peak_vector_gflop_s": spec.peak_vector_flops / 1e9,
            },
            **({"merged_from": parts} if parts else {}),
            "search": {
                "random_points": args.points,
                "climb_profiles": args.climb,
                "starts": args.starts,
                "top": args.top,
                "rounds": args.rounds,
                "seed": args.seed,
            },
            "geomean_speedup": speedup,
            "gemm_geomean_best_vs_ikj": vs_ikj,
            "beats_numpy": beats,
            "beats_numpy_count": len(beats),
            "suite_baseline_pct_peak_geomean": geomean(
                [r["baseline_pct_peak"] for r in rows.values()], strict=True
            ),
            "suite_best_pct_peak_geomean": geomean([r["best_pct_peak"] for r in rows.values()], strict=True),
            "problems": rows,
            "skipped": skipped or {},
            "wall_s": wall_s,
            "notes": (
                "kernels: the agent's timing (cold data rotated over >= 2x L3, roofline bandwidth at that working "
                "set), baseline and finalists re-measured interleaved, median of rounds; numpy: its reference on "
                "float32 inputs, hot cache, default threads. A shared 2-core machine: see loadavg."
            ),
            "loadavg_start": load_start,
            "loadavg_end": list(os.getloadavg()),
        },
    )


def merge(args: argparse.Namespace) -> int:
    parts = [json.loads(p.read_text()) for p in args.merge]
    rows: dict[str, dict[str, Any]] = {}
    for p in parts:
        if p.get("suite") != SUITE or p.get("search") != parts[0].get("search"):
            raise SystemExit(f"cannot merge: every part must be a {SUITE} run with the same search settings")
        dup = set(rows) & set(p["problems"])
        if dup:
            raise SystemExit(f"cannot merge: problems {sorted(dup)} appear in more than one part")
        rows.update(p["problems"])
    for k, v in parts[0]["search"].items():
        setattr(args, {"random_points": "points", "climb_profiles": "climb"}.get(k, k), v)
    loads = [p["loadavg_start"] for p in parts]
    summarize(
        rows,
        args,
        parts[0]["device"],
        max(loads),
        sum(p["wall_s"] for p in parts),
        complete=set(rows) == set(suites.problem_names(SUITE)),
        table=True,
        parts=[str(p) for p in args.merge],
        skipped={n: f for p in parts for n, f in p.get("skipped", {}).items() if n not in rows},
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", nargs="*", default=None, help=f"problem names of {SUITE} (default: all)")
    ap.add_argument("--points", type=int, default=8, help="random points per problem")
    ap.add_argument(
        "--climb", type=int, default=40, help="profiles of the hill-climbs, shared between the starts"
    )
    ap.add_argument("--starts", type=int, default=3, help="hill-climbs, from the best random points")
    ap.add_argument("--top", type=int, default=2, help="fastest points re-measured against the baseline")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved re-measure rounds")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick-calibration", action="store_true")
    ap.add_argument("--cache-dir", type=Path, default=None)
    ap.add_argument("--name", default="headroom_bench", help="results file name under benchmarks/results/")
    ap.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        default=None,
        metavar="JSON",
        help="measure nothing: combine the problems of result files of runs over disjoint problem "
        "sets (e.g. two processes sharing the machine) into one table and file",
    )
    args = ap.parse_args(argv)
    if args.merge:
        return merge(args)

    names = args.problems or suites.problem_names(SUITE)
    unknown = sorted(set(names) - set(suites.problem_names(SUITE)))
    if unknown:
        ap.error(f"unknown problems {unknown}; {SUITE} has {suites.problem_names(SUITE)}")
    load_start = list(os.getloadavg())
    agent = CpuAgent(cache_dir=args.cache_dir, quick_calibration=args.quick_calibration)
    spec = agent.spec
    searcher = CpuAgent(
        cache_dir=args.cache_dir, calibrate_if_missing=False, timing_budget_s=0.08, max_reruns=1
    )
    rows: dict[str, dict[str, Any]] = {}
    skipped: dict[str, list[str]] = {}
    t_start = time.perf_counter()

    def summarize_now(*, final: bool) -> None:
        """After every problem the figures so far; at the end (`final`) the table too."""
        wall_s = time.perf_counter() - t_start
        complete = final and not skipped
        summarize(rows, args, spec, load_start, wall_s, complete=complete, table=final, skipped=skipped)

    try:
        for name in names:
            p = suites.get_problem(f"{SUITE}/{name}")
            t0 = time.perf_counter()
            search = Search(searcher, p)
            search.run(args.points, args.climb, args.seed, args.starts)
            base = default_point(search.knobs)
            if search.ms.get(_key(base)) is None:  # e.g. a timeout on an overloaded machine: skip, say so
                print(f"{name}: the baseline failed, problem skipped: {search.failures}", file=sys.stderr)
                skipped[name] = search.failures
                continue
            finalists = [q for q in search.best(args.top + 1) if _key(q) != _key(base)][: args.top]
            ikj = {**base, **IKJ} if all(k in base for k in IKJ) else None
            extra = [ikj] if ikj is not None else []
            res = remeasure(agent, p, search.source, [base, *extra, *finalists], args.rounds)
            (base_ms, base_pct), *fin = res
            ikj_res = fin.pop(0) if ikj is not None else None
            ikj_ms = ikj_res[0] if ikj_res else None
            best_i = min(range(len(fin)), key=lambda i: fin[i][0]) if fin else None
            best_ms, best_pct = fin[best_i] if best_i is not None else (base_ms, base_pct)
            best_point = finalists[best_i] if best_i is not None else base
            if (
                ikj is not None and ikj_res and ikj_res[0] < best_ms
            ):  # the i-k-j point is a measured point too
                (best_ms, best_pct), best_point = ikj_res, ikj
            if best_ms > base_ms:  # nothing beat the baseline on re-measure
                best_ms, best_pct, best_point = base_ms, base_pct, base
            np_s = numpy_time(p)
            tp_hot, bound = t_peak(p, spec)
            rows[name] = {
                "bound": str(bound),
                "space_size": space_size(search.knobs),
                "profiled": len(search.ms),
                "failed": len(search.failures),
                "failures": search.failures[:5],
                "baseline_ms": base_ms,
                "baseline_pct_peak": base_pct,
                "best_ms": best_ms,
                "best_pct_peak": best_pct,
                "best_point": {k: v for k, v in best_point.items() if v != base[k]},
                "speedup": base_ms / best_ms,
                "ikj_ms": ikj_ms,
                "best_vs_ikj": ikj_ms / best_ms if ikj_ms else None,
                "numpy_ms": np_s * 1e3,
                "numpy_pct_peak": tp_hot / np_s,
                "best_vs_numpy": np_s * 1e3 / best_ms,
                "search_s": time.perf_counter() - t0,
            }
            r = rows[name]
            print(
                f"{name:24s} {r['bound']:7s} base {base_ms:9.3f} ms {100 * base_pct:6.2f}% | best {best_ms:9.3f} ms "
                f"{100 * best_pct:6.2f}% x{r['speedup']:6.2f} | numpy {np_s * 1e3:9.3f} ms "
                f"{100 * r['numpy_pct_peak']:6.2f}% | best/numpy x{r['best_vs_numpy']:5.2f} | "
                f"{r['profiled']} profiled, {r['search_s']:.0f} s",
                flush=True,
            )
            summarize_now(final=False)
    finally:
        searcher.close()
        agent.close()

    summarize_now(final=True)
    return 1 if skipped else 0


if __name__ == "__main__":
    sys.exit(main())
