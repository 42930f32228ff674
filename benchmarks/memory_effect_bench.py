"""Does the optimization memory make later searches cheaper? A leave-one-out ablation.

For each problem P of the suite (default `cpu_v2`, every problem):

- (a) cold: P optimized with the memory off;
- (b) warm: P optimized with a memory that holds only the insights learnt on the *other*
  problems (the insights the cold runs summarized, copied into a fresh LanceDB per P), so P
  never sees an insight about itself.

All cold searches are one run (memory off: the problems cannot see each other); each warm
search is its own run, on its own memory. Every run is the real loop (embedded NATS, local
Ray, sandboxed compiled kernels, the model given by --model, default the offline
`builtin/tuner`), in a scratch root (or --root).

From each run's log: the anytime curve of the search, i.e. after each profile spent (a
kernel actually timed: baseline and candidates, not cache hits) the best kernel so far by
the search's own measurements, and the LLM dollars spent by then. Then, per problem, the
baseline and every kernel that was ever best-so-far in either condition are re-measured
together in interleaved rounds on fresh seeds (`actors.runtime.
kernel_remeasure.measure_interleaved`), so every point of both curves is a re-measured speedup over the
baseline under the same machine conditions. Figures per problem and condition: the final
re-measured speedup, the profiles needed to reach 90% of the *cold* final best (cold: its
own final; warm: the same bar, or "not reached"), and their ratio warm/cold; geomeans over
problems.

Targets with builtin/tuner on this machine: warm reaches 90% of the cold final best with
<= 0.7x the profiles (geomean of warm/cold), and the final geomean speedup is >= 2x over the
baselines in the `quick` budget.

Writes benchmarks/results/memory_effect_bench.json and memory_effect_bench.html (the
curves as inline SVG through replay/render/svg.py and replay/render/htmlkit.py).

Usage: python benchmarks/memory_effect_bench.py [--model M] [--api-base URL] [--problems a,b]
       [--suite cpu_v2] [--preset quick] [--rounds 3] [--set KEY=VALUE ...] [--root DIR]
(docs/memory.md: reproducing the paper's memory ablation with a real model.)
"""

from __future__ import annotations

import argparse
import secrets
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import RESULTS, save

import accelopt  # noqa: F401  (offline defaults)
from accelopt import catalog as ev
from replay.summary import geomean

TARGET_PROFILE_RATIO = 0.7
TARGET_FINAL_GEOMEAN = 2.0


@dataclass
class CurvePoint:
    profiles: int  # kernels timed so far (baseline included)
    usd: float  # LLM dollars spent by the run so far
    best_source: str  # the best kernel so far, by the search's own measurements


@dataclass
class Search:
    """One problem's search in one condition, read from its run's log."""

    problem: str
    condition: str  # "cold" | "warm"
    run_id: str
    baseline_source: str
    points: list[CurvePoint] = field(default_factory=list)
    insights_received: int = 0  # memory entries retrieved for its planners (warm)
    memory_size: int = 0  # entries in the memory it ran with

    @property
    def profiles(self) -> int:
        return self.points[-1].profiles if self.points else 0

    @property
    def final_source(self) -> str:
        return self.points[-1].best_source if self.points else self.baseline_source


def searches_from_log(events: list[ev.Event], condition: str) -> dict[str, Search]:
    """Each problem's anytime curve: after every timed profile (not a cache hit, not a
    re-measure), the best passing kernel so far (lowest recorded latency) and the dollars."""
    started = next(e for e in events if isinstance(e, ev.RunStarted))
    out = {
        t.problem.name: Search(
            t.problem.name, condition, started.run_id, t.problem.baseline.entry_file().content
        )
        for t in started.targets
    }
    requests: dict[str, ev.ProfileRequested] = {}
    usd = 0.0
    best: dict[str, tuple[float, str]] = {}
    for e in events:
        if isinstance(e, ev.LLMCallCompleted):
            usd += e.cost_usd
        elif isinstance(e, ev.ProfileRequested):
            requests[e.event_id] = e
        elif isinstance(e, ev.MemoryRetrieved) and e.problem in out:
            out[e.problem].insights_received += len(e.entries)
        elif isinstance(e, ev.KernelProfiled) and e.problem in out:
            req = requests.get(e.request_id)
            if req is None or req.purpose == "remeasure" or e.profile.counters.get("cached"):
                continue
            s = out[e.problem]
            lat = e.profile.latency_ms if e.profile.status == "passed" else None
            if lat is not None and (e.problem not in best or lat < best[e.problem][0]):
                best[e.problem] = (lat, req.source)
            s.points.append(CurvePoint(s.profiles + 1, usd, best.get(e.problem, (0.0, s.baseline_source))[1]))
    return out


