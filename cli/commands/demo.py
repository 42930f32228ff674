"""`accelopt demo` (what `make demo` runs): the loop and its memory on embedded defaults.

Three problems of the `cpu_v2` suite (baselines with real headroom) with the offline
`builtin/tuner` model, `quick` preset: an embedded NATS JetStream server, a local Ray, real
compiled and sandboxed kernels, and a fresh LanceDB memory. The first problem is optimized
alone and fills the memory with what it learnt; then the other problems are optimized in a
second run whose planners receive those insights. The closing table shows each problem's
speedup (baseline and best re-measured in interleaved rounds at the end of the problem) and
how many memory insights its planners received and used (a plan uses an insight when it
names the insight's constant: `replay/memory_use.py`). Every `accelopt run` flag applies
(`--problems`, `--preset`, `--model`, `--memory`, `--set ...`).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
from rich.console import Console
from rich.table import Table

from accelopt.config import target_devices
from cli.console import wide_console
from cli.errors import error
from cli.options import TIMEOUT_HELP, add_config_args, config_and_problems

if TYPE_CHECKING:
    from actors.runtime.session import RunOutcome

DEMO_SUITE = "cpu_v2"
# a fused add + normalization + matmul fills the memory; a batched matmul and a batched matmul
# with a softmax plan with it (its loop-order and register-tile insights carry over). Chosen to
# be cheap to profile as well: the demo stays under 2 minutes on 2 cores (silu's 400 MB of
# fresh inputs per profile took a minute more)
DEMO_PROBLEMS = "add_rmsnorm_matmul,bmm,bmm_softmax"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo", help="the loop and its memory on 3 CPU problems with the offline builtin/tuner model"
    )
    p.add_argument(
        "--problems",
        default=DEMO_PROBLEMS,
        help=f"comma-separated problems of --suite; the first fills the memory (default {DEMO_PROBLEMS})",
    )
    p.add_argument("--suite", default=DEMO_SUITE, help=f"problem suite (default {DEMO_SUITE})")
    p.add_argument("--timeout", type=float, help=TIMEOUT_HELP)
    add_config_args(p)
    p.set_defaults(func=run, device=None)


def run(args: argparse.Namespace) -> int:
    console = wide_console()
    args.preset = args.preset or "quick"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    own_memory = not args.memory
    if own_memory:  # a fresh memory: what the second run receives is what the first learnt
        args.memory = str(Path(args.root or "runs") / f"demo-memory-{stamp}")
    loaded = config_and_problems(console, args)
    if loaded is None:
        return 2
    cfg, problems = loaded
    s = cfg.search
    names = [p.name for p in problems]
    console.print(
        f"[bold]AccelOpt demo[/bold]: {len(problems)} problems of {cfg.suite} ({', '.join(names)}), preset "
        f"{args.preset} (B={s.beam_width} N={s.plans_per_candidate} K={s.samples_per_plan} "
        f"T={s.iterations}), model {cfg.llm.for_role('planner').model}",
        highlight=False,
    )
    console.print(f"memory: {cfg.memory.uri}", highlight=False)
    deadline = time.monotonic() + args.timeout if args.timeout else None
    groups = [problems[:1], problems[1:]] if len(problems) > 1 else [problems]
    outcomes: list[RunOutcome] = []
    from actors.runtime.pool import AgentPool

    devices = sorted(set(target_devices(cfg, names).values()))
    # one set of agents serves both runs (agents serve every run on the stream)
    with AgentPool(
        cfg, devices, nats_url=args.nats, ray_address=args.ray_address, log_level=args.log_level
    ) as nats_url:
        for i, group in enumerate(groups, 1):
            if i == 1:
                role = "fills the memory" if len(groups) > 1 else "memory on"
            else:
                learnt = len(outcomes[0].view.memory_entry_ids)
                role = f"plans with the memory: {learnt} insight{'s' if learnt != 1 else ''} from run 1"
            console.print(f"[bold]run {i}/{len(groups)}[/bold]: {', '.join(p.name for p in group)} ({role})")
            left = max(1.0, deadline - time.monotonic()) if deadline else None
            sub = msgspec.structs.replace(cfg, problems=[p.name for p in group])
            outcome = _session(console, sub, group, args, nats_url, left)
            if outcome is None:
                return 1
            outcomes.append(outcome)
            if outcome.timed_out or not outcome.view.completed:
                return error(
                    f"run {outcome.run_id}: {'timed out' if outcome.timed_out else outcome.view.status}", 1
                )
    console.print(closing_table(outcomes))
    cost = sum(o.view.cost_usd for o in outcomes)
    console.print(
        f"LLM cost ${cost:.4f} · runs {', '.join(o.run_id for o in outcomes)} in {cfg.root}/", highlight=False
    )
    root = "" if cfg.root == "runs" else f" --root {cfg.root}"
    last = outcomes[-1].run_id
    console.print("look into it:")
    # without --uri, the memory commands read the memory under the root written last: the demo's own
    memory = f"accelopt memory list{root}" if own_memory else f"accelopt memory list --uri {cfg.memory.uri}"
    for cmd in (
        f"accelopt runs{root}",
        f"accelopt replay {last} --verify{root}",
        f"accelopt report {last}{root}",
        f"accelopt remeasure {last}{root}",
        memory,
    ):
        console.print(f"  {cmd}", highlight=False)
    return 0


def _session(
    console: Console, cfg, problems: list, args: argparse.Namespace, nats_url: str, timeout_s: float | None
) -> RunOutcome | None:
    from actors.runtime.session import RunError
    from cli.session import session_with_progress

    try:
        outcome = session_with_progress(
            console,
            cfg,
            problems,
            args,
            nats_url=nats_url,
            ray_address=args.ray_address,
            timeout_s=timeout_s,
            start_workers=False,
        )
    except RunError as e:
        error(str(e), 1, label="run failed:")
        return None
    for w in outcome.warnings:
        console.print(f"[yellow]warning:[/yellow] {w}")
    return outcome


def closing_table(outcomes: list) -> Table:
    """Per problem: its run; the baseline, best and speedup of its end-of-problem re-measure
    (the speedup is the ratio of the two medians shown beside it; the search's figures where
    no re-measure was made); the speedup the search recorded; the memory insights its planners
    received and used."""
    from events.logfile import read_events
    from replay.memory_use import memory_use
    from replay.render.fmt import ms

    t = Table(
        title="AccelOpt demo: speedups, and the memory at work",
        caption="baseline, best: medians of the end-of-problem re-measure (interleaved rounds on fresh "
        "seeds), speedup = baseline / best; recorded: the speedup the search's own profiles gave "
        "(marked * where no re-measure was made and the row shows them); used: a plan named the "
        "insight's constant",
    )
    for col in (
        "problem",
        "run",
        "baseline",
        "best",
        "speedup",
        "recorded",
        "insights received",
        "insights used",
        "kernels",
    ):
        t.add_column(col, justify="left" if col in ("problem", "run") else "right")
    for i, o in enumerate(outcomes, 1):
        use = memory_use(read_events(o.run_dir / "log.aolog"))
        for r in o.view.results():
            u = use.get(r.problem)
            base_ms, best_ms, speedup, remeasured = timed_figures(o.view, r)
            mark = "" if remeasured else "*"
            t.add_row(
                r.problem,
                f"{i} {o.run_id}",
                ms(base_ms) + mark,
                ms(best_ms) + mark,
                (f"{speedup:.2f}x" if speedup is not None else "-") + mark,
                f"{r.speedup:.2f}x" if r.speedup is not None else "-",
                str(len(u.received)) if u else "-",
                str(len(u.used)) if u else "-",
                str(r.kernels),
            )
    return t


def timed_figures(view, r) -> tuple[float | None, float | None, float | None, bool]:
    """(baseline ms, best ms, speedup, re-measured?): the re-measure's medians where the run made
    one of this best kernel, else the search's profiles; the speedup is always their ratio."""
    rm = view.problems[r.problem].remeasured
    if rm is not None and rm.best.kernel_id == r.best_kernel_id and rm.speedup is not None:
        return rm.baseline.median_ms, rm.best.median_ms, rm.speedup, True
    return r.baseline_ms, r.best_ms, r.speedup, False
