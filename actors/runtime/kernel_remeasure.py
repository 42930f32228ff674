"""Kernels re-measured in-process on a hardware agent, by the interleaved re-measure protocol
(`accelopt/remeasure.py`, the one a run's own end-of-problem re-measure follows): any kernels
of a problem (`measure_interleaved`: the MCP server's compare_kernels, the benchmarks), or a
recorded run's baselines and best kernels read from its exported log (`remeasure_group`:
`accelopt remeasure`, which prints and saves the record).

Each kernel runs in the agent's sandbox with the solution and seeds the profiler actor would
build (`actors.roles.profiler.kernel_solution`/`offset_seeds`), but without the event log,
Ray or a coordinator: the log is a finished file and nothing here is a decision of a run.
Per problem, the run's best kernel (with `all_kernels`: every kernel that passed, one per
distinct source) and its baseline are profiled in rounds on fresh seeds, the order reversed
every other round, so both sides see the same machine conditions; each side's latency is the
median of its rounds, and the speedup their ratio.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from accelopt.catalog import RemeasuredSide
from accelopt.profile import KERNEL_FAILURES, Profile
from accelopt.remeasure import Remeasure, Slot, drive, round_seeds, speedup

if TYPE_CHECKING:
    from accelopt.problem import Problem
    from hardware_agents.base import HardwareAgent
    from replay.fold import KernelView, RunView

# the statuses of a side that did not pass (its kernel failed, or its sandbox did)
FAILED = KERNEL_FAILURES | {"sandbox_error", "unchecked"}
# fresh seed offsets are drawn above every offset a run's search or its own re-measure uses
FRESH_SEED_BASE = 1_000_000


class RemeasureError(Exception):
    """A run (or its problems) that cannot be re-measured: one line that says why."""


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
    """A run's problems re-measured on one device kind: what `accelopt remeasure` prints and
    saves as `remeasure-<device>-<timestamp>.json` in the run directory."""

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


def fresh_seed_base() -> int:
    """A random first-round seed offset: seeds no run has checked its kernels with."""
    return FRESH_SEED_BASE + secrets.randbelow(1_000_000_000)


def round_seed_lists(base_seed: int, rounds: int) -> list[list[int]]:
    """The correctness seeds of each round, as the interleaved re-measure draws them."""
    from actors.roles.profiler import offset_seeds

    return [list(offset_seeds(offset)) for offset in round_seeds(base_seed, rounds)]


def load_run(run: str, root: str) -> tuple[Path, RunView]:
    """Run `run`'s exported log (a run id under `root`, a run directory or an `.aolog` file)
    and its fold; RemeasureError without a usable one."""
    from events.logfile import LogFileError
    from events.runsource import run_log_path
    from replay.runs import fold_file

    log_path = run_log_path(run, root)
    if log_path is None:
        where = Path(run) if Path(run).is_dir() else Path(root) / run
        raise RemeasureError(
            f"run {run!r}: no exported log ({where / 'log.aolog'} does not exist); remeasure "
            "reads a run's exported log (a run exports it when it ends)"
        )
    try:
        view = fold_file(log_path)
    except (LogFileError, ValueError, OSError) as e:
        raise RemeasureError(f"{log_path}: {e}") from e
    if view.started is None:
        raise RemeasureError(f"{log_path}: the log has no RunStarted")
    return log_path, view


def device_groups(view: RunView, problems: list[str] | None, device: str | None) -> dict[str, list[str]]:
    """The problems to re-measure (`problems`, default all of the run's) by the device kind
    they are re-measured on: each on its own in the run (a run may target several), or all on
    `device`. RemeasureError for a problem the run does not have, or one without its baseline
    in the log."""
    assert view.started is not None
    targets = {t.problem.name: t for t in view.started.targets}
    names = sorted(targets) if problems is None else problems
    missing = [n for n in names if n not in targets]
    if missing:
        raise RemeasureError(
            f"problems not in run {view.run_id}: {', '.join(missing)}; the run has: {', '.join(sorted(targets))}"
        )
    no_base = [n for n in names if view.problems[n].baseline_id not in view.kernels]
    if no_base:
        raise RemeasureError(f"run {view.run_id}: no baseline kernel in the log for {', '.join(no_base)}")
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(device or targets[n].device, []).append(n)
    if not groups:
        groups[device or view.settings.device] = []
    return groups


def kernels_to_measure(view: RunView, problem: str, all_kernels: bool) -> list[KernelView]:
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
    agent: Any,
    problem: Problem,
    kernels: list[tuple[str, str, str]],
    *,
    device: str,
    rounds: int,
    base_seed: int,
    timeout_s: float | None,
    progress: Callable[[str], None] | None = None,
) -> list[RemeasuredSide]:
    """Profile `kernels` ((kernel id, language, source), the baseline first) on `agent` in
    the interleaved re-measure (`accelopt.remeasure`, every side to its own status): round r
    on the fresh seeds of `round_seeds(base_seed, rounds)[r]`. A side that passed without a
    time says `unmeasured`. `progress(text)` is told what is being profiled."""
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
    return interleaved_sides(protocol, [kid for kid, _, _ in kernels])


def interleaved_sides(protocol: Remeasure, kernel_ids: list[str]) -> list[RemeasuredSide]:
    """Each side of a finished interleaved re-measure; one that passed without a time says
    `unmeasured` (also the MCP server's compare on a pool's profilers)."""
    return [
        msgspec.structs.replace(m, status="unmeasured") if m.status == "passed" and m.median_ms is None else m
        for m in protocol.results(kernel_ids)
    ]


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def remeasure_view(
    view: RunView,
    problems: list[str],
    agent: Any,
    device: str,
    *,
    rounds: int,
    all_kernels: bool,
    base_seed: int,
    timeout_s: float,
    progress: Callable[[str], None] | None = None,
) -> list[RemeasureRow]:
    """Re-profile each problem's baseline and kernels in interleaved rounds on `agent`: a row
    per kernel, beside what the run recorded of it.

    Every problem must have its baseline kernel in the view. `progress(text)` is told what
    is being profiled."""
    assert view.started is not None
    targets = {t.problem.name: t for t in view.started.targets}
    rows: list[RemeasureRow] = []
    for name in problems:
        pv = view.problems[name]
        base = view.kernels[pv.baseline_id or ""]  # there: `device_groups` checks it
        best_id = pv.best_id or base.kernel_id
        kernels = kernels_to_measure(view, name, all_kernels)
        # the baseline first, then each kernel whose source differs from it
        sides = [base] + [k for k in kernels if k.source != base.source]
        measured = measure_interleaved(
            agent,
            targets[name].problem,
            [(k.kernel_id, k.language, k.source) for k in sides],
            device=device,
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
    return rows


def remeasure_group(
    view: RunView,
    group: list[str],
    agent: HardwareAgent,
    device: str,
    *,
    rounds: int,
    all_kernels: bool,
    base_seed: int,
    progress: Callable[[str], None] | None = None,
) -> RemeasureRecord:
    """Re-measure `group`'s problems of the run on `device` (with the run's profiling timeout
    for that device): the record, ok where no kernel or baseline failed."""
    from hardware_agents.families import profile_timeout_s

    assert view.started is not None
    run_device = (
        ",".join(sorted({t.device for t in view.started.targets if t.problem.name in group})) or device
    )
    rows = remeasure_view(
        view,
        group,
        agent,
        device,
        rounds=rounds,
        all_kernels=all_kernels,
        base_seed=base_seed,
        timeout_s=profile_timeout_s(device, view.settings.profiling),
        progress=progress,
    )
    return RemeasureRecord(
        run_id=view.run_id or "",
        run_device=run_device,
        device=device,
        created=time.strftime("%Y-%m-%dT%H:%M:%S"),
        rounds=rounds,
        seeds=round_seed_lists(base_seed, rounds),
        all_kernels=all_kernels,
        toolchain=agent.toolchain(),
        rows=rows,
        ok=all(r.status in ("passed", "unmeasured") for r in rows),
    )


def save_record(record: RemeasureRecord, run_dir: Path) -> Path:
    """Write the record beside the run's log as `remeasure-<device>-<timestamp>.json`."""
    path = run_dir / f"remeasure-{record.device}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_bytes(msgspec.json.format(msgspec.json.encode(record), indent=2) + b"\n")
    return path
