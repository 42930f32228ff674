"""`accelopt demo` (what `make demo` runs): the main job on embedded defaults.

A `quick` optimization run on three problems of the CPU suite with the offline
`builtin/tuner` model: an embedded NATS JetStream server, a local Ray, a local LanceDB
memory under `./runs`, real compiled and sandboxed kernels. Every `accelopt run` flag
applies (`--problems`, `--preset`, `--model`, `--set ...`). It ends with the results
table and the commands that look into the run it just made.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from accelopt.commands.run import add_config_args, config_and_problems, execute, wide_console

# an elementwise, a fused normalization + matmul, and a matmul problem
DEMO_PROBLEMS = "silu,rmsnorm_matmul,transpose_matmul"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="a quick optimization run on 3 CPU problems with the offline builtin/tuner model")
    p.add_argument("--problems", default=DEMO_PROBLEMS, help=f"comma-separated CPU problems (default {DEMO_PROBLEMS})")
    p.add_argument("--timeout", type=float, help="give up after this many seconds")
    add_config_args(p)
    p.set_defaults(func=run, suite="cpu", device=None)


def run(args: argparse.Namespace) -> int:
    console = wide_console()
    args.preset = args.preset or "quick"
    loaded = config_and_problems(console, args)
    if loaded is None:
        return 2
    cfg, problems = loaded
    s = cfg.search
    console.print(f"[bold]AccelOpt demo[/bold]: {len(problems)} CPU problems ({', '.join(p.name for p in problems)}), "
                  f"preset {args.preset} (B={s.beam_width} N={s.plans_per_candidate} K={s.samples_per_plan} "
                  f"T={s.iterations}), model {cfg.llm.for_role('planner').model}; runs go to {cfg.root}/")
    before = set(_run_dirs(cfg.root))
    code = execute(console, cfg, problems, args)
    made = sorted(set(_run_dirs(cfg.root)) - before)
    if made:
        run_id = made[-1].name
        root = "" if cfg.root == "runs" else f" --root {cfg.root}"
        console.print("\nlook into it:")
        for cmd in (f"accelopt runs{root}", f"accelopt replay {run_id} --verify{root}",
                    f"accelopt report {run_id}{root}", f"accelopt remeasure {run_id}{root}",
                    f"accelopt memory list --uri {cfg.memory.uri or Path(cfg.root) / 'memory'}"):
            console.print(f"  {cmd}", highlight=False)
    return code


def _run_dirs(root: str) -> list[Path]:
    return [p.parent for p in Path(root).glob("*/config.json")]
