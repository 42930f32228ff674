"""Headline figures of a run (one row of `accelopt runs`, the overview of a report)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from accelopt.config import RunConfig
from replay.fold import RunView


def geomean(values: Iterable[float | None], *, strict: bool = False) -> float | None:
    """Geometric mean of the positive values; None when there are none, or with `strict`
    when any value is missing (a suite figure that must cover every problem)."""
    given = list(values)
    xs = [v for v in given if v is not None and v > 0]
    if not xs or (strict and len(xs) != len(given)):
        return None
    return math.exp(sum(math.log(v) for v in xs) / len(xs))


@dataclass
class RunSummary:
    run_id: str
    status: str
    problems: int
    iterations_done: int  # the fewest iterations any problem has completed
    iterations_planned: int | None
    kernels: int
    speedup_geomean: float | None
    pct_peak_geomean: float | None
    baseline_pct_peak_geomean: float | None
    cost_usd: float
    llm_calls: int
    tokens: int
    started_ts: float | None
    last_ts: float | None
    events: int
    parent_run: str | None = None
    fork_iteration: int | None = None
    failed_llm_calls: dict[str, int] = field(default_factory=dict)  # role -> failed calls (attempts)
    models: list[str] = field(default_factory=list)
    search: str = ""
    seed: int | None = None
    device: str = ""
    # speedup_geomean is over the re-measured speedups where the run made them; these are the
    # recorded figures and whether any problem's recorded speedup disagreed beyond the noise
    recorded_speedup_geomean: float | None = None
    remeasured_problems: int = 0
    speedup_disagrees: bool = False
    # over the problems whose kernels were only estimated (a cost model's figures, not measured)
    est_speedup_geomean: float | None = None

    @property
    def speedup_text(self) -> str:
        from replay.render.fmt import speedup

        if self.speedup_geomean is None and self.est_speedup_geomean is not None:
            return f"est. {speedup(self.est_speedup_geomean)}"
        text = speedup(self.speedup_geomean)
        if self.speedup_disagrees and self.recorded_speedup_geomean is not None:
            text += f" (recorded {speedup(self.recorded_speedup_geomean)})"
        return text

    @property
    def speedup_label(self) -> str:
        """What `speedup_geomean` was computed from: re-measured, recorded, or both."""
        from replay.render.fmt import speedup_source

        return speedup_source(self.remeasured_problems, self.problems)

    @property
    def labelled_speedup_text(self) -> str:
        """`1.27x re-measured (recorded 1.26x)`: the figure, what it is, the recorded one where they disagree."""
        from replay.render.fmt import speedup

        if self.speedup_geomean is None:
            return "-"
        text = f"{speedup(self.speedup_geomean)} {self.speedup_label}"
        if self.speedup_disagrees and self.recorded_speedup_geomean is not None:
            text += f" (recorded {speedup(self.recorded_speedup_geomean)})"
        return text

    @property
    def duration_s(self) -> float | None:
        return self.last_ts - self.started_ts if self.started_ts and self.last_ts else None

    @property
    def iterations(self) -> str:
        planned = f"/{self.iterations_planned}" if self.iterations_planned is not None else ""
        return f"{self.iterations_done}{planned}"


def search_settings(cfg: RunConfig) -> str:
    s = cfg.search
    text = (
        f"B={s.beam_width} N={s.plans_per_candidate} K={s.samples_per_plan} T={s.iterations} F={s.fix_rounds}"
    )
    return text if cfg.memory.enabled else text + " memory=off"


def summarize(view: RunView) -> RunSummary:
    results = view.results()
    started = view.started
    planned = view.settings.search.iterations if started is not None else None
    done = [max((i.iteration for i in p.iterations), default=-1) for p in view.problems.values()]
    return RunSummary(
        run_id=view.run_id or "?",
        status=view.status,
        problems=len(view.problems),
        iterations_done=max(min(done, default=0), 0),
        iterations_planned=planned if isinstance(planned, int) else None,
        kernels=sum(p.kernels_seen for p in view.problems.values()),
        speedup_geomean=geomean(r.reported_speedup for r in results),
        recorded_speedup_geomean=geomean(r.speedup for r in results),
        remeasured_problems=sum(r.remeasured_speedup is not None for r in results),
        speedup_disagrees=any(not r.remeasure_agrees for r in results),
        est_speedup_geomean=geomean(r.est_speedup for r in results if r.speedup is None),
        pct_peak_geomean=geomean(r.best_pct_peak for r in results),
        baseline_pct_peak_geomean=geomean(r.baseline_pct_peak for r in results),
        cost_usd=view.cost_usd,
        llm_calls=view.llm_calls,
        tokens=view.tokens,
        started_ts=started.ts if started is not None else view.first_ts,
        last_ts=view.last_ts,
        events=view.events,
        parent_run=started.parent_run if started is not None else None,
        fork_iteration=started.fork_iteration if started is not None else None,
        models=sorted(view.models, key=lambda m: -view.models[m]),
        search=search_settings(view.settings) if started is not None else "",
        seed=started.seed if started is not None else None,
        device=", ".join(sorted({p.device for p in view.problems.values()})),
        failed_llm_calls={role: u.failed_calls for role, u in sorted(view.usage.items()) if u.failed_calls},
    )


def failed_calls_text(failed: dict[str, int]) -> str:
    """`planner 3, executor 1` (empty when no call failed)."""
    return ", ".join(f"{role} {n}" for role, n in failed.items())


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def config_differences(views: Sequence[RunView]) -> list[tuple[str, list[Any]]]:
    """Config keys whose values differ between the runs (root excluded): (key, value per run)."""
    flats = [flatten(v.started.config) if v.started is not None else {} for v in views]
    keys = sorted(set().union(*flats)) if flats else []
    out = []
    for k in keys:
        if k == "root":
            continue
        values = [f.get(k) for f in flats]
        if any(v != values[0] for v in values[1:]):
            out.append((k, values))
    return out
