"""Live progress of a run (rich progress bars fed by its events) and the results table
(run, demo, replay)."""

from __future__ import annotations

from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from accelopt import catalog as ev
from replay.fold import ProblemResult, RunView
from replay.render import fmt

_pct, _ms = fmt.pct, fmt.ms  # the live table formats numbers as the reports do (replay/render/fmt.py)


class RunProgress:
    """One bar per problem: iterations done of 1 + T, kernels profiled, best % of peak."""

    def __init__(self, console: Console, iterations: int) -> None:
        self.console = console
        self.total = iterations + 1
        self.progress = Progress(
            TextColumn("{task.fields[problem]:<24}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.tasks: dict[str, TaskID] = {}

    def __enter__(self) -> RunProgress:
        self.progress.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.progress.__exit__(exc_type, exc, tb)

    def on_event(self, e: ev.Event, view: RunView) -> None:
        if isinstance(e, ev.RunStarted):
            for t in sorted(e.targets, key=lambda t: t.problem.name):
                self.tasks[t.problem.name] = self.progress.add_task(
                    "", total=self.total, problem=t.problem.name, status="profiling baseline"
                )
            return
        name = getattr(e, "problem", None)
        if name not in self.tasks:
            return
        p = view.problems[name]
        best = view.kernels.get(p.best_id or "")
        kernels = p.kernels_profiled
        it = max((i.iteration for i in p.iterations), default=-1)
        if best is not None and not best.passed and best.estimated_ms is not None:
            base = view.kernels.get(p.baseline_id or "")
            gain = (
                f" ({base.estimated_ms / best.estimated_ms:.2f}x)"
                if base is not None and base.estimated_ms
                else ""
            )
            shown = f"est. {_pct(best.estimated_pct_peak)}{gain}"
        else:
            shown = _pct(best.profile.peak_fraction if best and best.passed and best.profile else None)
        status = f"iter {max(it, 0)} · {kernels} kernels · best {shown}"
        if isinstance(e, ev.ProfileRequested) and e.purpose == "remeasure":
            status += " · re-measuring baseline and best"
        elif p.remeasured is not None and p.remeasured.speedup is not None:
            status += f" · re-measured {p.remeasured.speedup:.2f}x"
        if p.note:
            status = p.note
        self.progress.update(self.tasks[name], completed=it + 1, status=status)


def remeasured_of(view: RunView, r: ProblemResult):
    """The problem's end-of-problem re-measure of its best kernel (None: not made)."""
    rm = view.problems[r.problem].remeasured
    return rm if rm is not None and rm.best.kernel_id == r.best_kernel_id else None


def _est(fmt: Any, value: float | None) -> str:
    return f"est. {fmt(value)}" if value is not None else fmt(None)


def _measured_or_est(fmt: Any, measured: float | None, estimated: float | None) -> str:
    return fmt(measured) if measured is not None else _est(fmt, estimated)


def results_table(view: RunView, title: str) -> Table:
    """Per problem: the search's figures (baseline, best and the speedup that is their ratio)
    and, where made, the re-measure (its speedup and the two medians it is the ratio of).
    Where a device only estimates (an emulator and its cost model), the figures say est."""
    results = view.results()
    remeasured = any(r.remeasured_speedup is not None for r in results)
    caption = (
        (
            "baseline, best, speedup: the search's profiles; re-measured: baseline and best timed again in "
            "interleaved rounds on fresh seeds at the end of the problem (baseline / best medians)"
            + (
                "; it disagrees with the recorded speedup beyond the timing noise where marked *"
                if any(not r.remeasure_agrees for r in results)
                else ""
            )
        )
        if remeasured
        else None
    )
    if any(r.est_speedup is not None for r in results):
        note = (
            "est.: ESTIMATED by the device's cost model on kernels checked in an emulator (not timed, not "
            "measured)"
        )
        caption = f"{caption}; {note}" if caption else note
    table = Table(title=title, caption=caption)
    columns = [
        "problem",
        "device",
        "baseline",
        "best",
        "speedup",
        *(["re-measured"] if remeasured else []),
        "base %peak",
        "best %peak",
        "kernels",
        "LLM cost",
    ]
    for col in columns:
        table.add_column(col, justify="left" if col in ("problem", "device") else "right")
    for r in results:
        again = (
            [fmt.remeasured(remeasured_of(view, r)) + ("" if r.remeasure_agrees else "*")]
            if remeasured
            else []
        )
        speedup = (
            fmt.speedup(r.speedup)
            if r.speedup is not None or r.est_speedup is None
            else f"est. {r.est_speedup:.2f}x"
        )
        table.add_row(
            r.problem,
            r.device,
            _measured_or_est(_ms, r.baseline_ms, r.est_baseline_ms),
            _measured_or_est(_ms, r.best_ms, r.est_best_ms),
            speedup,
            *again,
            _measured_or_est(_pct, r.baseline_pct_peak, r.est_baseline_pct_peak),
            _measured_or_est(_pct, r.best_pct_peak, r.est_best_pct_peak),
            str(r.kernels),
            f"${r.cost_usd:.4f}",
        )
    return table
