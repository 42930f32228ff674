"""The user's profile command, this checkout against another one: `accelopt profile
<problem> --json` of each problem's baseline, one process per profile, sandbox on, the two
checkouts interleaved (ABAB, BABA) on one machine, their medians and ratio per problem.

    git worktree add /tmp/base <commit>
    .venv/bin/python benchmarks/profile_ab_bench.py --other /tmp/base [--problems cpu_v2/silu,...] [--repeat 7]

The other checkout runs with this venv and `PYTHONPATH` set to it (its own packages, our
installed dependencies); both share the build cache, so after the first round a profile is
what a run pays for a candidate whose build is cached. Results: benchmarks/results/<out>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._common import median, save  # noqa: E402


def profile_once(checkout: Path, problem: str) -> tuple[float, str]:
    env = dict(os.environ, PYTHONPATH=str(checkout))
    t0 = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-c", "from cli.main import main; main()", "profile", problem, "--json"],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    wall = time.perf_counter() - t0
    try:
        status = str(json.loads(res.stdout).get("status"))
    except json.JSONDecodeError:
        status = f"no profile: {res.stderr.strip()[-200:]}"
    return wall, status


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--other", required=True, help="another checkout (e.g. a git worktree of an older commit)"
    )
    ap.add_argument("--problems", default="cpu_v2/silu,cpu_v2/bmm,cpu_v2/add_rmsnorm_matmul,cpu_v2/matmul")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--out", default="profile_ab_bench")
    args = ap.parse_args()
    sides = {"this": ROOT, "other": Path(args.other).resolve()}
    problems = [p for p in args.problems.split(",") if p]
    walls: dict[str, dict[str, list[float]]] = {s: {p: [] for p in problems} for s in sides}
    statuses: dict[str, dict[str, list[str]]] = {s: {p: [] for p in problems} for s in sides}
    load = [os.getloadavg()[0]]
    for r in range(args.repeat):
        for p in problems:
            for side in ("this", "other") if r % 2 == 0 else ("other", "this"):
                wall, status = profile_once(sides[side], p)
                walls[side][p].append(round(wall, 3))
                statuses[side][p].append(status)
                print(f"{side:5} {p:32} {wall:6.2f} s {status}", flush=True)
    load.append(os.getloadavg()[0])
    rows = {
        p: {
            "this_median_s": median(walls["this"][p]),
            "other_median_s": median(walls["other"][p]),
            "ratio": median(walls["this"][p]) / median(walls["other"][p]),
            "this_walls_s": walls["this"][p],
            "other_walls_s": walls["other"][p],
            "statuses": {s: sorted(set(statuses[s][p])) for s in sides},
        }
        for p in problems
    }
    other_commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=sides["other"], capture_output=True, text=True
    ).stdout.strip()
    for p, row in rows.items():
        print(
            f"{p:32} this {row['this_median_s']:.2f} s, other {row['other_median_s']:.2f} s: {row['ratio']:.2f}x"
        )
    save(
        args.out,
        {
            "benchmark": "profile_ab_bench",
            "path": "accelopt profile <problem> --json, one process per profile, sandbox on, interleaved",
            "other_commit": other_commit,
            "repeat": args.repeat,
            "loadavg": load,
            "problems": rows,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
