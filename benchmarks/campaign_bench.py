"""Does a campaign spend a machine's time better than a round-robin of plain runs?

Two arms, side by side on this machine, each for `--minutes` of wall time, over the same
problems (default: every problem of `cpu_v2` on `cpu` and of `nki_tune` on the emulated
`trn1`), the offline `builtin/tuner` model, the `quick` search preset, each in a fresh root
with a fresh memory:

- campaign: `accelopt campaign run` (policy `expected_gain_v4_same_language`, the one for a
  model whose insights do not carry across kernel languages, as the offline tuner's) with
  `stop.max_hours` = the arm's time, killed with
  SIGKILL (the CLI and every Ray process it started) at 1/3 and 2/3 of the time and
  resumed each time with `accelopt campaign resume` (the time lost to the crashes counts
  against it);
- round robin: a warm pool (`accelopt up --devices cpu,trn1`: the agents start once, as the
  campaign's do) and, per device kind, plain `accelopt run --problems P` one after the other
  over the device's problems in turn, each with `--timeout` = the time left.

Then, per problem, its suite baseline and every kernel that was either arm's best at some
point are re-measured together in interleaved rounds on fresh seeds
(`actors.runtime.kernel_remeasure.measure_interleaved`, as the demo's closing table and `accelopt
remeasure` do) on the CPU; a trn1 problem's kernels are profiled again in the emulator and
compared by the cost model's ESTIMATED latency. Each arm's anytime curve is the geomean over
the problems of the re-measured speedup of each problem's best kernel so far (1 for a
problem no run improved), after each run that improved one: over all problems ("all": cpu
measured and trn1 estimated together), over the cpu problems (measured) and over the trn1
problems (estimated). Figures per arm: each curve's final value; and the fraction of the
time the campaign needed to reach the round robin's final value (target <= 0.7 on "all");
for the campaign, the crash checks: no scheduled run lost or done twice, no run started
twice, no kernel profiled twice in a run, `replay --verify` of the campaign and its runs
passes; and each item's figure the campaign's surfaces show (its measurement at its last
run's end, `CampaignItemMeasured`) against this re-measure of the same kernel (`own_vs_remeasured`).
The campaign arm's timeline is when its scheduler took each new best (where the item's
measurement found the run's best faster than its start). The machine's 1-minute load
average is sampled every 30 s (`load_avg_1min`): on a shared machine the figures are noisier.

The full benchmark is `--minutes 20 --seeds 0,1` (about 90 minutes with the re-measures) on a
quiet machine; `--minutes 3 --seeds 0` proves the machinery. Results:
benchmarks/results/campaign_bench.json (`--out NAME` for another file name).

Usage: python benchmarks/campaign_bench.py [--minutes 20] [--seeds 0,1] [--problems SUITE/P@DEV,...]
       [--rounds 3] [--kills 2] [--root DIR] [--out campaign_bench]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import re
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import save

import accelopt  # noqa: F401  (offline defaults)
from accelopt import catalog as ev
from accelopt.procfs import pids_of_session, sigkill

ACCELOPT = [sys.executable, "-m", "cli.main"]
SUITES = (("cpu_v2", "cpu"), ("nki_tune", "trn1"))
TARGET_TIME_FRACTION = 0.7
SETTINGS = ["profiling.timeout_s=300"]  # both arms' runs (the pool's agents must match them)
SCHEDULER_POLICY = "expected_gain_v4_same_language"  # the campaign arm's (see campaign_arm)


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k != "ACCELOPT_MEMORY"}
    e["ACCELOPT_LOG_LEVEL"] = "ERROR"
    return e


def kill_session(sid: int) -> None:
    """SIGKILL every process of a session: the CLI and every Ray process it started."""
    sigkill(pids_of_session(sid))


OOM_KILL = re.compile(r"Killing (\d+) worker\(s\), kill details: Memory on the node")


def ray_oom_kills(since: float, until: float) -> int:
    """Workers Ray's memory monitor killed in the sessions started in [since, until] (each
    `raylet.out` line "Killing N worker(s) ... Memory on the node"): an arm's runs lose their
    profilers to it when the machine runs short of memory, which the figures must show."""
    total = 0
    from actors.runtime.deployment import ray_temp_dir

    for session in ray_temp_dir().glob("session_2*"):
        try:  # session_YYYY-MM-DD_HH-MM-SS_...: when Ray started it, local time
            started = time.mktime(time.strptime(session.name[8:27], "%Y-%m-%d_%H-%M-%S"))
            text = (session / "logs" / "raylet.out").read_text(errors="replace")
        except (OSError, ValueError):
            continue
        if since <= started <= until:
            total += sum(int(m.group(1)) for m in OOM_KILL.finditer(text))
    return total


def all_problems() -> list[tuple[str, str, str]]:
    import suites

    return [(s, p, d) for s, d in SUITES for p in suites.problem_names(s)]


# --- the campaign arm -------------------------------------------------------------------------


def campaign_arm(
    root: Path, problems: list[tuple[str, str, str]], minutes: float, seed: int, kills: int
) -> dict:
    spec = {
        "name": "bench",
        "seed": seed,
        "problems": [f"{s}/{p}@{d}" for s, p, d in problems],
        "devices": {d: {"profilers": 1, "preset": "quick"} for d in sorted({d for *_, d in problems})},
        "stop": {"max_hours": minutes / 60.0},
        # the offline tuner's insights are C- or NKI-specific: an insight of a cpu item re-opens
        # no trn1 item for nothing (the v2 policy re-opened the plateaued trn1 items after every
        # C insight of their operator: 1.00x runs whose emulation took the cores the cpu runs used)
        "scheduler": {"policy": SCHEDULER_POLICY},
        "set": SETTINGS,
    }
    root.mkdir(parents=True, exist_ok=True)
    path = root.parent / f"{root.name}.campaign.yaml"
    path.write_text(json.dumps(spec))
    cid = f"bench-s{seed}"
    t0 = time.time()
    log = open(root.parent / f"{root.name}.log", "w")  # noqa: SIM115 (kept open across the resumes)
    cmd = [*ACCELOPT, "campaign", "run", str(path), "--id", cid, "--root", str(root)]
    killed_at = []
    for k in range(kills + 1):
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env(), start_new_session=True)
        if k < kills:
            kill_at = t0 + minutes * 60 * (k + 1) / (kills + 1)
            while time.time() < kill_at and proc.poll() is None:
                time.sleep(0.5)
            if proc.poll() is None:
                kill_session(proc.pid)
                proc.wait(30)
                killed_at.append(round(time.time() - t0, 1))
                print(f"  campaign killed -9 at {killed_at[-1]:.0f} s; resuming", flush=True)
        else:
            proc.wait()
        cmd = [*ACCELOPT, "campaign", "resume", cid, "--root", str(root)]
    wall = time.time() - t0
    log.close()
    return {"campaign_id": cid, "wall_s": round(wall, 1), "killed_at_s": killed_at, "t0": t0}


def campaign_results(root: Path, cid: str, t0: float) -> dict:
    from events.logfile import read_events
    from replay.campaign import CampaignView, figure_label

    events = read_events(root / "campaigns" / cid / "log.aolog")
    view = CampaignView.from_events(events)
    scheduled = [e for e in events if isinstance(e, ev.CampaignRunScheduled)]
    finished = [e for e in events if isinstance(e, ev.CampaignRunFinished)]
    checks = crash_checks(root, scheduled, finished)
    verify = subprocess.run(
        [*ACCELOPT, "replay", cid, "--verify", "--root", str(root)], capture_output=True, text=True, env=env()
    )
    checks["replay_verify_rc"] = verify.returncode
    checks["replay_verify"] = verify.stdout.strip().splitlines()[-2:]
    checks["resumes"] = len(view.resumed)
    # (seconds since the arm's start, item, its new best kernel), as the scheduler takes one: the
    # core takes a run's best where the item's measurement at the run's end (CampaignItemMeasured)
    # finds it faster than the kernel the run started from
    timeline = []
    replayed = CampaignView()
    for e in events:
        replayed.apply(e)
        if isinstance(e, ev.CampaignRunFinished):
            it = replayed.items.get(e.item)
            if it is not None and it.best_run == e.run and e.best_source:
                timeline.append((round(e.ts - t0, 1), e.item, e.best_source))
    own = {
        key: {"speedup": it.speedup, "pct_peak": it.pct_peak, "figures": figure_label(it, view.item_figures)}
        for key, it in view.items.items()
    }
    return {
        "runs": len(scheduled),
        "stopped": view.stopped.reason if view.stopped else None,
        "checks": checks,
        "timeline": timeline,
        "item_measurements": sum(isinstance(e, ev.CampaignItemMeasured) for e in events),
        "own_figures": own,  # what its surfaces show: each item's last measurement
        "recorded_final": _geomean([it.speedup for it in view.items.values()]),
    }


def crash_checks(root: Path, scheduled: list, finished: list) -> dict:
    from events.logfile import read_events

    runs = [s.run for s in scheduled]
    done = [f.run for f in finished]
    twice, lost, profiled_twice, started_twice = [], [], [], []
    for r in runs:
        if done.count(r) > 1:
            twice.append(r)
        if done.count(r) == 0:
            lost.append(r)
        path = root / r / "log.aolog"
        if not path.is_file():
            continue
        events = read_events(path)
        if sum(isinstance(e, ev.RunStarted) for e in events) != 1:
            started_twice.append(r)
        # a kernel is its content: the search profiles it once (a re-measure names it again)
        asked = {
            e.event_id for e in events if isinstance(e, ev.ProfileRequested) and e.purpose != "remeasure"
        }
        ids = [e.kernel_id for e in events if isinstance(e, ev.KernelProfiled) and e.request_id in asked]
        if len(ids) != len(set(ids)):
            profiled_twice.append(r)
    indices = [s.index for s in scheduled]
    return {
        "scheduled": len(runs),
        "indices_unique_and_dense": indices == list(range(1, len(indices) + 1)),
        "finished_twice": twice,
        "lost": lost,
        "started_twice": started_twice,
        "kernel_profiled_twice": profiled_twice,
        "ok": not (twice or lost or started_twice or profiled_twice)
        and indices == list(range(1, len(indices) + 1)),
    }


# --- the round-robin arm ----------------------------------------------------------------------


def round_robin_arm(root: Path, problems: list[tuple[str, str, str]], minutes: float, seed: int) -> dict:
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    deadline = t0 + minutes * 60
    devices = sorted({d for *_, d in problems})
    sets = [a for s in SETTINGS for a in ("--set", s)]
    pool = subprocess.Popen(
        [*ACCELOPT, "up", "--devices", ",".join(devices), "--root", str(root), *sets],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env(),
        start_new_session=True,
    )
    try:
        while not (root / ".pool.json").exists() and time.time() < deadline:
            time.sleep(0.5)
        runs: list[dict] = []
        lock = threading.Lock()

        def queue(device: str) -> None:
            mine = [(s, p) for s, p, d in problems if d == device]
            for i, (suite, problem) in enumerate(itertools.cycle(mine)):
                left = deadline - time.time()
                if left < 5:
                    return
                r = subprocess.run(
                    [
                        *ACCELOPT,
                        "run",
                        "--suite",
                        suite,
                        "--problems",
                        problem,
                        "--device",
                        device,
                        "--root",
                        str(root),
                        "--seed",
                        str(seed * 1000 + i),
                        "--timeout",
                        f"{left:.0f}",
                        *sets,
                    ],
                    capture_output=True,
                    text=True,
                    env=env(),
                )
                with lock:
                    runs.append({"device": device, "suite": suite, "problem": problem, "rc": r.returncode})

        threads = [threading.Thread(target=queue, args=(d,)) for d in devices]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        subprocess.run([*ACCELOPT, "down", "--root", str(root)], capture_output=True, env=env())
        with contextlib.suppress(Exception):
            pool.wait(60)
        if pool.poll() is None:
            kill_session(pool.pid)
    return {"wall_s": round(time.time() - t0, 1), "t0": t0, "runs_started": runs}


def round_robin_results(root: Path, problems: list[tuple[str, str, str]], t0: float) -> dict:
    from events.logfile import read_events
    from replay.campaign import run_outcome
    from replay.fold import RunView

    by_name = {(p, d): f"{s}/{p}@{d}" for s, p, d in problems}
    ends = []
    for log in sorted(root.glob("*/log.aolog")):
        view = RunView.from_events(read_events(log))
        if view.started is None or not view.started.targets:
            continue
        t = view.started.targets[0]
        key = by_name.get((t.problem.name, t.device))
        out = run_outcome(view, key or "")
        if key is not None and out.get("gain") is not None:
            ends.append((view.last_ts or 0.0, key, out["gain"], out["best_source"]))
    best: dict[str, float] = {}
    timeline = []  # each run that beat the problem's best so far (by its recorded gain over the baseline)
    for ts, key, gain, src in sorted(ends):
        if gain > best.get(key, 1.0):
            best[key] = gain
            timeline.append((round(ts - t0, 1), key, src))
    return {
        "runs": len(ends),
        "timeline": timeline,
        "recorded_final": _geomean([best.get(k, 1.0) for k in by_name.values()]),
    }


# --- the re-measure ---------------------------------------------------------------------------


def remeasure(problems: list[tuple[str, str, str]], sources: dict[str, list[str]], rounds: int) -> dict:
    """Per problem: its baseline and every kernel that was either arm's best at some point,
    interleaved in the same rounds (CPU), or estimated by the cost model (trn1). Returns, per
    problem, the speedup over the baseline of each kernel (by its index in `sources[key]`)."""
    import suites
    from accelopt.config import RunConfig
    from actors.roles.profiler import kernel_solution, offset_seeds
    from actors.runtime.kernel_remeasure import measure_interleaved
    from hardware_agents.families import get_agent, profile_timeout_s

    out: dict[str, Any] = {}
    agents: dict[str, Any] = {}
    try:
        for suite, name, device in problems:
            key = f"{suite}/{name}@{device}"
            problem = suites.get_problem(f"{suite}/{name}")
            base = problem.baseline.entry_file().content
            lang = problem.baseline.spec.language
            distinct = list(dict.fromkeys([base, *sources.get(key, [])]))
            row: dict[str, Any] = {
                "device": device,
                "kernels": len(distinct) - 1,
                "estimated": device != "cpu",
            }
            if len(distinct) == 1:
                out[key] = {**row, "speedups": {}}
                continue
            agent = agents.get(device) or agents.setdefault(device, get_agent(device))
            timeout = profile_timeout_s(device, RunConfig().profiling)
            if device == "cpu":
                kernels = [(ev.derive_event_id("bench", key, i), lang, src) for i, src in enumerate(distinct)]
                measured = measure_interleaved(
                    agent,
                    problem,
                    kernels,
                    device=device,
                    rounds=rounds,
                    base_seed=3_000_000 + secrets.randbelow(1_000_000_000),
                    timeout_s=timeout,
                )
                ms = [m.median_ms if m.status == "passed" else None for m in measured]
                row["statuses"] = [m.status for m in measured]
            else:  # an emulated device: the cost model's estimate, deterministic, never a measurement
                ms = []
                for i, src in enumerate(distinct):
                    prof = agent.profile(
                        problem,
                        kernel_solution(name, f"bench{i}", lang, src, problem.baseline),
                        seeds=offset_seeds(4_000_000 + i),
                        timeout_s=timeout,
                    )
                    ms.append(prof.estimated_ms if prof.status == "unmeasured" else None)
            row["ms"] = ms
            row["speedups"] = {
                src: (ms[0] / m if ms[0] and m else None) for src, m in zip(distinct, ms, strict=True)
            }
            out[key] = row
            print(f"  re-measured {key}: {len(distinct) - 1} kernel(s), baseline {ms[0]}", flush=True)
    finally:
        for a in agents.values():
            with contextlib.suppress(Exception):
                a.close()
    return out


def own_vs_remeasured(campaign: dict, measured: dict[str, dict]) -> dict:
    """Each item's figure the campaign's surfaces show (its last measurement) against this
    benchmark's own interleaved re-measure of the same final best kernel (estimates for trn1):
    their ratio, and how many are within 15%."""
    final: dict[str, str] = {}
    for _, key, src in campaign["timeline"]:
        final[key] = src
    rows = {}
    for key, own in campaign["own_figures"].items():
        bench = measured.get(key, {}).get("speedups", {}).get(final[key]) if key in final else 1.0
        ratio = own["speedup"] / bench if bench else None
        rows[key] = {"shown": own["speedup"], "figures": own["figures"], "remeasured": bench, "ratio": ratio}
    ratios = [r["ratio"] for r in rows.values() if r["ratio"] is not None]
    return {
        "items": rows,
        "within_15pct": sum(1 / 1.15 <= x <= 1.15 for x in ratios),
        "compared": len(ratios),
        "max_deviation": max((max(x, 1 / x) - 1 for x in ratios), default=None),
    }


def curve(timeline: list, items: list[str], speedups: dict[str, dict], estimated: bool | None = None) -> list:
    """The geomean over `items` (of one kind: measured, estimated or both) of each item's
    re-measured speedup of its best kernel so far, after each change of an arm's bests."""
    keep = [k for k in items if estimated is None or speedups[k]["estimated"] == estimated]
    now = dict.fromkeys(keep, 1.0)
    out = [(0.0, 1.0 if keep else None)]
    for t, key, src in timeline:
        if key in now:
            now[key] = speedups[key]["speedups"].get(src) or now[key]
            out.append((t, _geomean(list(now.values()))))
    return out


