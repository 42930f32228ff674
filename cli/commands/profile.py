"""`accelopt profile SUITE/PROBLEM [--solution FILE] [--convention auto|value|dps]`: profile the
baseline or a given kernel.

Exit codes (EXIT_CODES) keep a correct kernel apart from a failed one on every host:
0 passed (correct and timed), 3 unmeasured (correct, not timed: the best a host without the
device gives), 1 the kernel failed (compile_error, runtime_error, incorrect, timeout,
timing_mismatch; reason no_triton_launch is incorrect), 4 not checked here (unchecked: too large for this host's
checker; sandbox_error: the isolation could not be applied), 2 the command could not profile
(a bad argument, a problem or solution file, a reference that fails)."""

from __future__ import annotations

import argparse
from pathlib import Path

import msgspec
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from accelopt.problem import Problem, ProblemFileError, Solution, SourceFile, load_solution
from accelopt.profile import KERNEL_FAILURES, Profile

EXIT_CODES = {"passed": 0, "unmeasured": 3, "unchecked": 4, "sandbox_error": 4}
EXIT_KERNEL_FAILED = 1
EXIT_CANNOT_PROFILE = 2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="compile, check and time one kernel on its device")
    p.add_argument("problem", help="SUITE/PROBLEM, e.g. cpu/matmul or /path/to/suite/problem")
    p.add_argument(
        "--solution",
        type=Path,
        default=None,
        help="a Solution JSON, or a kernel source file (default: the suite's baseline)",
    )
    p.add_argument(
        "--convention",
        choices=("auto", "value", "dps"),
        default="auto",
        help="calling convention of a --solution whose file leaves it implicit (a FlashInfer-Bench "
        "solution.json without destination_passing_style, or a kernel source): auto (default: what "
        "its entry function's signature or return statements show, as import-flashinfer detects "
        "it; else the solution file's default, destination-passing, or for a source the baseline's), "
        "value (run(*inputs) returns the outputs) or dps (run(*inputs, *outputs))",
    )
    p.add_argument("--seeds", default="0,21,42", help="comma-separated correctness seeds")
    p.add_argument("--timeout", type=float, default=None, help="wall-clock limit of the kernel run, seconds")
    p.add_argument(
        "--cache-dir", type=Path, default=None, help="default: $ACCELOPT_CACHE_DIR or ~/.cache/accelopt"
    )
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an option of the device's agent, as `devices.<kind>.options` takes it in a run config "
        "(VALUE is YAML: 4, 0.5, null, true), e.g. max_reruns=4; repeatable",
    )
    p.add_argument("--json", action="store_true", help="print the Profile record as JSON")
    p.set_defaults(func=run)


def agent_options(device: str, pairs: list[str]) -> dict[str, object]:
    """`--option NAME=VALUE`s as the agent's keyword options, each checked against what the
    device's family declares (ValueError: one line naming the option)."""
    import yaml

    from hardware_agents.families import family_of

    out: dict[str, object] = {}
    for pair in pairs:
        name, eq, raw = pair.partition("=")
        if not eq or not name.strip():
            raise ValueError(f"--option {pair!r}: NAME=VALUE expected")
        try:
            out[name.strip()] = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError as e:
            raise ValueError(f"--option {pair!r}: the value is not YAML ({type(e).__name__})") from None
    family = family_of(device)
    errors = family.option_errors(device, out) if family is not None else []
    if errors:
        raise ValueError(errors[0].replace(f"devices.{device}.options.", "--option ", 1))
    return out


def _solution(path: Path, problem: Problem, convention: str) -> tuple[Solution, str]:
    """The solution to profile and how its calling convention was decided (for the output):
    a Solution JSON (a FlashInfer-Bench one may leave `destination_passing_style` out), or a
    kernel source that takes the baseline's place."""
    import json

    from suites.flashinfer.traceset import infer_destination_passing

    baseline = problem.baseline
    if path.suffix == ".json":
        sol = load_solution(path)
        try:
            raw = json.loads(path.read_text())
        except ValueError as e:  # load_solution read it; a file changed since is an error too
            raise ProblemFileError(f"{path}: {e}") from e
        explicit = "destination_passing_style" in (raw.get("spec") or {})
        if explicit:
            return sol, "as its file says"
        default = "the file's default (FlashInfer-Bench's: destination-passing)"
    else:
        entry_file = baseline.spec.entry_point.split("::", 1)[0]
        sol = msgspec.structs.replace(
            baseline,
            name=path.stem,
            author="user",
            sources=[SourceFile(path=entry_file, content=path.read_text())],
            description=f"from {path}",
        )
        default = "the baseline's"
    if sol.spec.language not in ("python", "triton"):  # C, NKI: the suite's own convention
        return sol, ""
    if convention != "auto":
        dps, how = convention == "dps", f"--convention {convention}"
    else:
        inferred = infer_destination_passing(sol, problem.definition)
        dps = sol.spec.destination_passing_style if inferred is None else inferred
        how = default if inferred is None else "by its entry function (--convention auto)"
    spec = msgspec.structs.replace(sol.spec, destination_passing_style=dps)
    return msgspec.structs.replace(sol, spec=spec), how


def exit_code(status: str) -> int:
    """The exit code of a profile's status (see the module doc)."""
    if status in EXIT_CODES:
        return EXIT_CODES[status]
    return EXIT_KERNEL_FAILED if status in KERNEL_FAILURES else EXIT_CANNOT_PROFILE


def _error(console: Console, e: BaseException | str) -> None:
    """One error on stderr (cli/errors.py), as its message only (a KeyError's text without the
    quotes `str` adds)."""
    from cli.errors import error

    text = e if isinstance(e, str) else (str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e))
    error(text)


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
    from hardware_agents.families import get_agent
    from suites.selection import check_language

    console = Console()
    try:
        problem = suites.get_problem(args.problem)
        info = suites.suite_info(args.problem.rpartition("/")[0])  # split as suites.get_problem does
        solution, how = (
            _solution(args.solution, problem, args.convention) if args.solution else (problem.baseline, "")
        )
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
    try:
        opts = agent_options(info.device, args.option)
    except ValueError as e:
        _error(console, e)
        return 2
    if args.cache_dir:
        opts["cache_dir"] = args.cache_dir
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
    except ProblemFileError as e:  # the problem's side failed (its reference, its data): not the kernel
        if args.json:
            print(msgspec.json.format(msgspec.json.encode({"error": str(e)}), indent=2).decode())
        else:
            _error(console, e)
        return EXIT_CANNOT_PROFILE
    finally:
        agent.close()
    if args.json:
        print(msgspec.json.format(msgspec.json.encode(prof), indent=2).decode())
    else:
        if how:
            conv = "destination-passing" if solution.spec.destination_passing_style else "value-returning"
            console.print(f"{args.solution}: {conv} ({how})", markup=False, highlight=False)
        console.print(render(args.problem, prof))
        if prof.status != "passed" and prof.log:
            console.print(prof.log, markup=False, highlight=False)
    return exit_code(prof.status)
