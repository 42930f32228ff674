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

It profiles in-process, a reader of the run's exported log: the device's hardware agent
comes from its device family (`hardware_agents.families.get_agent`) and runs each kernel in its
sandbox with the solution and seeds the profiler actor would build
(`actors.roles.profiler.kernel_solution`/`offset_seeds`), but without the event log, Ray or a
coordinator: the log is a finished file and nothing here is a decision of the run. The
device must be usable on this machine (the local CPU, or a GPU/Neuron device attached here).
`measure_interleaved` drives the interleaved re-measure's protocol (`accelopt.remeasure`, the
one a run's own re-measure follows) on an agent in-process (also used by the MCP server's
compare_kernels and the benchmarks).
"""

from __future__ import annotations

import argparse
import secrets
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
from rich.console import Console
from rich.table import Table

from accelopt.catalog import RemeasuredSide
from accelopt.profile import KERNEL_FAILURES, Profile
from accelopt.remeasure import Remeasure, Slot, drive, round_seeds, speedup
from cli.errors import error
from replay.summary import geomean

if TYPE_CHECKING:
    from hardware_agents.base import HardwareAgent
    from replay.fold import RunView

FAILED = KERNEL_FAILURES | {"sandbox_error", "unchecked"}


# one kernel re-profiled over the rounds (stopped at its first profile without a time)
KernelMeasure = RemeasuredSide


class RemeasureRow(msgspec.Struct, kw_only=True, omit_defaults=True):
    problem: str
    kernel_id: str
    iteration: int
    best: bool
    recorded_baseline_ms: float | None = None
    recorded_ms: float | None = None
    recorded_speedup: float | None = None
    recorded_pct_peak: float | None = None
    baseline_ms: float | None = None
    ms: float | None = None
    speedup: float | None = None
    peak_fraction: float | None = msgspec.field(default=None, name="pct_peak")
    baseline_rounds_ms: list[float] = []
    rounds_ms: list[float] = []
    status: str = "passed"  # passed, unmeasured, the kernel's failure, and/or "baseline <failure>"
    log_head: str = ""  # the first line of the failing kernel's log (else of the failing baseline's)
    baseline_status: str = "passed"
    baseline_log_head: str = ""


class RemeasureRecord(msgspec.Struct, kw_only=True):
    run_id: str
    run_device: str
    device: str
    created: str
    rounds: int
    seeds: list[list[int]]  # per round
    all_kernels: bool
    toolchain: dict[str, str]
    rows: list[RemeasureRow]
    ok: bool


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
    p.add_argument("--root", default="runs", help="runs directory (default ./runs)")
    p.set_defaults(func=run)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def run(args: argparse.Namespace) -> int:
    from cli.console import wide_console

    out = Console(stderr=True) if args.json else wide_console()
    if args.rounds < 1:
        return error("--rounds must be at least 1")
    loaded = _load_run(out, args)
    if loaded is None:
        return 2
    log_path, view = loaded
    groups = _device_groups(out, args, view)
    if groups is None:
        return 2

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
        base_seed = args.seed if args.seed is not None else 1_000_000 + secrets.randbelow(1_000_000_000)
        ok = True
        for device, group in groups.items():
            record = _remeasure_group(out, args, view, agents[device], device, group, base_seed)
            ok = ok and record.ok
            path = log_path.parent / f"remeasure-{device}-{time.strftime('%Y%m%d-%H%M%S')}.json"
            path.write_bytes(msgspec.json.format(msgspec.json.encode(record), indent=2) + b"\n")
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


def _load_run(out: Console, args: argparse.Namespace) -> tuple[Path, RunView] | None:
    """The run's exported log and its fold; None (after saying why) without a usable one."""
    from events.logfile import LogFileError
    from events.runsource import run_log_path
    from replay.runs import fold_file

    log_path = run_log_path(args.run, args.root)
    if log_path is None:
        where = Path(args.run) if Path(args.run).is_dir() else Path(args.root) / args.run
        error(
            f"run {args.run!r}: no exported log ({where / 'log.aolog'} does not exist); remeasure "
            "reads a run's exported log (a run exports it when it ends)"
        )
        return None
    try:
        view = fold_file(log_path)
    except (LogFileError, ValueError, OSError) as e:
        error(f"{log_path}: {e}")
        return None
    if view.started is None:
        error(f"{log_path}: the log has no RunStarted")
        return None
    return log_path, view


