"""`accelopt remeasure RUN [--device KIND]`: re-profile a run's best kernels.

RUN is a run id under --root, a run directory or an exported `.aolog` file; everything
(problems, baseline and best kernels, what was recorded) comes from the exported log. Per
problem the best kernel (with --all-kernels: every kernel that passed) and its baseline are
profiled again on fresh correctness seeds, in interleaved rounds (baseline, kernel, ...;
the order reversed every other round) so both sides see the same machine conditions; each
side's latency is the median of its rounds' medians, and the speedup is their ratio. The
result is printed (a table, or JSON with --json) and saved as
`remeasure-<device>-<timestamp>.json` in the run directory. Each problem is profiled on its
device kind in the run (or all on --device); a run on several kinds gives one table, JSON
line and file per kind. A kernel that no longer passes (compile error, incorrect, ...) is
shown with its status and the first line of its log, and the command exits 1; a missing
run, log, problem or device kind exits 2.

A run already re-measures each problem's baseline and best this way when the problem ends
(the coordinator's `ProblemRemeasured`, on the run's log, with its interleaved rounds as
`ProfileRequested` of purpose "remeasure" issued one at a time; `search.remeasure_rounds`),
and its results table reports that figure. This command does it again later: after the
machine changed, with more rounds, for every kernel (--all-kernels), or on another device.
It profiles in-process on the device's hardware agent (`actors/runtime/kernel_remeasure.py`
re-measures; this module parses and prints), so the device must be usable on this machine
(the local CPU, or a GPU/Neuron device attached here).
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from typing import TYPE_CHECKING

import msgspec
from rich.console import Console
from rich.status import Status
from rich.table import Table

from actors.runtime.kernel_remeasure import (
    FAILED,
    RemeasureError,
    RemeasureRecord,
    RemeasureRow,
    device_groups,
    fresh_seed_base,
    load_run,
    remeasure_group,
    save_record,
)
from cli.errors import error
from cli.options import ROOT_HELP
from replay.summary import geomean

if TYPE_CHECKING:
    from hardware_agents.base import HardwareAgent


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "remeasure", help="re-profile a run's best kernels and their baselines (on another device)"
    )
    p.add_argument("run", help="run id (under --root), run directory or exported .aolog file")
    p.add_argument("--device", help="device kind to profile on (default: each problem's device in the run)")
    p.add_argument("--problems", help="comma-separated problems of the run (default: all)")
    p.add_argument(
        "--rounds", type=int, default=3, help="interleaved rounds; the median per side is reported"
    )
    p.add_argument("--all-kernels", action="store_true", help="every kernel that passed, not only the best")
    p.add_argument("--seed", type=int, help="base of the fresh correctness seeds (default: random)")
    p.add_argument("--json", action="store_true", help="print the result as JSON instead of a table")
    p.add_argument("--root", default="runs", help=ROOT_HELP)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cli.console import wide_console

    out = Console(stderr=True) if args.json else wide_console()
    if args.rounds < 1:
        return error("--rounds must be at least 1")
    problems = [n.strip() for n in args.problems.split(",") if n.strip()] if args.problems else None
    try:
        log_path, view = load_run(args.run, args.root)
        groups = device_groups(view, problems, args.device)
    except RemeasureError as e:
        return error(str(e))

    from hardware_agents.families import get_agent

    agents: dict[str, HardwareAgent] = {}
    try:
        for device in groups:
            try:
                agents[device] = get_agent(device)
            except KeyError as e:
                return error(str(e.args[0]))
            except Exception as e:
                return error(f"device {device!r} is not usable here: {e}")
        base_seed = args.seed if args.seed is not None else fresh_seed_base()
        ok = True
        for device, group in groups.items():
            with out.status(f"re-measuring {len(group)} problem(s) of {view.run_id} on {device}") as status:
                record = remeasure_group(
                    view,
                    group,
                    agents[device],
                    device,
                    rounds=args.rounds,
                    all_kernels=args.all_kernels,
                    base_seed=base_seed,
                    progress=partial(_say, status),
                )
            ok = ok and record.ok
            path = save_record(record, log_path.parent)
            if args.json:
                sys.stdout.write(msgspec.json.encode(record).decode() + "\n")
            else:
                out.print(table(record))
                print_failures(out, record.rows)
            out.print(f"saved to {path}")
    finally:
        for agent in agents.values():
            agent.close()
    return 0 if ok else 1


def _say(status: Status, text: str) -> None:
    status.update(f"re-measuring {text}")


def print_failures(out: Console, rows: list[RemeasureRow]) -> None:
    """Each failing kernel (and failing baseline, once per problem) with its first log line."""
    said: set[str] = set()
    for r in rows:
        failures = []
        if r.status not in ("passed", "unmeasured") and not r.status.startswith("baseline"):
            failures.append((f"{r.problem} {r.kernel_id[:12]}", r.status.split(",")[0], r.log_head))
        if r.baseline_status in FAILED and r.problem not in said:
            said.add(r.problem)
            failures.append((f"{r.problem} baseline", r.baseline_status, r.baseline_log_head))
        for who, status, head in failures:
            out.print(f"[red]{who}: {status}:[/red] ", end="")
            out.print(head or "(no log)", markup=False, highlight=False)


def _ms(x: float | None) -> str:
    return f"{x:.4g}" if x is not None else "-"


def _x(x: float | None) -> str:
    return f"{x:.2f}x" if x is not None else "-"


def _pct(x: float | None) -> str:
    return f"{x:.1%}" if x is not None else "-"


def table(record: RemeasureRecord) -> Table:
    t = Table(
        title=f"run {record.run_id} re-measured on {record.device} "
        f"({record.rounds} interleaved round{'s' if record.rounds != 1 else ''}, median; "
        f"recorded on {record.run_device})"
    )
    t.add_column("problem")
    if record.all_kernels:
        t.add_column("kernel", no_wrap=True)
    for col in (
        "recorded\nbaseline ms",
        "recorded\nbest ms",
        "recorded\nspeedup",
        "re-measured\nbaseline ms",
        "re-measured\nbest ms",
        "re-measured\nspeedup",
        "re-measured\n% of peak",
    ):
        t.add_column(col, justify="right")
    t.add_column("status")
    for r in record.rows:
        color = "green" if r.status == "passed" else "yellow" if r.status == "unmeasured" else "red"
        cells = [r.problem]
        if record.all_kernels:
            cells.append(f"{r.kernel_id[:8]} it{r.iteration}" + (" best" if r.best else ""))
        cells += [
            _ms(r.recorded_baseline_ms),
            _ms(r.recorded_ms),
            _x(r.recorded_speedup),
            _ms(r.baseline_ms),
            _ms(r.ms),
            _x(r.speedup),
            _pct(r.peak_fraction),
            f"[{color}]{r.status}[/{color}]",
        ]
        t.add_row(*cells)
    best = [r for r in record.rows if r.best]
    if len(best) > 1:
        t.add_section()
        cells = ["geomean"] + ([""] if record.all_kernels else [])

        def every(values: list[float | None]) -> float | None:
            return geomean(values, strict=True)

        cells += [
            "",
            "",
            _x(every([r.recorded_speedup for r in best])),
            "",
            "",
            _x(every([r.speedup for r in best])),
            _pct(every([r.peak_fraction for r in best])),
            "",
        ]
        t.add_row(*cells)
    return t