def profiles_to_reach(curve: list[tuple[int, float | None]], bar: float) -> int | None:
    return next((n for n, y in curve if y is not None and y >= bar), None)


def run_condition(cfg, problems: list, *, timeout: float | None) -> list[ev.Event]:
    from actors.runtime.session import SessionOptions, run_session
    from events.logfile import read_events

    outcome = run_session(cfg, problems, SessionOptions(timeout_s=timeout, log_level="ERROR"))
    if outcome.timed_out or outcome.view.completed is None:
        raise SystemExit(f"run {outcome.run_id} did not complete ({outcome.view.status})")
    return read_events(outcome.run_dir / "log.aolog")


def warm_memory(uri: Path, entries: list[Any], embedder: str | None) -> int:
    from memory_index import MemoryIndex

    index = MemoryIndex.open(str(uri), embedder=embedder)
    if entries:
        index.upsert(entries)  # a memory reused from an earlier invocation writes nothing new
    return len(index) if index.exists else 0


def remeasure_problem(
    agent, problem, sources: list[str], *, rounds: int, timeout_s: float | None
) -> tuple[dict[str, float | None], list[str]]:
    """Speedup over the baseline (sources[0]) of every source, in interleaved rounds, and
    what failed ("baseline: status: first log line"; a failed baseline leaves no speedup)."""
    from actors.runtime.kernel_remeasure import measure_interleaved

    base_seed = 2_000_000 + secrets.randbelow(1_000_000_000)
    kernels = [(ev.derive_event_id("bench", "Kernel", i, src), "c", src) for i, src in enumerate(sources)]
    measured = measure_interleaved(
        agent,
        problem,
        kernels,
        device="cpu",
        rounds=rounds,
        base_seed=base_seed,
        timeout_s=timeout_s,
    )
    base = measured[0].median_ms if measured[0].status == "passed" else None
    failures = [
        f"{'baseline' if i == 0 else f'kernel {i}'}: {m.status}: {m.log_head}"
        for i, m in enumerate(measured)
        if m.status != "passed"
    ]
    return (
        {
            src: (base / m.median_ms if base and m.status == "passed" and m.median_ms else None)
            for src, m in zip(sources, measured, strict=True)
        },
        failures,
    )


