"""`accelopt calibrate [--force] [--quick] [--device KIND]`: measure (once) and print this
machine's peaks of a device kind whose family measures them (`DeviceFamily.calibrate`: the
CPU's; other kinds' peaks are cited)."""

from __future__ import annotations

import argparse
from pathlib import Path

import msgspec
from rich.console import Console
from rich.table import Table

from cli.errors import error


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="measure and cache the CPU roofline peaks (bandwidth, sgemm, FMA)")
    p.add_argument("--force", action="store_true", help="measure again even if a calibration is cached")
    p.add_argument(
        "--quick", action="store_true", help="a ~2 s measurement (for tests), kept apart from the full one"
    )
    p.add_argument(
        "--cache-dir", type=Path, default=None, help="default: $ACCELOPT_CACHE_DIR or ~/.cache/accelopt"
    )
    p.add_argument("--device", default="cpu", help="the device kind whose peaks to measure (default cpu)")
    p.add_argument("--json", action="store_true", help="print the calibration record as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hardware_agents.families import family_of, unknown_kind
    from hardware_agents.family import CalibrationError

    console = Console()
    family = family_of(args.device)
    if family is None or family.calibrate is None:
        why = (
            unknown_kind(args.device)
            if family is None
            else f"the peaks of {args.device!r} are cited, not measured"
        )
        return error(why)
    try:
        with console.status(f"measuring the {args.device} peaks (bandwidth, matmul, vector)..."):
            rec = family.calibrate(args.cache_dir, args.force, args.quick)
    except CalibrationError as e:
        return error(str(e), 1)
    if args.json:
        print(msgspec.json.format(msgspec.json.encode(rec.record), indent=2).decode())
        return 0
    s = rec.spec
    table = Table(title=f"{s.name}: {'quick' if rec.quick else 'full'} calibration of {rec.created}")
    table.add_column("roof")
    table.add_column("peak", justify="right")
    table.add_row("memory bandwidth (DRAM)", f"{s.peak_bw_bytes_s / 1e9:.1f} GB/s")
    table.add_row("matmul (sgemm)", f"{s.peak_matmul_flops / 1e9:.1f} GFLOP/s")
    table.add_row("vector (FMA)", f"{s.peak_vector_flops / 1e9:.1f} GFLOP/s")
    for p in s.bw_curve:
        table.add_row(
            f"  triad, working set {p.working_set_bytes / 2**20:.2f} MiB", f"{p.bytes_per_s / 1e9:.1f} GB/s"
        )
    console.print(table)
    console.print(f"cached in {rec.cached_at} (measured in {rec.seconds:.1f} s)")
    for warning in rec.warnings:
        console.print(f"[yellow]{warning}[/yellow]")
    return 0
