"""`accelopt resume RUN`: continue a run after a crash, from its log.

Everything derives from the log: the coordinator re-folds the run's history, re-makes its
decisions (their ids are deterministic, so nothing already published is published twice),
and publishes what is missing; requests that were in flight are still on the durable
consumers and get (re)delivered to the new agents. A run with a damaged log is not resumed
(the coordinator would re-derive its state from a history with a hole): the error names
where, and `accelopt replay RUN --valid-prefix` shows what is intact. A run another live
process still drives is refused (replay/runstate.py).
"""

from __future__ import annotations

import argparse

from cli.console import wide_console
from cli.options import NATS_HELP, RAY_HELP, ROOT_HELP, TIMEOUT_HELP, add_preflight_arg
from cli.session import execute


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("resume", help="continue a run after a crash, from its log")
    p.add_argument("run", help="run id")
    p.add_argument("--root", default="runs", help=ROOT_HELP)
    p.add_argument("--nats", help=NATS_HELP)
    p.add_argument("--ray-address", help=RAY_HELP)
    p.add_argument("--timeout", type=float, help=TIMEOUT_HELP)
    add_preflight_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from accelopt.config import recorded_config
    from cli.errors import error
    from events.runsource import LOG_DAMAGE, RunNotFound, fold_events
    from replay.fold import RunView
    from replay.states import run_driver

    console = wide_console()
    # folded as it is read, never held: the history of a long run is gigabytes as a list
    view = RunView(compact=True)
    driver = run_driver(args.root, args.run)
    if driver.lock == "held":
        return error(
            f"run {args.run} is being driven by a live process (its lock {args.root}/{args.run}/run.lock is "
            "held): nothing to resume"
        )
    try:
        n_events = fold_events(args.run, args.root, view.apply, nats_url=args.nats, prefer_stream=True)
    except RunNotFound as e:
        return error(str(e))
    except LOG_DAMAGE as e:
        return error(
            f"{e}; a run does not go on from a damaged log: `accelopt replay {args.run} --valid-prefix` shows "
            "what is intact"
        )
    started = view.started
    if started is None:
        return error(f"run {args.run} has no RunStarted: nothing to resume")
    if view.completed or view.failed:
        console.print(f"run {started.run_id} is already {view.status}; nothing to resume")
        return 0
    cfg = recorded_config(started.config)
    done = sum(p.kernels_profiled for p in view.problems.values())
    iteration = min((p.iterations[-1].iteration for p in view.problems.values() if p.iterations), default=0)
    problems = [t.problem for t in started.targets]
    devices = sorted({t.device for t in started.targets})
    console.print(
        f"resuming {started.run_id}: {n_events} events on the log, {done} kernels profiled, "
        f"{len(problems)} problem(s) after iteration {iteration}; starting its agents (profilers for "
        f"{', '.join(devices)}): the first new event comes once they are up, usually within a minute",
        highlight=False,
        soft_wrap=True,
    )
    return execute(
        console,
        cfg,
        problems,
        args,
        run_id=started.run_id,
        resume=True,
        started_event=started,
        devices=devices,
    )
