"""`accelopt run`: optimize a suite's problems with the AccelOpt loop."""

from __future__ import annotations

import argparse

from accelopt.config import problem_refs, target_devices
from cli.console import wide_console
from cli.options import TIMEOUT_HELP, add_config_args, config_and_problems
from cli.session import execute


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="optimize a suite's problems with the AccelOpt loop")
    p.add_argument("--suite", help="problem suite (default cpu)")
    p.add_argument(
        "--problems",
        help="comma-separated problems: NAME (of --suite, on --device), SUITE/NAME or "
        "SUITE/NAME@DEVICE (default: all of the suite)",
    )
    p.add_argument("--device", help="device kind to optimize for (default cpu)")
    p.add_argument("--timeout", type=float, help=TIMEOUT_HELP)
    add_config_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    console = wide_console()
    loaded = config_and_problems(console, args)
    if loaded is None:
        return 2
    cfg, problems = loaded
    suite_names = sorted({r.suite for r in problem_refs(cfg)}) or [cfg.suite]
    devices = sorted(set(target_devices(cfg, [p.name for p in problems]).values()))
    console.print(
        f"optimizing {len(problems)} problem(s) of suite{'s' if len(suite_names) > 1 else ''} "
        f"[bold]{', '.join(suite_names)}[/bold] on {', '.join(devices)}: preset {args.preset}, "
        f"B={cfg.search.beam_width} N={cfg.search.plans_per_candidate} K={cfg.search.samples_per_plan} "
        f"T={cfg.search.iterations}, model {cfg.llm.for_role('planner').model}"
    )
    return execute(console, cfg, problems, args)
