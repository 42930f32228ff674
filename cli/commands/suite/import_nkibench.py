"""`accelopt suite import-nkibench PATH [--out DIR] [--name NAME] [--device trn1|trn2] [--force]`:
read an NKIBench folder (summary.json, seeds, reference modules, NKI kernels) and write it as
a suite that `accelopt run --suite NAME` (or `--suite DIR`) loads."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from cli.console import columns_table
from cli.errors import error


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import-nkibench", help="import an NKIBench folder (summary.json) as a suite")
    p.add_argument("path", type=Path, help="the NKIBench folder (holds summary.json)")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="suite folder to write (default: the user suite dir / NAME, e.g. "
        "~/.local/share/accelopt/suites/nkibench)",
    )
    p.add_argument(
        "--name", default="nkibench", help="suite name (default nkibench, the `nki` preset's suite)"
    )
    p.add_argument(
        "--device", default="trn1", choices=("trn1", "trn2"), help="the suite's default device kind"
    )
    p.add_argument("--force", action="store_true", help="replace an earlier import at the same place")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import suites
    from hardware_agents.pipeline.device_spec import roofline_terms
    from suites.nkibench import NkibenchError, import_nkibench

    console = Console()
    try:
        report = import_nkibench(
            args.path, args.out, name=args.name, device=args.device, overwrite=args.force
        )
    except NkibenchError as e:
        return error(str(e), 1, label="import failed:")
    by_name = {p.name: p for p in suites.load_suite(report.out)}
    table = columns_table(
        f"suite {report.suite}: {len(report.problems)} problem(s) from {report.source}",
        ("problem", "case", "axes", "GFLOP mm / vec", "min MiB", "notes"),
        right=("GFLOP mm / vec", "min MiB"),
    )
    for s in report.problems:
        terms = roofline_terms(by_name[s.folder])
        table.add_row(
            s.folder,
            s.case,
            " ".join(f"{k}={v}" for k, v in s.axes.items()),
            f"{terms.flops_matmul / 1e9:.2f} / {terms.flops_vector / 1e9:.3f}",
            f"{terms.bytes_min / 2**20:.1f}",
            "; ".join(s.notes) or ("" if s.known else "unknown problem"),
        )
    console.print(table)
    where = report.suite if Path(report.out).parent == suites.user_suites_dir() else report.out
    console.print(
        f"written to {report.out}\nrun it with: accelopt run --suite {where} --device {report.device}",
        highlight=False,
    )
    return 0
