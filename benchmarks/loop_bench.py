"""Where the wall time of one AccelOpt run goes: LLM calls, profiling, orchestration.

One run of the loop (default: the `quick` preset on the whole CPU suite, the offline
`builtin/tuner` model), on a fresh root in a temporary directory (embedded NATS server,
local Ray, a new memory). The split is derived from the run's exported log
(`<run_dir>/log.aolog`):

- wall time: `RunStarted.ts` -> `RunCompleted.ts`. `RunStarted` is stamped when the session
  builds it, before Ray and the actors start, so this window includes the start-up;
- LLM busy: the union of `[ts - latency_s, ts]` of every `LLMCallCompleted` (calls served
  from a recording have latency 0);
- profiling busy: the union of `[ts - profile.wall_s, ts]` of every `KernelProfiled` that
  was measured (a profile served from the profiler's cache, `counters.cached`, or from a
  recording, `served_from`, carries the original measurement's `wall_s`, so it counts 0);
- orchestration: wall time minus the union of all busy intervals, i.e. the time in which
  no LLM call and no profile was in progress (start-up, coordinator decisions, memory
  retrieval and indexing waits, event hops, actors fetching work);
- start-up: `RunStarted.ts` -> the start of the first LLM call or profile: Ray, the actors
  and their readiness, the coordinator actor, its memory warm-up (embedding model) before
  its first decisions go out, the first hop. Part of orchestration, reported apart because
  it is a fixed cost per run; its sub-split uses when the session's follower first saw
  `RunStarted` (published once the actors are ready) and the coordinator's first event.

LLM and profiling time overlap (the agents and the profiler work concurrently), so the
partition that adds up to the wall time is: LLM only + profiling only + both + neither
(orchestration). Outside the wall time, measured by this script: session start ->
`RunStarted.ts` (embedded NATS server, price snapshot, toolchain) and `RunCompleted.ts` ->
session end (log export, run directory, actors and server stopped). A missing CPU
calibration is measured first (`accelopt calibrate`), outside all of these.

The idle (orchestration) time inside the loop is also broken down by what ended each idle
stretch: an event published (the stretch was spent producing it, e.g. `MemoryRetrieved`
for a retrieval that waits on the curator) or the start of an LLM call or a profile (the
stretch was the hop from the request to the worker).

Usage: python benchmarks/loop_bench.py [--problems a,b] [--preset quick] [--set KEY=VALUE ...]
Target: orchestration < 5% of the wall time.
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import os
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import save

import accelopt  # noqa: F401  (offline defaults)
from accelopt import catalog as ev
from accelopt.config import build_config
from events.logfile import read_events
from replay.fold import RunView
from suites.selection import load_problems

TARGET_ORCHESTRATION_SHARE = 0.05

Interval = tuple[float, float]


# --- interval arithmetic ------------------------------------------------------------------------


def union(intervals: list[Interval]) -> list[Interval]:
    """Merge into disjoint, sorted intervals (empty ones dropped)."""
    out: list[Interval] = []
    for a, b in sorted(iv for iv in intervals if iv[1] > iv[0]):
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def clip(intervals: list[Interval], lo: float, hi: float) -> list[Interval]:
    return [(max(a, lo), min(b, hi)) for a, b in intervals if min(b, hi) > max(a, lo)]


def length(intervals: list[Interval]) -> float:
    return sum(b - a for a, b in intervals)


def gaps(busy: list[Interval], lo: float, hi: float) -> list[Interval]:
    """The complement of disjoint sorted `busy` within [lo, hi]."""
    out: list[Interval] = []
    t = lo
    for a, b in busy:
        if a > t:
            out.append((t, min(a, hi)))
        t = max(t, b)
        if t >= hi:
            break
    if t < hi:
        out.append((t, hi))
    return [g for g in out if g[1] > g[0]]


# --- the split ----------------------------------------------------------------------------------


def llm_intervals(events: list[ev.Event]) -> list[tuple[Interval, str]]:
    return [
        ((e.ts - e.latency_s, e.ts), e.role)
        for e in events
        if isinstance(e, ev.LLMCallCompleted) and e.latency_s > 0
    ]


def measured(e: ev.KernelProfiled) -> bool:
    return e.served_from is None and not e.profile.counters.get("cached")


def profile_intervals(events: list[ev.Event]) -> list[Interval]:
    return [
        (e.ts - e.profile.wall_s, e.ts)
        for e in events
        if isinstance(e, ev.KernelProfiled) and measured(e) and e.profile.wall_s > 0
    ]


def idle_breakdown(
    events: list[ev.Event], idle: list[Interval], starts: list[tuple[float, str]]
) -> dict[str, dict]:
    """Attribute idle time to what ended each idle stretch: cut every stretch at the events
    published inside it; a piece ends at an event (its type) or at the start of a busy
    interval ("-> <role> call" / "-> profile")."""
    marks = sorted([(e.ts, e.type) for e in events] + starts)
    times = [m[0] for m in marks]
    out: dict[str, dict] = defaultdict(lambda: {"s": 0.0, "n": 0})
    for a, b in idle:
        t = a
        i = bisect.bisect_right(times, a)
        while t < b and i < len(marks):
            end = min(marks[i][0], b)
            if end > t:
                out[marks[i][1]]["s"] += end - t
                out[marks[i][1]]["n"] += 1
            t = max(t, end)
            i += 1
        if t < b:
            out["(end of window)"]["s"] += b - t
            out["(end of window)"]["n"] += 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["s"]))


def split(events: list[ev.Event], seen: dict[str, float] | None = None) -> dict[str, Any]:
    """The wall-time split of one run's events; `seen`: when the session's follower saw
    the first event of each type (wall clock), for the start-up detail."""
    started = next(e for e in events if isinstance(e, ev.RunStarted))
    ending = next(e for e in events if isinstance(e, (ev.RunCompleted, ev.RunFailed)))
    t0, t1 = started.ts, ending.ts
    wall = t1 - t0
    first_decision = min((e.ts for e in events if e is not started and e.ts >= t0), default=t1)

    llm_raw = llm_intervals(events)
    prof_raw = profile_intervals(events)
    llm = union(clip([iv for iv, _ in llm_raw], t0, t1))
    prof = union(clip(prof_raw, t0, t1))
    busy = union(llm + prof)
    llm_s, prof_s, busy_s = length(llm), length(prof), length(busy)
    both_s = llm_s + prof_s - busy_s
    idle_s = wall - busy_s
    first_work = busy[0][0] if busy else t1
    startup_s = first_work - t0
    loop_idle = gaps(busy, first_work, t1)

    calls = [e for e in events if isinstance(e, ev.LLMCallCompleted)]
    profiled = [e for e in events if isinstance(e, ev.KernelProfiled)]
    by_role: dict[str, dict[str, float]] = {}
    for role in sorted({r for _, r in llm_raw}):
        ivs = [iv for iv, r in llm_raw if r == role]
        by_role[role] = {
            "calls": len(ivs),
            "latency_sum_s": sum(b - a for a, b in ivs),
            "busy_s": length(union(clip(ivs, t0, t1))),
        }
    starts = [(a, f"-> {role} call") for (a, _b), role in llm_raw] + [(a, "-> profile") for a, _b in prof_raw]

    seen = seen or {}
    nan = float("nan")
    published = seen.get("RunStarted", nan)
    first_out = min((v for k, v in seen.items() if k != "RunStarted"), default=nan)
    startup_detail = {
        # RunStarted is stamped before Ray starts; the session publishes it once the actors are ready
        "ray_and_actors_ready_s": published - t0,
        "coordinator_first_decision_s": first_decision - published,
        "memory_warmup_until_first_publish_s": first_out - first_decision,
        "hop_to_first_work_s": first_work - first_out,
    }

    def share(x: float) -> float:
        return x / wall if wall > 0 else nan

    loop = t1 - first_work
    return {
        "run_started_ts": t0,
        "first_decision_ts": first_decision,
        "first_work_ts": first_work,
        "run_ended_ts": t1,
        "ending": ending.type,
        "wall_s": wall,
        "llm_busy_s": llm_s,
        "profiling_busy_s": prof_s,
        "busy_any_s": busy_s,
        "llm_only_s": llm_s - both_s,
        "profiling_only_s": prof_s - both_s,
        "llm_and_profiling_s": both_s,
        "orchestration_s": idle_s,
        "startup_s": startup_s,
        "orchestration_in_loop_s": idle_s - startup_s,
        "llm_share": share(llm_s),
        "profiling_share": share(prof_s),
        "busy_any_share": share(busy_s),
        "orchestration_share": share(idle_s),
        "startup_share": share(startup_s),
        "orchestration_in_loop_share": share(idle_s - startup_s),
        "loop_s": loop,
        "orchestration_in_loop_share_of_loop": (idle_s - startup_s) / loop if loop > 0 else 0.0,
        "startup_detail": startup_detail,
        "llm_calls": len(calls),
        "llm_calls_timed": len(llm_raw),
        "llm_latency_sum_s": sum(b - a for (a, b), _ in llm_raw),
        "llm_by_role": by_role,
        "profiles": len(profiled),
        "profiles_measured": len(prof_raw),
        "profiles_cached": sum(1 for e in profiled if not measured(e)),
        "profile_wall_sum_s": sum(b - a for a, b in prof_raw),
        "profile_status": dict(Counter(e.profile.status for e in profiled).most_common()),
        "loop_idle_stretches": len(loop_idle),
        "loop_idle_longest_s": max((b - a for a, b in loop_idle), default=0.0),
        "loop_idle_by_what_ended_it": idle_breakdown(events, loop_idle, starts),
        "events": len(events),
        "event_mix": dict(Counter(e.type for e in events).most_common()),
    }


# --- printing -----------------------------------------------------------------------------------


def _ms(x: float | None) -> str:
    return "-" if x is None else (f"{x:.3f}" if x < 100 else f"{x:.1f}")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def print_table(rows: list[dict]) -> None:
    head = ("problem", "baseline ms", "best ms", "speedup", "base %peak", "best %peak", "kernels", "LLM cost")
    body = [
        (
            r["problem"],
            _ms(r["baseline_ms"]),
            _ms(r["best_ms"]),
            f"{r['speedup']:.2f}x" if r["speedup"] else "-",
            _pct(r["baseline_pct_peak"]),
            _pct(r["best_pct_peak"]),
            str(r["kernels"]),
            f"${r['cost_usd']:.4f}",
        )
        for r in rows
    ]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:{'<' if i == 0 else '>'}{w}}}" for i, w in enumerate(widths))
    print(fmt.format(*head))
    for b in body:
        print(fmt.format(*b))


def print_split(s: dict, outside: dict) -> None:
    w = s["wall_s"]

    def line(label: str, x: float) -> None:
        print(f"  {label:<44} {x:8.1f} s  {100 * x / w:5.1f}%")

    print(f"wall time RunStarted -> {s['ending']}: {w:.1f} s")
    line("LLM calls busy (union)", s["llm_busy_s"])
    line("profiling busy (union)", s["profiling_busy_s"])
    line("either busy (union of both)", s["busy_any_s"])
    line("  of which LLM only", s["llm_only_s"])
    line("  of which profiling only", s["profiling_only_s"])
    line("  of which both at once", s["llm_and_profiling_s"])
    line("orchestration (neither busy)", s["orchestration_s"])
    line("  start-up (RunStarted -> first work begins)", s["startup_s"])
    d = s["startup_detail"]
    for label, key in (
        ("Ray init, actors started and ready", "ray_and_actors_ready_s"),
        ("coordinator actor: first decision", "coordinator_first_decision_s"),
        ("memory warm-up before first publish", "memory_warmup_until_first_publish_s"),
        ("hop to the first worker", "hop_to_first_work_s"),
    ):
        line(f"    {label}", d[key])
    line("  in the loop (first work -> end)", s["orchestration_in_loop_s"])
    print(
        f"  orchestration in the loop as a share of the loop ({s['loop_s']:.1f} s): "
        f"{100 * s['orchestration_in_loop_share_of_loop']:.1f}%"
    )
    print(
        f"  LLM calls: {s['llm_calls']} (latency sum {s['llm_latency_sum_s']:.1f} s); profiles: {s['profiles']} "
        f"({s['profiles_measured']} measured, {s['profiles_cached']} from cache; wall sum "
        f"{s['profile_wall_sum_s']:.1f} s) {s['profile_status']}"
    )
    print(
        f"  idle stretches in the loop: {s['loop_idle_stretches']}, longest {s['loop_idle_longest_s']:.2f} s; "
        "idle time by what ended it:"
    )
    for what, v in list(s["loop_idle_by_what_ended_it"].items())[:10]:
        print(f"    {what:<28} {v['s']:7.2f} s over {v['n']:4d} pieces")
    print(
        f"outside the wall time: session start -> RunStarted {outside['pre_run_s']:.1f} s (NATS server, prices, "
        f"toolchain); {s['ending']} -> session end {outside['teardown_s']:.1f} s (export, run dir, stop); "
        f"session total {outside['session_s']:.1f} s; load average {outside['loadavg_start'][0]:.1f} -> "
        f"{outside['loadavg_end'][0]:.1f} on {os.cpu_count()} cpus"
    )


# --- main ---------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", help="comma-separated problem names (default: the whole suite)")
    ap.add_argument("--preset", default="quick")
    ap.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override passed to build_config (repeatable)",
    )
    ap.add_argument(
        "--quick-calibration",
        action="store_true",
        help="if the CPU calibration is missing, make the ~2 s quick one instead of the full one",
    )
    ap.add_argument(
        "--timeout", type=float, default=3600.0, help="give up on the run after this many seconds"
    )
    ap.add_argument(
        "--root", help="runs and memory under this folder, kept (default: a temporary one, removed)"
    )
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()

    from actors.runtime.session import SessionOptions, run_session

    with tempfile.TemporaryDirectory(prefix="loop-bench-") as scratch:
        tmp = args.root or scratch
        overrides = [f"root={tmp}/runs", f"memory.uri={tmp}/memory", *args.overrides]
        if args.problems:
            overrides.append(f"problems=[{args.problems}]")
        cfg = build_config(preset=args.preset, overrides=overrides)
        problems = load_problems(cfg)
        model = cfg.llm.for_role("planner").model
        print(
            f"{len(problems)} problem(s) of suite {cfg.suite} on {cfg.device}: preset {args.preset}, "
            f"B={cfg.search.beam_width} N={cfg.search.plans_per_candidate} K={cfg.search.samples_per_plan} "
            f"T={cfg.search.iterations}, model {model}"
        )

        calibration_s = 0.0
        if cfg.device == "cpu":
            from hardware_agents.cpu.calibrate import calibrate, load_calibration

            if load_calibration() is None:
                t = time.perf_counter()
                calibrate(quick=args.quick_calibration)
                calibration_s = time.perf_counter() - t
                print(f"CPU calibration (missing, one-time per machine): {calibration_s:.1f} s")

        seen: dict[str, float] = {}

        def on_event(e: ev.Event, _view: RunView) -> None:
            seen.setdefault(e.type, time.time())

        load_start = os.getloadavg()
        session_start = time.time()
        outcome = run_session(
            cfg, problems, SessionOptions(on_event=on_event, timeout_s=args.timeout, log_level="ERROR")
        )
        session_end = time.time()
        log_path = outcome.run_dir / "log.aolog"
        events = read_events(log_path)
        view = RunView.from_events(events)
        results = [dataclasses.asdict(r) for r in view.results()]

    print(
        f"run {outcome.run_id}: {view.status}{' (timed out)' if outcome.timed_out else ''}, "
        f"{len(events)} events, LLM cost ${view.cost_usd:.4f}"
    )
    for w in outcome.warnings:
        print(f"warning: {w}")
    if not any(isinstance(e, (ev.RunCompleted, ev.RunFailed)) for e in events):
        print("the run did not end: no split")
        return 1
    s = split(events, seen)
    outside = {
        "session_start_ts": session_start,
        "session_end_ts": session_end,
        "pre_run_s": s["run_started_ts"] - session_start,
        "teardown_s": session_end - s["run_ended_ts"],
        "session_s": session_end - session_start,
        "calibration_s": calibration_s,
        "loadavg_start": [round(x, 2) for x in load_start],
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
    }
    print()
    print_split(s, outside)
    print()
    print_table(results)

    figures = {
        "definition": {
            "wall_s": "RunStarted.ts -> RunCompleted.ts (or RunFailed.ts) from the exported log; RunStarted is "
            "stamped when the session builds it, before Ray init and actor start-up",
            "llm_busy_s": "length of the union of [ts - latency_s, ts] over LLMCallCompleted, clipped to the wall",
            "profiling_busy_s": "length of the union of [ts - profile.wall_s, ts] over KernelProfiled actually "
            "measured (profiler-cache hits and recording-served profiles count 0), clipped",
            "orchestration_s": "wall_s minus the union of all LLM and profiling intervals: time with neither an "
            "LLM call nor a profile in progress; includes startup_s",
            "startup_s": "RunStarted.ts -> the start of the first LLM or profiling interval (no work before it): "
            "Ray init, actor start and readiness, coordinator actor, its memory warm-up, first hop",
            "startup_detail": "sub-split of startup_s using when the session's follower first saw RunStarted "
            "(published once the actors are ready) and the first later event (the first "
            "publish of the coordinator), with the log's first-decision ts; approximate",
            "orchestration_in_loop_s": "orchestration_s - startup_s: idle time after the first work began",
            "orchestration_share": "orchestration_s / wall_s (the target: < 5%)",
            "outside.pre_run_s": "session start -> RunStarted.ts (embedded NATS server, price snapshot, toolchain)",
            "outside.teardown_s": "RunCompleted.ts -> session end (log export, run dir, actors and server stopped)",
            "loop_idle_by_what_ended_it": "idle time after the first work began, cut at every event; each piece "
            "is attributed to the event type, or busy-interval start, that ends it",
        },
        "preset": args.preset,
        "overrides": args.overrides,
        "suite": cfg.suite,
        "device": cfg.device,
        "model": model,
        "search": msgspec.to_builtins(cfg.search),
        "problems": [p.name for p in problems],
        "run_id": outcome.run_id,
        "status": view.status,
        "timed_out": outcome.timed_out,
        "cost_usd": view.cost_usd,
        "split": s,
        "outside": outside,
        "results": results,
        "target_orchestration_share": TARGET_ORCHESTRATION_SHARE,
        "meets_target": s["orchestration_share"] < TARGET_ORCHESTRATION_SHARE,
        "meets_target_excluding_startup": s["orchestration_in_loop_share_of_loop"]
        < TARGET_ORCHESTRATION_SHARE,
    }
    print(
        f"orchestration {100 * s['orchestration_share']:.1f}% of the wall time (target < "
        f"{100 * TARGET_ORCHESTRATION_SHARE:.0f}%); without start-up "
        f"{100 * s['orchestration_in_loop_share_of_loop']:.1f}% "
        f"of the loop"
    )
    if not args.no_save:
        save("loop_bench", figures)
    return 0 if figures["meets_target"] else 1


if __name__ == "__main__":
    sys.exit(main())
