"""`accelopt suite list [SUITE]`: the suites, or one suite's problems with shapes and work (SUITE:
a name, or the path of a suite folder)."""

from __future__ import annotations

import argparse

from rich.console import Console

import suites
from accelopt.problem import ProblemFileError
from cli.console import columns_table
from cli.errors import error
from hardware_agents.pipeline.device_spec import roofline_terms


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="list suites, or the problems of one suite")
    p.add_argument(
        "suite", nargs="?", help="a suite name or the path of a suite folder (default: all suites)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    console = Console()
    names = [args.suite] if args.suite else suites.list_suites()
    for name in names:
        try:
            info = suites.suite_info(name)
        except (KeyError, ProblemFileError) as e:
            return error(str(e.args[0] if e.args else e), 1)
        table = columns_table(
            f"suite {name}: {info.description} (device {info.device}, {info.language})",
            ("problem", "op type", "axes", "GFLOP", "min MiB", "inputs -> outputs"),
            right=("GFLOP", "min MiB"),
        )
        for prob in suites.load_suite(name):
            d = prob.definition
            terms = roofline_terms(prob) if d.x_roofline else None
            shapes = prob.input_shapes()
            outs = prob.output_shapes()
            io = ", ".join(f"{n}{list(s) if s else ''}" for n, s in shapes.items())
            io += " -> " + ", ".join(f"{n}{list(s) if s else ''}" for n, s in outs.items())
            table.add_row(
                f"{name}/{prob.name}",
                d.op_type,
                " ".join(f"{k}={v}" for k, v in prob.axis_values().items()),
                f"{(terms.flops_matmul + terms.flops_vector) / 1e9:.3f}" if terms else "-",
                f"{terms.bytes_min / 2**20:.1f}" if terms else "-",
                io,
            )
        console.print(table)
    return 0