def _device_groups(out: Console, args: argparse.Namespace, view: RunView) -> dict[str, list[str]] | None:
    """The problems to re-measure by the device kind they are re-measured on: each problem on
    its own (a run may target several), or all on `--device`. None (after saying why) for a
    problem the run does not have, or one without its baseline in the log."""
    assert view.started is not None
    targets = {t.problem.name: t for t in view.started.targets}
    names = sorted(targets)
    if args.problems:
        names = [n.strip() for n in args.problems.split(",") if n.strip()]
        missing = [n for n in names if n not in targets]
        if missing:
            error(
                f"problems not in run {view.run_id}: {', '.join(missing)}; the run has: {', '.join(sorted(targets))}"
            )
            return None
    no_base = [n for n in names if view.problems[n].baseline_id not in view.kernels]
    if no_base:
        error(f"run {view.run_id}: no baseline kernel in the log for {', '.join(no_base)}")
        return None
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(args.device or targets[n].device, []).append(n)
    if not groups:
        groups[args.device or view.settings.device] = []
    return groups


def _remeasure_group(
    out: Console,
    args: argparse.Namespace,
    view: RunView,
    agent: HardwareAgent,
    device: str,
    group: list[str],
    base_seed: int,
) -> RemeasureRecord:
    """Re-measure `group`'s problems on `device` in interleaved rounds: the record saved and shown."""
    from hardware_agents.families import profile_timeout_s

    assert view.started is not None
    run_device = (
        ",".join(sorted({t.device for t in view.started.targets if t.problem.name in group})) or device
    )
    with out.status(f"re-measuring {len(group)} problem(s) of {view.run_id} on {device}") as status:
        rows, seeds = remeasure_view(
            view,
            group,
            agent,
            device,
            rounds=args.rounds,
            all_kernels=args.all_kernels,
            base_seed=base_seed,
            timeout_s=profile_timeout_s(device, view.settings.profiling),
            progress=lambda text, status=status: status.update(f"re-measuring {text}"),
        )
    return RemeasureRecord(
        run_id=view.run_id or "",
        run_device=run_device,
        device=device,
        created=time.strftime("%Y-%m-%dT%H:%M:%S"),
        rounds=args.rounds,
        seeds=seeds,
        all_kernels=args.all_kernels,
        toolchain=agent.toolchain(),
        rows=rows,
        ok=all(r.status == "passed" or r.status == "unmeasured" for r in rows),
    )


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


def _kernels_to_measure(view, problem: str, all_kernels: bool) -> list:
    """The problem's best kernel (the baseline if nothing beat it), or with `all_kernels`
    every kernel that passed, one per distinct source, in the order they were proposed."""
    p = view.problems[problem]
    base = view.kernels.get(p.baseline_id or "")
    best = view.kernels.get(p.best_id or "") or base
    if not all_kernels or base is None:
        return [best] if best is not None else []
    out, seen = ([base] if best is base else []), {base.source}
    for kid in p.kernel_ids:
        k = view.kernels[kid]
        if best is not None and k.source == best.source:
            k = best  # of identical sources, the best kernel stands for them
        if k.passed and k.source not in seen:
            seen.add(k.source)
            out.append(k)
    if best is not None and best.source not in {k.source for k in out} and best is not base:
        out.append(best)
    return out or [base]


