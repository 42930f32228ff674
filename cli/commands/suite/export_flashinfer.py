"""`accelopt suite export-flashinfer SUITE OUT`: a suite as a FlashInfer-Bench trace set."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from cli.errors import error


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export-flashinfer", help="write a suite as a FlashInfer-Bench trace-set folder")
    p.add_argument("suite", help="a suite name, or the path of a suite folder")
    p.add_argument("out", type=Path, help="the trace-set folder to write")
    p.add_argument("--author", help="author of the exported baselines (default: as in the suite)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from accelopt.problem import ProblemFileError
    from suites.flashinfer import export_problems, load_suite_dir
    from suites.flashinfer.recorded import suite_records

    console = Console()
    try:
        problems = load_suite_dir(args.suite)
        solutions, traces = suite_records(args.suite, problems)
    except (ProblemFileError, KeyError) as e:
        return error(str(e), 1)
    ts = export_problems(problems, args.out, author=args.author, traces=traces, solutions=solutions)
    for note in ts.notes:
        console.print(f"[yellow]note:[/yellow] {note}")
    console.print(
        f"wrote {len(ts.definitions)} definitions, {sum(map(len, ts.workloads.values()))} workloads and "
        f"{len(ts.solutions)} solutions and {len(ts.traces)} traces to {args.out}"
    )
    return 0