def report_html(results: dict[str, Any]) -> str:
    from replay.render.htmlkit import CSS, esc, table
    from replay.render.svg import Series, line_chart

    rows, charts = [], []
    for p in results["problems"]:
        c, w = p["cold"], p["warm"]
        rows.append(
            [
                p["problem"],
                f"{c['final_speedup']:.2f}x" if c["final_speedup"] else "-",
                f"{w['final_speedup']:.2f}x" if w["final_speedup"] else "-",
                str(c["profiles_to_90"] or "-"),
                str(w["profiles_to_90"] or "not reached"),
                f"{p['profile_ratio']:.2f}" if p["profile_ratio"] else "-",
                str(c["profiles"]),
                str(w["profiles"]),
                str(w["insights_received"]),
            ]
        )
        charts.append(
            line_chart(
                [
                    Series("cold (memory off)", [tuple(x) for x in c["curve"]]),
                    Series("warm (other problems' insights)", [tuple(x) for x in w["curve"]], dashed=True),
                ],
                title=f"{p['problem']}: best re-measured speedup vs profiles",
                name=f"curve:{p['problem']}",
                x_label="profiles spent",
                y_label="speedup over baseline",
                integer_x=True,
                y_fmt=lambda v: f"{v:.2f}x",
            )
        )
    g = results["geomean"]
    charts.insert(
        0,
        line_chart(
            [
                Series("cold", [tuple(x) for x in g["cold_curve"]]),
                Series("warm", [tuple(x) for x in g["warm_curve"]], dashed=True),
            ],
            title="geomean over problems: best re-measured speedup vs profiles",
            name="curve:geomean",
            x_label="profiles spent",
            y_label="speedup (geomean)",
            integer_x=True,
            y_fmt=lambda v: f"{v:.2f}x",
        ),
    )
    usd_series = [
        Series(f"{p['problem']} {cond}", [tuple(x) for x in p[cond]["usd_curve"]], dashed=cond == "warm")
        for p in results["problems"]
        for cond in ("cold", "warm")
    ]
    charts.append(
        line_chart(
            usd_series,
            title="best re-measured speedup vs LLM dollars",
            name="curve:usd",
            x_label="LLM USD",
            y_label="speedup",
            y_fmt=lambda v: f"{v:.2f}x",
        )
    )
    head = [
        "problem",
        "cold final",
        "warm final",
        "cold profiles to 90%",
        "warm profiles to 90% of cold final",
        "warm/cold",
        "cold profiles",
        "warm profiles",
        "insights received (warm)",
    ]
    rows.append(
        [
            ("geomean", "total"),
            f"{g['cold_final']:.2f}x" if g["cold_final"] else "-",
            f"{g['warm_final']:.2f}x" if g["warm_final"] else "-",
            "",
            "",
            f"{g['profile_ratio']:.2f}" if g["profile_ratio"] else "-",
            "",
            "",
            "",
        ]
    )
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>memory effect</title>'
        f"<style>{CSS}</style></head><body><h1>Memory effect (leave-one-out)</h1>"
        f"<p>{esc(results['settings'])}</p>{table(head, rows, cls='results', numeric_from=1)}"
        f'<section class="charts">{"".join(charts)}</section></body></html>\n'
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="model for every agent (default builtin/tuner)")
    ap.add_argument("--api-base", help="OpenAI-compatible base URL for --model")
    ap.add_argument("--suite", default="cpu_v2")
    ap.add_argument("--problems", help="comma-separated problems of the suite (default: all)")
    ap.add_argument("--preset", default="quick")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved re-measure rounds")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--root", help="runs directory (default: a scratch directory)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="per run, seconds")
    ap.add_argument("--name", default="memory_effect_bench", help="name of the result files")
    ap.add_argument(
        "--cold", help="reuse this finished cold run (its log under --root) instead of running one"
    )
    ap.add_argument(
        "--warm",
        action="append",
        default=[],
        metavar="PROBLEM=RUN_ID",
        help="reuse this finished warm run of PROBLEM (its log under --root); repeatable",
    )
    args = ap.parse_args()

    import suites
    from accelopt.config import build_config
    from events.logfile import read_events
    from hardware_agents.families import get_agent

    all_problems = {p.name: p for p in suites.load_suite(args.suite)}
    names = [n.strip() for n in args.problems.split(",")] if args.problems else sorted(all_problems)
    missing = [n for n in names if n not in all_problems]
    if missing or len(names) < 2:
        print(
            f"need at least two problems of {args.suite}; unknown: {missing}; available: {sorted(all_problems)}"
        )
        return 2
    problems = [all_problems[n] for n in names]
    scratch = tempfile.TemporaryDirectory(prefix="memory-effect-") if not args.root else None
    root = Path(args.root or scratch.name)  # type: ignore[union-attr]
    base = [f"suite={args.suite}", f"root={root}", "search.remeasure_rounds=0", *args.overrides]
    if args.model:
        base.append(f"llm.default.model={args.model}")
    if args.api_base:
        base.append(f"llm.default.api_base={args.api_base}")
    t0 = time.monotonic()

    # (a) cold: every problem in one run, memory off
    cold_cfg = build_config(
        preset=args.preset, overrides=[*base, f"problems=[{','.join(names)}]", "memory.enabled=false"]
    )
    print(
        f"cold: {len(names)} problems, memory off ({cold_cfg.llm.for_role('planner').model}, preset {args.preset})"
    )
    if args.cold:
        cold_events = read_events(root / args.cold / "log.aolog")
    else:
        cold_events = run_condition(cold_cfg, problems, timeout=args.timeout)
    cold = searches_from_log(cold_events, "cold")
    print(
        f"  run {next(iter(cold.values())).run_id}: "
        + ", ".join(f"{n} {cold[n].profiles}" for n in names)
        + " profiles"
    )
    learnt: dict[str, list] = {n: [] for n in names}
    for e in cold_events:
        if isinstance(e, ev.MemoryEntryAdded) and e.entry.problem in learnt:
            learnt[e.entry.problem].append(e.entry)
    print("  insights learnt: " + ", ".join(f"{n} {len(learnt[n])}" for n in names))

    # (b) warm: each problem alone, on a memory of the other problems' insights
    warm: dict[str, Search] = {}
    reuse = dict(w.split("=", 1) for w in args.warm)
    for n in names:
        uri = root / f"memory-without-{n}"
        entries = [x for m in names if m != n for x in learnt[m]]
        size = warm_memory(uri, entries, cold_cfg.memory.embedding_model)
        cfg = build_config(
            preset=args.preset,
            overrides=[*base, f"problems=[{n}]", "memory.enabled=true", f"memory.uri={uri}"],
        )
        print(f"warm: {n} with {size} insights of the other problems")
        if n in reuse:
            warm_events = read_events(root / reuse[n] / "log.aolog")
        else:
            warm_events = run_condition(cfg, [all_problems[n]], timeout=args.timeout)
        s = searches_from_log(warm_events, "warm")[n]
        print(f"  run {s.run_id}: {s.profiles} profiles, {s.insights_received} insights received")
        s.memory_size = size
        warm[n] = s
    search_s = time.monotonic() - t0

    # interleaved re-measure of every best-so-far kernel of both conditions, per problem
    agent = get_agent("cpu")
    rows = []
    try:
        for n in names:
            c, w = cold[n], warm[n]
            sources = list(
                dict.fromkeys([c.baseline_source] + [pt.best_source for pt in c.points + w.points])
            )
            print(f"re-measuring {n}: baseline and {len(sources) - 1} kernels x {args.rounds} rounds")
            speed, failures = remeasure_problem(
                agent, all_problems[n], sources, rounds=args.rounds, timeout_s=cold_cfg.profiling.timeout_s
            )
            for f in failures:
                print(f"  re-measure failed: {f}")
            cold_final = speed.get(c.final_source)
            row: dict[str, Any] = {"problem": n, "remeasure_failures": failures}
            for s in (c, w):
                curve = [(pt.profiles, speed.get(pt.best_source)) for pt in s.points]
                final = speed.get(s.final_source)
                row[s.condition] = {
                    "run_id": s.run_id,
                    "profiles": s.profiles,
                    "final_speedup": final,
                    "profiles_to_90": profiles_to_reach(curve, 0.9 * cold_final) if cold_final else None,
                    "curve": curve,
                    "usd_curve": [(pt.usd, speed.get(pt.best_source)) for pt in s.points],
                    "usd": s.points[-1].usd if s.points else 0.0,
                    "insights_received": s.insights_received,
                    "memory_size": s.memory_size,
                }
            c90, w90 = row["cold"]["profiles_to_90"], row["warm"]["profiles_to_90"]
            # not reached: count the whole warm search (a lower bound on what it would need)
            row["profile_ratio"] = (w90 or row["warm"]["profiles"]) / c90 if c90 else None
            row["warm_reached_90"] = w90 is not None
            rows.append(row)
            print(
                f"  cold {_x(row['cold']['final_speedup'])} ({c90} profiles to 90%), warm "
                f"{_x(row['warm']['final_speedup'])} ({w90 or 'not reached'}), ratio {row['profile_ratio']}"
            )
    finally:
        agent.close()

    def geo_curve(cond: str) -> list[tuple[int, float | None]]:
        longest = max(r[cond]["profiles"] for r in rows)
        out = []
        for k in range(1, longest + 1):
            vals = []
            for r in (r for r in rows if r["cold"]["final_speedup"]):  # problems with figures
                pts = [y for n, y in r[cond]["curve"] if n <= k]
                vals.append(pts[-1] if pts else None)
            out.append((k, geomean(vals, strict=True)))
        return out

    figures: dict[str, Any] = {
        "settings": (
            f"suite {args.suite}, problems {', '.join(names)}, preset {args.preset}, model "
            f"{cold_cfg.llm.for_role('planner').model}, {args.rounds} interleaved re-measure rounds"
        ),
        "suite": args.suite,
        "preset": args.preset,
        "model": cold_cfg.llm.for_role("planner").model,
        "rounds": args.rounds,
        "problems": rows,
        "search_wall_s": search_s,
        # over the problems whose re-measure gave figures (the others are listed with why)
        "problems_without_figures": [r["problem"] for r in rows if r["profile_ratio"] is None],
        "geomean": {
            "cold_final": geomean([r["cold"]["final_speedup"] for r in rows]),
            "warm_final": geomean([r["warm"]["final_speedup"] for r in rows]),
            "profile_ratio": geomean([r["profile_ratio"] for r in rows]),
            "cold_curve": geo_curve("cold"),
            "warm_curve": geo_curve("warm"),
        },
        "targets": {
            "profile_ratio_at_most": TARGET_PROFILE_RATIO,
            "final_geomean_at_least": TARGET_FINAL_GEOMEAN,
        },
    }
    g = figures["geomean"]
    best_final = max(g["cold_final"] or 0.0, g["warm_final"] or 0.0)
    figures["targets"]["profile_ratio_met"] = (
        g["profile_ratio"] is not None and g["profile_ratio"] <= TARGET_PROFILE_RATIO
    )
    figures["targets"]["final_geomean_met"] = best_final >= TARGET_FINAL_GEOMEAN
    print(
        f"geomean: cold final {_x(g['cold_final'])}, warm final {_x(g['warm_final'])}, profiles to 90% of the cold "
        f"final warm/cold {g['profile_ratio']:.2f}"
        if g["profile_ratio"]
        else "geomean: -"
    )
    save(args.name, figures)
    html = RESULTS / f"{args.name}.html"
    html.write_text(report_html(figures))
    print(f"saved {html}")
    if scratch is not None:
        scratch.cleanup()
    return 0


def _x(v: float | None) -> str:
    return f"{v:.2f}x" if v else "-"


if __name__ == "__main__":
    sys.exit(main())