def _geomean(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(math.log(x) for x in vals) / len(vals)) if vals else None


def time_to_reach(curve: list[tuple[float, float | None]], bar: float | None) -> float | None:
    if bar is None:
        return None
    return next((t for t, g in curve if g is not None and g >= bar), None)


class LoadSampler:
    """The 1-minute load average every 30 s on a thread, from the start to `summary()`."""

    def __init__(self, every_s: float = 30.0) -> None:
        self.samples = [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._every = every_s
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self.samples.append(os.getloadavg()[0])

    def summary(self) -> dict:
        self._stop.set()
        xs = sorted(self.samples)
        return {
            "samples": len(xs),
            "min": xs[0],
            "median": xs[len(xs) // 2],
            "max": xs[-1],
            "first": self.samples[0],
        }


@dataclass
class SeedResult:
    seed: int
    campaign: dict = field(default_factory=dict)
    round_robin: dict = field(default_factory=dict)
    remeasured: dict = field(default_factory=dict)
    figures: dict = field(default_factory=dict)


def one_seed(base: Path, problems: list, minutes: float, seed: int, kills: int, rounds: int) -> SeedResult:
    res = SeedResult(seed)
    print(f"seed {seed}: campaign arm ({minutes:g} min, {kills} kills)", flush=True)
    c_root = base / f"s{seed}-campaign"
    c = campaign_arm(c_root, problems, minutes, seed, kills)
    res.campaign = {**c, **campaign_results(c_root, c["campaign_id"], c["t0"])}
    res.campaign["ray_oom_kills"] = ray_oom_kills(c["t0"] - 1, time.time())
    print(f"seed {seed}: round-robin arm ({minutes:g} min)", flush=True)
    r_root = base / f"s{seed}-round-robin"
    r = round_robin_arm(r_root, problems, minutes, seed)
    res.round_robin = {**r, **round_robin_results(r_root, problems, r["t0"])}
    res.round_robin["ray_oom_kills"] = ray_oom_kills(r["t0"] - 1, time.time())
    print(f"seed {seed}: re-measuring", flush=True)
    items = [f"{s}/{p}@{d}" for s, p, d in problems]
    sources: dict[str, list[str]] = {}
    for arm in (res.campaign, res.round_robin):
        for _, key, src in arm["timeline"]:
            sources.setdefault(key, []).append(src)
    measured = remeasure(problems, sources, rounds)
    res.remeasured = {k: {x: v for x, v in row.items() if x != "speedups"} for k, row in measured.items()}
    res.campaign["own_vs_remeasured"] = own_vs_remeasured(res.campaign, measured)
    arms = {"campaign": res.campaign, "round_robin": res.round_robin}
    kinds = {"all": None, "cpu_measured": False, "trn1_estimated": True}
    curves = {
        name: {kind: curve(arm["timeline"], items, measured, est) for kind, est in kinds.items()}
        for name, arm in arms.items()
    }
    figures: dict[str, Any] = {}
    for name, arm in arms.items():
        figures[name] = {
            "runs": arm["runs"],
            "ray_oom_kills": arm["ray_oom_kills"],
            **{f"final_geomean_{kind}": curves[name][kind][-1][1] for kind in kinds},
            "recorded_final_geomean_all": arm["recorded_final"],
            "curve_all": curves[name]["all"],
        }
        arm.pop("timeline")
    span = minutes * 60
    for kind in kinds:
        bar = curves["round_robin"][kind][-1][1]
        t = time_to_reach(curves["campaign"][kind], bar)
        figures[f"campaign_time_fraction_{kind}"] = round(t / span, 3) if t is not None else None
    figures["target_time_fraction"] = TARGET_TIME_FRACTION
    frac = figures["campaign_time_fraction_all"]
    figures["met"] = frac is not None and frac <= TARGET_TIME_FRACTION
    res.figures = figures
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=20.0, help="wall time per arm (default 20)")
    ap.add_argument(
        "--seeds", default="0,1", help="comma-separated seeds, one pair of arms each (default 0,1)"
    )
    ap.add_argument(
        "--problems", help="comma-separated SUITE/PROBLEM@DEVICE (default: all of cpu_v2 and nki_tune)"
    )
    ap.add_argument("--rounds", type=int, default=3, help="interleaved re-measure rounds (default 3)")
    ap.add_argument(
        "--kills", type=int, default=2, help="kill -9s of the campaign, evenly spaced (default 2)"
    )
    ap.add_argument("--root", help="where the arms' roots go (default: a scratch folder)")
    ap.add_argument("--out", default="campaign_bench", help="results file name under benchmarks/results")
    ap.add_argument("--label", default="", help="what this run is (saved with the figures)")
    args = ap.parse_args()
    load = LoadSampler()
    problems = all_problems()
    if args.problems:
        wanted = [x.strip() for x in args.problems.split(",") if x.strip()]
        problems = [t for t in problems if f"{t[0]}/{t[1]}@{t[2]}" in wanted]
    base = Path(args.root) if args.root else Path(tempfile.mkdtemp(prefix="campaign-bench-"))
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    t0 = time.time()
    results = [one_seed(base, problems, args.minutes, s, args.kills, args.rounds) for s in seeds]
    figures = {
        "label": args.label,
        "minutes_per_arm": args.minutes,
        "seeds": seeds,
        "kills": args.kills,
        "problems": [f"{s}/{p}@{d}" for s, p, d in problems],
        "model": "builtin/tuner",
        "preset": "quick",
        "policy": SCHEDULER_POLICY,
        "bench_wall_s": round(time.time() - t0, 1),
        "load_avg_at_end": os.getloadavg(),
        # the machine is shared: its 1-minute load average every 30 s of the benchmark
        "load_avg_1min": load.summary(),
        "cpus": os.cpu_count(),
        "per_seed": [r.__dict__ for r in results],
        "met_all_seeds": all(r.figures["met"] for r in results),
        "crash_checks_ok": all(
            r.campaign["checks"]["ok"] and r.campaign["checks"]["replay_verify_rc"] == 0 for r in results
        ),
    }
    save(args.out, figures)
    for r in results:
        f = r.figures
        for arm in ("campaign", "round_robin"):
            a = {k: v for k, v in f[arm].items() if k != "curve_all"}
            print(f"seed {r.seed}: {arm}: {a}")
        print(
            f"seed {r.seed}: the campaign reached the round robin's final re-measured geomean at "
            f"{f['campaign_time_fraction_all']} of the time (cpu {f['campaign_time_fraction_cpu_measured']}, trn1 "
            f"{f['campaign_time_fraction_trn1_estimated']}; target <= {TARGET_TIME_FRACTION}); crash checks "
            f"{r.campaign['checks']['ok']}, replay --verify rc {r.campaign['checks']['replay_verify_rc']}"
        )
        o = r.campaign["own_vs_remeasured"]
        print(
            f"seed {r.seed}: the campaign's shown (measured) figures within 15% of this re-measure: "
            f"{o['within_15pct']}/{o['compared']} items (largest deviation {o['max_deviation']})"
        )
    print(f"load average (1 min) over the benchmark: {figures['load_avg_1min']} on {os.cpu_count()} cpus")
    return 0


if __name__ == "__main__":
    sys.exit(main())
