"""Live progress of a run (rich progress bars fed by its events) and the results table:
CLI rendering, not a command (the leading underscore keeps the CLI from registering it)."""

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
            TextColumn("{task.fields[problem]:<24}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=console, transient=False,
        )
        self.tasks: dict[str, TaskID] = {}

    def __enter__(self) -> RunProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.progress.__exit__(exc_type, exc, tb)

    def on_event(self, e: ev.Event, view: RunView) -> None:
        if isinstance(e, ev.RunStarted):
            for t in sorted(e.targets, key=lambda t: t.problem.name):
                self.tasks[t.problem.name] = self.progress.add_task(
                    "", total=self.total, problem=t.problem.name, status="profiling baseline")
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
            gain = (f" ({base.estimated_ms / best.estimated_ms:.2f}x)" if base is not None and base.estimated_ms
                    else "")
            shown = f"est. {_pct(best.estimated_pct_peak)}{gain}"
        else:
            shown = _pct(best.profile.pct_peak if best and best.passed and best.profile else None)
        status = f"iter {max(it, 0)} · {kernels} kernels · best {shown}"
        if isinstance(e, ev.ProfileRequested) and e.purpose == "remeasure":
            status += " · re-measuring baseline and best"
        elif p.remeasured is not None and p.remeasured.speedup is not None:
            status += f" · re-measured {p.remeasured.speedup:.2f}x"
        if p.note:
            status = p.note
        self.progress.update(self.tasks[name], completed=it + 1, status=status)


def speedup_text(r: ProblemResult) -> str:
    """The reported speedup (re-measured where made), with the recorded one beside it when
    the two disagree beyond the timing noise."""
    shown = r.reported_speedup
    if shown is None:
        return f"est. {r.est_speedup:.2f}x" if r.est_speedup is not None else "-"
    text = f"{shown:.2f}x"
    if r.remeasured_speedup is not None and not r.remeasure_agrees and r.speedup is not None:
        text += f" (recorded {r.speedup:.2f}x)"
    return text


def _est(fmt: Any, value: float | None) -> str:
    return f"est. {fmt(value)}" if value is not None else fmt(None)


def results_table(results: list[ProblemResult], title: str) -> Table:
    remeasured = any(r.remeasured_speedup is not None for r in results)
    caption = ("speedup: baseline and best re-measured in interleaved rounds on fresh seeds at the end of each "
               "problem; the recorded figure is shown beside it where the two disagree beyond the timing noise"
               if remeasured else None)
    table = Table(title=title, caption=caption)
    for col in ("problem", "device", "baseline", "best", "speedup", "base %peak", "best %peak", "kernels",
                "LLM cost"):
        table.add_column(col, justify="left" if col in ("problem", "device") else "right")
    if any(r.est_speedup is not None for r in results):
        note = ("est.: ESTIMATED by the device's cost model on kernels checked in an emulator (not timed, not "
                "measured)")
        caption = f"{caption}; {note}" if caption else note
        table.caption = caption
    for r in results:
        table.add_row(
            r.problem, r.device, _ms(r.baseline_ms) if r.baseline_ms is not None else _est(_ms, r.est_baseline_ms),
            _ms(r.best_ms) if r.best_ms is not None else _est(_ms, r.est_best_ms),
            speedup_text(r),
            _pct(r.baseline_pct_peak) if r.baseline_pct_peak is not None else _est(_pct, r.est_baseline_pct_peak),
            _pct(r.best_pct_peak) if r.best_pct_peak is not None else _est(_pct, r.est_best_pct_peak),
            str(r.kernels), f"${r.cost_usd:.4f}",
        )
    return table
