"""`accelopt suite import-flashinfer PATH [--out DIR] [--name NAME] [--force] ...`: a FlashInfer-Bench
trace set as a suite that `accelopt run --suite NAME` (or `--suite DIR`) loads."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cli.errors import error

if TYPE_CHECKING:
    from suites.flashinfer import TraceSet


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import-flashinfer", help="import a FlashInfer-Bench trace-set folder as a suite")
    p.add_argument(
        "path", type=Path, help="the trace-set folder (definitions/, workloads/, solutions/, traces/)"
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="suite folder to write (default: the user suite dir / NAME, e.g. "
        "~/.local/share/accelopt/suites/flashinfer)",
    )
    p.add_argument(
        "--name", default=None, help="suite name (default: the --out folder's name, else flashinfer)"
    )
    p.add_argument("--force", action="store_true", help="replace an earlier import at the same place")
    p.add_argument("--device", default="h100", help="device kind the suite targets (default h100)")
    p.add_argument(
        "--workload",
        default="largest",
        help="the problem's workload: largest (default), smallest, first, or a workload uuid",
    )
    p.add_argument("--checks", type=int, default=2, help="smaller workloads also checked (interpreter tier)")
    p.add_argument("--baseline-author", default="baseline", help="author whose solution is the baseline")
    p.add_argument("--definitions", help="comma-separated definition names (default: all)")
    p.add_argument(
        "--skip-missing-blobs",
        action="store_true",
        help="drop workloads whose safetensors files are missing instead of failing",
    )
    p.add_argument(
        "--synthesize-indices",
        action="store_true",
        help="where a workload's index blobs (*_indptr, *_indices, *_last_page_len) are missing, "
        "synthesize valid index inputs per seed instead of failing (noted per definition)",
    )
    p.add_argument(
        "--synthesize-missing",
        action="store_true",
        help="where a workload's blobs are missing, synthesize every missing input: index inputs as "
        "with --synthesize-indices, any other at random in the range the definition allows (its "
        "x_input_init, else normal(0, 1) for floats; an integer input needs x_input_init); each "
        "synthesized input is listed",
    )
    p.add_argument(
        "--convention",
        choices=("auto", "value", "dps"),
        default="auto",
        help="calling convention of solutions whose file leaves destination_passing_style implicit: "
        "auto (default: what the entry function's signature or return statements show, else "
        "destination-passing), value (run(*inputs) returns the outputs), dps (run(*inputs, "
        "*outputs))",
    )
    p.add_argument(
        "--solution-convention",
        action="append",
        default=[],
        metavar="NAME=value|dps",
        help="the convention of one solution, over its file and --convention (repeatable)",
    )
    p.add_argument(
        "--solution-file",
        action="append",
        default=[],
        metavar="PATH",
        help="of solution files that share a name, keep this one (relative to the folder; repeatable). "
        "Without it the first whose file name does not mark it superseded (deprecated_..., ..._old) is "
        "kept; every file left out is listed with the reason",
    )
    p.add_argument(
        "--no-derived-checks",
        action="store_true",
        help="do not derive small check workloads from a definition's variable axes when the folder "
        "has none smaller than the problem's",
    )
    p.set_defaults(func=run)


def _print_skipped(console: Console, ts: TraceSet) -> None:
    """Every file (or line) of the folder left out of the import, with the reason."""
    for s in ts.skipped:
        console.print(f"[yellow]skipped[/yellow] {escape(s.path)}: {escape(s.reason)}", highlight=False)


def _solution_conventions(console: Console, items: list[str]) -> dict[str, str] | None:
    """`--solution-convention NAME=value|dps` as {NAME: convention}; None (after saying why) if bad."""
    per_solution: dict[str, str] = {}
    for item in items:
        name, sep, choice = item.partition("=")
        if not sep or choice not in ("value", "dps") or not name:
            error(f"--solution-convention {item!r}: write NAME=value or NAME=dps", label="import failed:")
            return None
        per_solution[name] = choice
    return per_solution


def _imported_table(title: str, problems: list) -> Table:
    table = Table(title=title)
    for col in ("problem", "workload", "check workloads", "baseline"):
        table.add_column(col)
    for p in problems:
        table.add_row(
            p.name,
            " ".join(f"{k}={v}" for k, v in p.workload.axes.items()),
            str(len(p.check_workloads)),
            f"{p.baseline.name} ({p.baseline.spec.language})",
        )
    return table


def run(args: argparse.Namespace) -> int:
    from accelopt.problem import ProblemFileError
    from suites.flashinfer import FlashInferImportError, TraceSet, problems_from, write_suite

    console = Console()
    ts = None
    per_solution = _solution_conventions(console, args.solution_convention)
    if per_solution is None:
        return 2
    try:
        ts = TraceSet.load(
            args.path,
            convention=args.convention,
            conventions=per_solution,
            solution_files=args.solution_file,
        )
        names = [n.strip() for n in args.definitions.split(",")] if args.definitions else None
        problems = problems_from(
            ts,
            workload=args.workload,
            checks=args.checks,
            baseline_author=args.baseline_author,
            skip_missing_blobs=args.skip_missing_blobs,
            synthesize_indices=args.synthesize_indices,
            synthesize_missing=args.synthesize_missing,
            derive_checks=not args.no_derived_checks,
            definitions=names,
            device=args.device,
        )
    except (FlashInferImportError, ProblemFileError) as e:
        if ts is not None:
            _print_skipped(console, ts)
        error(str(e), label="import failed:")
        usage = ("no definition named", "no solution named", "--solution-file", "device kind")
        return 2 if any(u in str(e) for u in usage) else 1
    if not problems:
        _print_skipped(console, ts)
        for n in ts.notes:
            console.print(f"  note: {n}", highlight=False, markup=False)
        return error("no problem to import", 1, label="import failed:")
    import suites
    from suites.flashinfer.recorded import recorded_of

    name = args.name or (args.out.resolve().name if args.out else "flashinfer")
    out = args.out or suites.user_suites_dir() / name
    try:
        write_suite(
            problems,
            out,
            name=name,
            device=args.device,
            overwrite=args.force,
            description=f"imported from the FlashInfer-Bench trace set {args.path}",
            recorded={p.name: recorded_of(ts.solutions.values(), ts.traces, p) for p in problems},
        )
    except FlashInferImportError as e:
        return error(str(e), 1, label="import failed:")
    console.print(_imported_table(f"suite {name} ({len(problems)} problems) in {out}", problems))
    _print_skipped(console, ts)
    for note in ts.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}", highlight=False)
    console.print(
        f"read {len(ts.definitions)} definitions, {sum(map(len, ts.workloads.values()))} workloads, "
        f"{len(ts.solutions)} solutions, {len(ts.traces)} traces; skipped {len(ts.skipped)} file(s)"
    )
    where = name if out.parent == suites.user_suites_dir() else out
    console.print(f"run it with: accelopt run --suite {where} --device {args.device}", highlight=False)
    return 0
