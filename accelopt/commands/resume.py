"""`accelopt resume RUN`: continue a run after a crash, from its log.

Everything derives from the log: the coordinator re-folds the run's history, re-makes its
decisions (their ids are deterministic, so nothing already published is published twice),
and publishes what is missing; requests that were in flight are still on the durable
consumers and get (re)delivered to the new agents.
"""

from __future__ import annotations

import argparse
import gc

from accelopt.commands.run import add_preflight_arg, execute, load_run_events, wide_console


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("resume", help="continue a run after a crash, from its log")
    p.add_argument("run", help="run id")
    p.add_argument("--root", default="runs")
    p.add_argument("--nats", help="NATS URL (default: the root's embedded server)")
    p.add_argument("--ray-address")
    p.add_argument("--timeout", type=float)
    add_preflight_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from accelopt import catalog as ev
    from accelopt.config import recorded_config
    from replay.fold import RunView

    console = wide_console()
    events = load_run_events(console, args, prefer_stream=True)
    if events is None:
        return 2
    started = next((e for e in events if isinstance(e, ev.RunStarted)), None)
    if started is None:
        console.print(f"[red]run {args.run} has no RunStarted: nothing to resume[/red]")
        return 2
    view = RunView.from_events(events)
    if view.completed or view.failed:
        console.print(f"run {started.run_id} is already {view.status}; nothing to resume")
        return 0
    cfg = recorded_config(started.config)
    done = sum(p.kernels_profiled for p in view.problems.values())
    console.print(f"resuming {started.run_id}: {len(events)} events on the log, {done} kernels profiled")
    problems = [t.problem for t in started.targets]
    # the history goes before the run goes on: the run re-folds it from the log, and holding
    # it here would keep the whole of a long run in this process for the rest of it
    del events, view
    gc.collect()
    return execute(console, cfg, problems, args, run_id=started.run_id, resume=True,
                   devices=sorted({t.device for t in started.targets}))
