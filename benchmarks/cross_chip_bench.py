"""Does an insight learnt on one chip help a planner on another? Memory across chips, measured.

Through the real CLI (`accelopt campaign run`: embedded NATS, local Ray, LanceDB, the bundled
embedding model, the offline `builtin/tuner` unless --model), in a scratch root (or --root):

1. a CPU campaign: `cpu_v2` problems (default silu and matmul: the operators `nki_tune` has,
   activation and gemm) on `cpu`, one run each, into a fresh memory;
2. an NKI campaign twice, each on its own copy of that memory: `nki_tune` problems (default
   silu and matmul) on the emulated `trn1`, `--nki-runs` runs, once with
   `memory.cross_device_share=0` (off: the planner sees its own chip's insights only) and once
   with `--share` (on: that share of the planner's slots for the CPU's insights of the same
   operator, marked as another chip's). Everything else is the same (seed, settings, problems),
   and the emulator's cost model is deterministic, so what differs between the arms comes from
   what the planners were shown.

Figures per arm, from the NKI runs' logs: what the planners saw (`MemoryRetrieved`): insights
of the own chip and of the other chip, the operators of the other chip's (the problems they
were learnt on), how many name a constant the NKI kernel has (applicable by the tuner, which
moves named constants), how many a plan followed (`replay.memory_use`: a plan names the
insight's constant) and the characters they added to the prompts; and what came of it: per
item, the estimated latency of its baseline and of its best kernel over the arm's runs (the
trn1 cost model's ESTIMATE, not a measurement), their ratio, the kernels profiled, and
whether both arms profiled the very same kernels (content ids).

Writes benchmarks/results/cross_chip_bench.json (`--out NAME` for another name).

Usage: python benchmarks/cross_chip_bench.py [--cpu-problems silu,matmul] [--nki-problems silu,matmul]
       [--share 0.25] [--nki-runs 4] [--iterations 2] [--seed 0] [--model builtin/tuner] [--root DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import save

import accelopt  # noqa: F401  (offline defaults)
from accelopt import catalog as ev

ACCELOPT = [sys.executable, "-m", "cli.main"]


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k != "ACCELOPT_MEMORY"}
    e["ACCELOPT_LOG_LEVEL"] = "ERROR"
    return e


def campaign(
    root: Path,
    name: str,
    problems: list[str],
    memory: Path,
    runs: int,
    args: argparse.Namespace,
    sets: list[str],
) -> dict[str, Any]:
    """One `accelopt campaign run` to its end; its id, wall time and exit code."""
    devices = sorted({p.rpartition("@")[2] for p in problems})
    spec = {
        "name": name,
        "seed": args.seed,
        "model": args.model,
        "problems": problems,
        "devices": {
            d: {"profilers": 1, "preset": "quick", "set": [f"search.iterations={args.iterations}"]}
            for d in devices
        },
        "stop": {"max_runs": runs},
        "memory": str(memory),
        "set": sets,
    }
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{name}.campaign.yaml"
    path.write_text(json.dumps(spec))
    cid = f"{name}-s{args.seed}"
    t0 = time.time()
    with open(root / f"{name}.log", "w") as log:
        rc = subprocess.run(
            [*ACCELOPT, "campaign", "run", str(path), "--id", cid, "--root", str(root)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env(),
        ).returncode
    wall = round(time.time() - t0, 1)
    print(f"  {name}: exit {rc}, {wall:.0f} s", flush=True)
    return {"campaign_id": cid, "wall_s": wall, "rc": rc, "root": str(root)}


def runs_of(root: Path, cid: str) -> list[tuple[str, str]]:
    """(run id, item key) of each finished run of a campaign, in order."""
    from events.logfile import read_events

    events = read_events(root / "campaigns" / cid / "log.aolog")
    return [(e.run, e.item) for e in events if isinstance(e, ev.CampaignRunFinished)]


def cpu_figures(root: Path, cid: str) -> dict[str, Any]:
    """What the CPU campaign taught the memory, and each run's re-measured speedup."""
    from events.logfile import read_events

    out: dict[str, Any] = {}
    for run, item in runs_of(root, cid):
        events = read_events(root / run / "log.aolog")
        entries = [e.entry for e in events if isinstance(e, ev.MemoryEntryAdded)]
        remeasured = [e for e in events if isinstance(e, ev.ProblemRemeasured)]
        out[item] = {
            "run": run,
            "insights_learnt": len(entries),
            "insights_positive": sum(1 for x in entries if x.speedup > 1.0),
            "insight_titles": sorted({x.title for x in entries if x.speedup > 1.0}),
            "remeasured_speedup": round(remeasured[-1].speedup, 3)
            if remeasured and remeasured[-1].speedup
            else None,
        }
    return out


