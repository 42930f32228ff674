"""Run the AccelOpt loop from Python: one small CPU problem, the offline `builtin/tuner` model.

Shows what `accelopt demo` and `accelopt run` do, as a library call: build a run's config
(the `quick` preset: a beam of 2, 2 plans per candidate, here 1 iteration), load its problems,
and `run_session` them. The session starts the root's embedded NATS JetStream server (the
run's event log) and a local Ray with the actors: the LLM roles (played by `builtin/tuner`,
which needs no network and no API key), a CPU profiler that compiles, sandboxes and times
every kernel, and the memory. It ends when the coordinator completes the run; the run's
directory holds its exported log, which `replay_log.py` verifies.

    python examples/run_loop.py [--root DIR] [--problem SUITE/PROBLEM] [--iterations N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile

from accelopt import catalog as ev
from accelopt.config import build_config
from actors.runtime.session import SessionOptions, run_session
from replay.fold import RunView
from suites.selection import load_problems


def progress(event: ev.Event, view: RunView) -> None:
    """Called for every event of the run as it arrives (here: one line per profile and iteration)."""
    if isinstance(event, ev.KernelProfiled):
        ms = event.profile.latency_ms
        print(f"  profiled {event.kernel_id[:8]}: {event.profile.status}" + (f", {ms:.2f} ms" if ms else ""))
    elif isinstance(event, ev.IterationCompleted):
        print(
            f"  {event.problem}: iteration {event.iteration} done, best {event.best_latency_ms or 0:.2f} ms"
        )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", help="where the run's directory goes (default: a new temporary folder)")
    p.add_argument("--problem", default="cpu_v2/bmm", help="SUITE/PROBLEM (default: cpu_v2/bmm)")
    p.add_argument("--iterations", type=int, default=1)
    p.add_argument("--timeout", type=float, default=900.0, help="give up after this many seconds")
    args = p.parse_args()
    root = args.root or tempfile.mkdtemp(prefix="accelopt-example-")
    suite, _, name = args.problem.rpartition("/")
    cfg = build_config(
        preset="quick",
        overrides=[
            f"root={root}",
            f"memory.uri={root}/memory",
            f"suite={suite}",
            f"problems=[{name}]",
            f"search.iterations={args.iterations}",
            "search.remeasure_rounds=2",  # the best kernel and the baseline, profiled again in turns
        ],
    )
    problems = load_problems(cfg)
    print(f"optimizing {args.problem} with {cfg.llm.for_role('planner').model}, preset quick, root {root}")
    outcome = run_session(cfg, problems, SessionOptions(on_event=progress, timeout_s=args.timeout))
    view = outcome.view
    print(f"run {outcome.run_id}: {view.status}")
    for r in view.results():  # the speedup re-measured at the end (baseline and best in turns)
        speedup = f"{r.reported_speedup:.2f}x" if r.reported_speedup else "-"
        print(
            f"{r.problem}: baseline {r.baseline_ms or 0:.2f} ms, best {r.best_ms or 0:.2f} ms, "
            f"speedup {speedup} ({r.kernels} kernels profiled)"
        )
    for w in outcome.warnings:
        print(f"warning: {w}")
    print(f"log: {outcome.run_dir / 'log.aolog'}")
    return 0 if view.completed is not None and not outcome.timed_out else 1


if __name__ == "__main__":
    sys.exit(main())
