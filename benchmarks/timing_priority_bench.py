"""Does a CPU kernel's figure hold under load? The timing priority (`hardware_agents/quiet.py`)
put to the test, through the CLI a user runs.

The kernels: each `cpu` item of a campaign export (`--export DIR`, what `accelopt campaign
export` writes: `manifest.json` and the kernels' files), its exported best against the suite's
baseline. Their speedup is re-measured as newcomer_bench re-measures it (`accelopt profile
--json` of each side per round, on the round's fresh seeds, the order reversed every other
round, each side's median over `--rounds` rounds):

1. quiet: no load generated (the machine as it is: run it on an idle one), the agent's
   default priority: the reference figure;
2. under load: newcomer_bench's generator (a process holding `--hog-gb` GB and spinning, plus
   spinning processes until the 1-minute load average is >= `--load`), then per item, in
   turn, `--repeats` times: arm `priority` (the default: `timing_nice` -20, the kernel's
   threads and the thread timing them raised) and arm `plain` (`--option timing_nice=null`:
   the priority left alone, as before), the arms' order alternated.

Per arm: each loaded re-measure's speedup against the quiet one (within 15%: issue 49's
bound for a figure a user quotes), the largest deviation, and the rounds' spread of each
side. The machine's load is sampled every 15 s. Results:
benchmarks/results/timing_priority_bench.json.

Usage: python benchmarks/timing_priority_bench.py --export DIR [--items P@cpu,...]
       [--rounds 3] [--repeats 2] [--load 8] [--hog-gb 4] [--out NAME]
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import save
from newcomer_bench import WITHIN, Cli, Load, load_summary, remeasure

ARMS = {"priority": (), "plain": ("timing_nice=null",)}


def relative_spread(xs: list[float]) -> float | None:
    """(max - min) / median of a side's rounds."""
    xs = [x for x in xs if x]
    return (max(xs) - min(xs)) / statistics.median(xs) if len(xs) > 1 else None


def summary(arm_rows: list[dict[str, Any]]) -> dict[str, Any]:
    ratios = [r["ratio"] for r in arm_rows if r["ratio"] is not None]
    return {
        "remeasures": len(arm_rows),
        "within_15pct": sum(1 / WITHIN <= x <= WITHIN for x in ratios),
        "compared": len(ratios),
        "max_deviation": max((abs(x - 1) for x in ratios), default=None),
        "median_deviation": statistics.median([abs(x - 1) for x in ratios]) if ratios else None,
        "median_side_spread": statistics.median(
            [s for r in arm_rows for s in r["side_spreads"] if s is not None] or [float("nan")]
        ),
    }


def row(item: str, got: dict[str, Any], quiet: float | None, arm: str, repeat: int) -> dict[str, Any]:
    speedup = got.get("speedup")
    return {
        "item": item,
        "arm": arm,
        "repeat": repeat,
        "speedup": speedup,
        "quiet_speedup": quiet,
        "ratio": speedup / quiet if speedup and quiet else None,
        "baseline_ms": got.get("baseline_ms"),
        "best_ms": got.get("best_ms"),
        "statuses": got.get("statuses"),
        "side_spreads": [
            relative_spread(got.get("baseline_ms") or []),
            relative_spread(got.get("best_ms") or []),
        ],
        "wall_s": got.get("wall_s"),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--export", type=Path, required=True, help="a campaign export (manifest.json)")
    ap.add_argument("--items", help="comma-separated items (default: every cpu item the export improved)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--load", type=float, default=8.0)
    ap.add_argument("--hog-gb", type=float, default=4.0)
    ap.add_argument("--out", default="timing_priority_bench")
    args = ap.parse_args()
    manifest = json.loads((args.export / "manifest.json").read_text())
    improved = [k["item"] for k in manifest["kernels"] if k["item"].endswith("@cpu") and k.get("improved")]
    items = args.items.split(",") if args.items else improved
    if not items:
        print(f"{args.export}: no improved cpu item to re-measure", file=sys.stderr)
        return 2
    t0 = time.time()
    base = Path(tempfile.mkdtemp(prefix="priority-bench-"))
    cli = Cli(base, secrets.token_hex(3), base / "ray")
    sampler = Load(False, args.load, 0.0, 0)
    quiet = remeasure(cli, args.export, items, args.rounds)
    quiet_load = sampler.stop()
    rows = []
    for item in items:
        print(f"quiet {item}: {quiet[item].get('speedup')}", flush=True)
        rows.append(row(item, quiet[item], quiet[item].get("speedup"), "quiet", 0))
    load = Load(True, args.load, args.hog_gb, 2)
    waited = load.wait_for_target(300)
    try:
        for rep in range(args.repeats):
            for i, item in enumerate(items):
                arms = list(ARMS) if (rep + i) % 2 == 0 else list(reversed(ARMS))
                for arm in arms:
                    got = remeasure(cli, args.export, [item], args.rounds, ARMS[arm])[item]
                    r = row(item, got, quiet[item].get("speedup"), arm, rep)
                    print(f"{arm} {item} #{rep}: {r['speedup']} (x{r['ratio']} of quiet)", flush=True)
                    rows.append(r)
    finally:
        loaded = load.stop()
    figures = {
        "export": str(args.export),
        "items": items,
        "rounds": args.rounds,
        "repeats": args.repeats,
        "kernels": {k["item"]: k.get("kernel_id") for k in manifest["kernels"] if k["item"] in items},
        "quiet_load": load_summary(quiet_load["samples"]),
        "load_wait_s": waited,
        "load": load_summary(loaded["samples"]),
        "rows": rows,
        "arms": {arm: summary([r for r in rows if r["arm"] == arm]) for arm in ARMS},
        "bench_wall_s": round(time.time() - t0, 1),
    }
    save(args.out, figures)
    for arm, s in figures["arms"].items():
        print(
            f"{arm}: {s['within_15pct']}/{s['compared']} within 15% of quiet, max deviation {s['max_deviation']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