def nki_figures(root: Path, cid: str, op_types: dict[str, str]) -> dict[str, Any]:
    """Per NKI item: what its planners saw (own chip, other chip) and what came of it."""
    from events.logfile import read_events
    from hardware_agents.languages.tunables import find_tunables
    from replay.memory_use import insight_constants, memory_use

    items: dict[str, dict[str, Any]] = {}
    for run, item in runs_of(root, cid):
        events = read_events(root / run / "log.aolog")
        started = next(e for e in events if isinstance(e, ev.RunStarted))
        (target,) = started.targets
        problem = target.problem
        tunables = {
            t.name for t in find_tunables(problem.baseline.entry_file().content, problem.axis_values())
        }
        it = items.setdefault(
            item,
            {
                "runs": [],
                "tunables": sorted(tunables),
                "seen_own": set(),
                "seen_other": set(),
                "other_problems": set(),
                "other_operators": set(),
                "other_applicable": set(),
                "other_used": set(),
                "other_chars": 0,
                "retrievals": 0,
                "retrievals_with_other": 0,
                "kernels": set(),
                "baseline_est_ms": None,
                "best_est_ms": None,
            },
        )
        it["runs"].append(run)
        purpose = {e.kernel_id: e.purpose for e in events if isinstance(e, ev.ProfileRequested)}
        for e in events:
            if isinstance(e, ev.MemoryRetrieved):
                it["retrievals"] += 1
                other = [x for x in e.entries if x.language != problem.baseline.spec.language]
                it["retrievals_with_other"] += bool(other)
                for x in e.entries:
                    if x.entry_id not in {o.entry_id for o in other}:
                        it["seen_own"].add(x.entry_id)
                        continue
                    it["other_chars"] += len(x.title) + len(x.text) + len(x.diff)
                    it["seen_other"].add(x.entry_id)
                    it["other_problems"].add(f"{x.problem}@{x.device}")
                    it["other_operators"].add(op_types.get(x.problem, "?"))
                    if insight_constants(x.title, x.text) & tunables:
                        it["other_applicable"].add(x.entry_id)
            elif isinstance(e, ev.KernelProfiled):
                est = e.profile.estimated_ms
                if purpose.get(e.kernel_id) == "baseline" and len(it["runs"]) == 1:
                    it["baseline_est_ms"] = est
                if est is not None and purpose.get(e.kernel_id) != "remeasure":
                    it["kernels"].add(e.kernel_id)
                    it["best_est_ms"] = est if it["best_est_ms"] is None else min(it["best_est_ms"], est)
        for use in memory_use(events).values():
            it["other_used"] |= use.used & it["seen_other"]
    out: dict[str, Any] = {}
    for item, it in items.items():
        base, best = it["baseline_est_ms"], it["best_est_ms"]
        out[item] = {
            "runs": it["runs"],
            "tunables": it["tunables"],
            "retrievals": it["retrievals"],
            "retrievals_with_other_chip": it["retrievals_with_other"],
            "insights_seen_own_chip": len(it["seen_own"]),
            "insights_seen_other_chip": len(it["seen_other"]),
            "other_chip_learnt_on": sorted(it["other_problems"]),
            "other_chip_operators": sorted(it["other_operators"]),
            "other_chip_naming_a_constant_of_this_kernel": len(it["other_applicable"]),
            "other_chip_followed_by_a_plan": len(it["other_used"]),
            "other_chip_prompt_chars": it["other_chars"],
            "kernels_profiled": len(it["kernels"]),
            "kernel_ids": sorted(it["kernels"]),
            "baseline_est_ms": base,
            "best_est_ms": best,
            "est_speedup": round(base / best, 3) if base and best else None,
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu-problems", default="silu,matmul")
    ap.add_argument("--nki-problems", default="silu,matmul")
    ap.add_argument("--share", type=float, default=0.25, help="memory.cross_device_share of the 'on' arm")
    ap.add_argument("--nki-runs", type=int, default=4)
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default="builtin/tuner")
    ap.add_argument("--root", default=None)
    ap.add_argument("--out", default="cross_chip_bench")
    args = ap.parse_args()

    import suites

    base = Path(args.root or tempfile.mkdtemp(prefix="cross-chip-"))
    cpu_items = [f"cpu_v2/{p}@cpu" for p in args.cpu_problems.split(",")]
    nki_items = [f"nki_tune/{p}@trn1" for p in args.nki_problems.split(",")]
    op_types = {
        p.name: p.definition.op_type
        for ref in cpu_items + nki_items
        for p in [suites.get_problem(ref.rpartition("@")[0])]
    }
    load_before = os.getloadavg()
    print(
        f"cross_chip_bench in {base}: CPU {', '.join(cpu_items)}; then NKI {', '.join(nki_items)}", flush=True
    )
    cpu_memory = base / "memory-cpu"
    cpu = campaign(base / "cpu", "cpu", cpu_items, cpu_memory, len(cpu_items), args, [])
    arms: dict[str, Any] = {}
    for arm, share in (("off", 0.0), ("on", args.share)):
        memory = base / f"memory-{arm}"
        shutil.copytree(cpu_memory, memory)
        run = campaign(
            base / f"nki-{arm}",
            f"nki-{arm}",
            nki_items,
            memory,
            args.nki_runs,
            args,
            [f"memory.cross_device_share={share}"],
        )
        arms[arm] = {
            "cross_device_share": share,
            **run,
            "items": nki_figures(Path(run["root"]), run["campaign_id"], op_types),
        }
    same = {
        item: arms["off"]["items"][item]["kernel_ids"] == arms["on"]["items"].get(item, {}).get("kernel_ids")
        for item in arms["off"]["items"]
    }
    for a in arms.values():
        for it in a["items"].values():
            it.pop("kernel_ids")
    figures = {
        "model": args.model,
        "seed": args.seed,
        "iterations": args.iterations,
        "nki_runs": args.nki_runs,
        "op_types": op_types,
        "cpu": {**cpu, "items": cpu_figures(base / "cpu", cpu["campaign_id"])},
        "nki": arms,
        "same_kernels_profiled_with_and_without": same,
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }
    save(args.out, figures)
    for arm, a in arms.items():
        for item, it in a["items"].items():
            print(
                f"{arm:>3} {item:<22} saw {it['insights_seen_own_chip']} own, "
                f"{it['insights_seen_other_chip']} other-chip ({', '.join(it['other_chip_operators']) or '-'}; "
                f"naming a constant here {it['other_chip_naming_a_constant_of_this_kernel']}, "
                f"followed {it['other_chip_followed_by_a_plan']}); "
                f"est. {it['est_speedup']}x, {it['kernels_profiled']} kernels"
            )
    print(f"same kernels profiled with and without: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