def measure_interleaved(
    agent,
    problem,
    kernels: list[tuple[str, str, str]],
    *,
    device: str,
    run_id: str = "",
    rounds: int,
    base_seed: int,
    timeout_s: float | None,
    progress=None,
) -> list[RemeasuredSide]:
    """Profile `kernels` ((kernel id, language, source), the baseline first) on `agent` in
    the interleaved re-measure (`accelopt.remeasure`, every side to its own status): round r
    on the fresh seeds of `round_seeds(base_seed, rounds)[r]`. A side that passed without a
    time says `unmeasured`. `progress(text)` is told what is being profiled; `run_id` names
    nothing here (callers pass the run they re-measure)."""
    from actors.roles.profiler import kernel_solution, offset_seeds

    def profile(slot: Slot) -> Profile:
        kid, language, source = kernels[slot.side]
        if progress is not None:
            what = "baseline" if slot.side == 0 else f"kernel {kid[:12]}"
            progress(f"{problem.name}: {what}, round {slot.round + 1}/{rounds} on {device}")
        return agent.profile(
            problem,
            kernel_solution(problem.name, kid, language, source, problem.baseline),
            seeds=offset_seeds(slot.seed_offset),
            timeout_s=timeout_s,
        )

    protocol = drive(Remeasure(len(kernels), rounds, base_seed, every_side=True), profile)
    return [
        msgspec.structs.replace(m, status="unmeasured") if m.status == "passed" and m.median_ms is None else m
        for m in protocol.results([kid for kid, _, _ in kernels])
    ]


def remeasure_view(
    view,
    problems: list[str],
    agent,
    device: str,
    *,
    rounds: int,
    all_kernels: bool,
    base_seed: int,
    timeout_s: float,
    progress=None,
) -> tuple[list[RemeasureRow], list[list[int]]]:
    """Re-profile each problem's baseline and kernels in interleaved rounds on `agent`.

    Every problem must have its baseline kernel in the view. `progress(text)` is told what
    is being profiled."""
    from actors.roles.profiler import offset_seeds

    assert view.started is not None
    targets = {t.problem.name: t for t in view.started.targets}
    run_id = view.run_id or ""
    seeds = [list(offset_seeds(offset)) for offset in round_seeds(base_seed, rounds)]
    rows: list[RemeasureRow] = []
    for name in problems:
        target = targets[name]
        pv = view.problems[name]
        base = view.kernels[pv.baseline_id]
        best_id = pv.best_id or base.kernel_id
        kernels = _kernels_to_measure(view, name, all_kernels)
        # the baseline first, then each kernel whose source differs from it
        sides = [base] + [k for k in kernels if k.source != base.source]
        measured = measure_interleaved(
            agent,
            target.problem,
            [(k.kernel_id, k.language, k.source) for k in sides],
            device=device,
            run_id=run_id,
            rounds=rounds,
            base_seed=base_seed,
            timeout_s=timeout_s,
            progress=progress,
        )
        measures = {k.kernel_id: m for k, m in zip(sides, measured, strict=True)}
        bm = measures[base.kernel_id]
        for k in kernels:
            km = bm if k.source == base.source else measures[k.kernel_id]
            status, log_head = km.status, km.log_head
            if bm.status in FAILED and km is not bm:
                if status in FAILED:
                    status = f"{status}, baseline {bm.status}"
                else:
                    status, log_head = f"baseline {bm.status}", bm.log_head
            rows.append(
                RemeasureRow(
                    problem=name,
                    kernel_id=k.kernel_id,
                    iteration=k.iteration,
                    best=k.kernel_id == best_id,
                    recorded_baseline_ms=base.latency_ms,
                    recorded_ms=k.latency_ms,
                    recorded_speedup=_ratio(base.latency_ms, k.latency_ms),
                    recorded_pct_peak=k.peak_fraction,
                    baseline_ms=bm.median_ms,
                    ms=km.median_ms,
                    speedup=speedup(bm, km),
                    peak_fraction=km.peak_fraction if km.status == "passed" else None,
                    baseline_rounds_ms=list(bm.rounds_ms),
                    rounds_ms=list(km.rounds_ms),
                    status=status,
                    log_head=log_head,
                    baseline_status=bm.status,
                    baseline_log_head=bm.log_head,
                )
            )
    return rows, seeds


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
