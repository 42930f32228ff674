"""`accelopt profile SUITE/PROBLEM [--solution FILE]`: profile the baseline or a given kernel."""

from __future__ import annotations

import argparse
from pathlib import Path

import msgspec
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from accelopt.problem import ProblemFileError, Solution, SourceFile, load_solution
from accelopt.profile import Profile


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="compile, check and time one kernel on its device")
    p.add_argument("problem", help="SUITE/PROBLEM, e.g. cpu/matmul or /path/to/suite/problem")
    p.add_argument(
        "--solution",
        type=Path,
        default=None,
        help="a Solution JSON, or a kernel source file (default: the suite's baseline)",
    )
    p.add_argument("--seeds", default="0,21,42", help="comma-separated correctness seeds")
    p.add_argument("--timeout", type=float, default=None, help="wall-clock limit of the kernel run, seconds")
    p.add_argument(
        "--cache-dir", type=Path, default=None, help="default: $ACCELOPT_CACHE_DIR or ~/.cache/accelopt"
    )
    p.add_argument("--json", action="store_true", help="print the Profile record as JSON")
    p.set_defaults(func=run)


def _solution(path: Path, baseline: Solution) -> Solution:
    if path.suffix == ".json":
        return load_solution(path)
    entry_file = baseline.spec.entry_point.split("::", 1)[0]
    return msgspec.structs.replace(
        baseline,
        name=path.stem,
        author="user",
        sources=[SourceFile(path=entry_file, content=path.read_text())],
        description=f"from {path}",
    )


def _error(console: Console, e: BaseException | str) -> None:
    """One error, as its message only (a KeyError's text without the quotes `str` adds)."""
    text = e if isinstance(e, str) else (str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e))
    console.print(text, style="red", markup=False, highlight=False, soft_wrap=True)


def render(problem_ref: str, prof: Profile) -> Table:
    from replay.render.profile import profile_facts

    table = Table(title=f"{problem_ref} on {prof.device}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    color = "green" if prof.status == "passed" else "red"
    for field, value in profile_facts(prof):
        if field in (
            "device",
            "toolchain",
            "isolation",
            "counters",
        ):  # the title names the device; the rest: --json
            continue
        table.add_row(field, f"[{color}]{value}[/{color}]" if field == "status" else escape(value))
    return table


def run(args: argparse.Namespace) -> int:
    import suites
    from accelopt.config import ConfigError
    from hardware_agents.base import get_agent
    from suites.selection import check_language

    console = Console()
    try:
        problem = suites.get_problem(args.problem)
        info = suites.suite_info(args.problem.rpartition("/")[0])  # split as suites.get_problem does
        solution = _solution(args.solution, problem.baseline) if args.solution else problem.baseline
    except (KeyError, ProblemFileError, OSError) as e:
        _error(console, e)  # the same mistake that `run` and `remeasure` refuse with 2
        return 2
    try:
        seeds = tuple(int(s) for s in args.seeds.split(",") if s.strip())
    except ValueError:
        _error(console, f"--seeds {args.seeds!r}: comma-separated integers expected")
        return 2
    try:  # a kernel language its device cannot run: refused as `run` refuses it
        check_language(f"problem {args.problem!r}", problem, info.device)
    except ConfigError as e:
        _error(console, e)
        return 2
    opts = {"cache_dir": args.cache_dir} if args.cache_dir else {}
    try:
        agent = get_agent(info.device, **opts)
    except (KeyError, RuntimeError, OSError, ValueError) as e:
        # the device cannot be profiled here (its SDK is missing, a simulated device without
        # the opt-in, ...): the agent's message says what to install or set
        _error(console, e)
        return 2
    try:
        with console.status(f"profiling {args.problem}..."):
            prof = agent.profile(problem, solution, seeds=seeds, timeout_s=args.timeout)
    finally:
        agent.close()
    if args.json:
        print(msgspec.json.format(msgspec.json.encode(prof), indent=2).decode())
    else:
        console.print(render(args.problem, prof))
        if prof.status != "passed" and prof.log:
            console.print(prof.log, markup=False, highlight=False)
    return 0 if prof.status == "passed" else 1
