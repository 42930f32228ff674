"""The dashboard's view models: a folded `RunView` in, msgspec Structs out (sent as JSON).

Every figure the page shows is computed here from the fold, already formatted (with the raw
number beside it where a test or a script may want it); the page only renders. Models stay
small on big runs: lists that grow with the run (kernels, insights) are cut to the latest
entries, charts are SVG strings from `replay.render.svg`, and diffs are fetched one kernel at a
time (`kernel_model`).
"""

from __future__ import annotations

import functools
import itertools
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec

from accelopt import catalog as ev
from replay.fold import KernelView, ProblemResult, ProblemView, RunView
from replay.lineage import best_path
from replay.render import fmt, markdown
from replay.render.htmlkit import diff_stats, source_diff
from replay.render.kernels import STATUSES
from replay.render.markdown import title as plan_title
from replay.render.profile import profile_facts
from replay.render.report import progress_charts, run_labels
from replay.render.svg import Series, line_chart
from replay.runs import RunListing
from replay.states import Driver
from replay.summary import RunSummary, config_differences, geomean, summarize

T = TypeVar("T")
RECENT_KERNELS = 40
RECENT_INSIGHTS = 30


# --- records ----------------------------------------------------------------------------------


class RunRow(msgspec.Struct, kw_only=True):
    """One run in the runs list (and the header of its page)."""

    run_id: str
    state: str  # its state's name (replay/states.py)
    status: str  # its label: the state and why, as `accelopt runs` shows it
    resume: str  # the command that goes on with it ("" where nothing does)
    live: bool
    source: str  # "stream" or "file"
    problems: int
    iterations: str  # done/planned
    iterations_done: int
    kernels: int
    events: int
    # geomean over problems of the best kernel's fraction of peak
    peak_fraction: float | None = msgspec.field(name="pct_peak")
    pct_peak_text: str
    speedup: float | None  # geomean over problems: re-measured where made, else recorded
    speedup_text: str
    speedup_label: str  # what `speedup` was computed from (fmt.speedup_source)
    recorded_speedup_text: str  # the recorded geomean, for where it is shown beside the re-measured one
    speedup_disagrees: bool  # a problem's recorded speedup is outside its re-measure's noise
    cost_usd: float
    cost_text: str
    budget_usd: float | None
    budget_text: str
    spend_fraction: float | None  # cost / budget
    llm_calls: int
    tokens_text: str
    started: str
    duration: str
    last_event: str
    device: str
    search: str
    models: list[str]
    parent_run: str | None = None
    fork_iteration: int | None = None


class ProblemRow(msgspec.Struct, kw_only=True):
    """One problem: the recorded figures of its baseline and best kernel so far (the best
    measured kernel, also while its iteration is open), and the end-of-problem re-measure."""

    problem: str
    device: str
    baseline_ms: float | None
    best_ms: float | None
    baseline_text: str
    best_text: str
    speedup: float | None  # recorded: baseline / best, from their search profiles
    speedup_text: str
    remeasured_speedup: float | None  # baseline and best re-measured in interleaved rounds (None: not made)
    remeasured_text: str  # "6.04x (26.1 / 4.32 ms)": the speedup and the medians it is the ratio of
    remeasured_title: str  # its noise band, and whether the recorded speedup stands within it
    best_open: bool  # the best is from an iteration whose beam is not selected yet
    baseline_pct_peak: float | None
    best_pct_peak: float | None
    baseline_pct_text: str
    best_pct_text: str
    kernels: int
    iterations: int
    cost_text: str
    best_kernel_id: str | None
    note: str = ""


class BeamMemberRow(msgspec.Struct, kw_only=True):
    kernel_id: str
    iteration: int  # the iteration the kernel was found in
    latency_text: str
    pct_text: str
    speedup_text: str
    plan: str
    best: bool


class BeamRow(msgspec.Struct, kw_only=True):
    problem: str
    iteration: int | None  # the latest iteration with a selected beam
    members: list[BeamMemberRow]
    # what the problem keeps into its next iteration (its baseline, best and beam), as the
    # coordinator recorded it at the latest iteration's close (IterationCompleted.kept)
    kept: list[str] = msgspec.field(default_factory=list)
    kept_iteration: int | None = None


class FailureGroup(msgspec.Struct, kw_only=True):
    status: str
    reason: str
    count: int
    kernel_ids: list[str]  # up to three examples


class KernelRow(msgspec.Struct, kw_only=True):
    kernel_id: str
    problem: str
    iteration: int
    kind: str  # baseline, plan, fix
    status: str
    latency_text: str
    pct_text: str
    what: str


class KernelsBlock(msgspec.Struct, kw_only=True):
    statuses: list[str]
    counts: dict[str, dict[str, int]]  # problem -> status -> kernels
    fix_attempts: dict[str, int]
    fixes_passed: dict[str, int]
    failures: list[FailureGroup]  # kernels that did not pass, grouped by status and reason
    proposal_failures: list[FailureGroup]  # LLM replies that gave no plan or kernel
    recent: list[KernelRow]
    total: int


class StepRow(msgspec.Struct, kw_only=True):
    kernel_id: str
    previous_id: str | None
    kind: str
    label: str
    iteration: int
    status: str
    latency_text: str
    pct_text: str
    speedup_text: str
    step_speedup_text: str
    plan: str
    siblings: int
    added: int
    removed: int


class LineageBlock(msgspec.Struct, kw_only=True):
    problem: str
    best_kernel_id: str | None
    steps: list[StepRow]


class RoleRow(msgspec.Struct, kw_only=True):
    role: str
    calls: int
    failed: int
    prompt_tokens: int
    completion_tokens: int
    tokens_text: str
    cost_usd: float
    cost_text: str
    mean_latency_text: str
    total_latency_text: str


class RetrievalRow(msgspec.Struct, kw_only=True):
    problem: str
    iteration: int
    candidates: int
    insights: int
    foreign: int  # insights from other problems
    top: list[str]


class InsightRow(msgspec.Struct, kw_only=True):
    iteration: int | None
    problem: str
    title: str
    speedup_text: str
    kind: str


class ChartPair(msgspec.Struct, kw_only=True):
    problem: str
    pct_svg: str
    speedup_svg: str


class RunModel(msgspec.Struct, kw_only=True):
    run: RunRow
    problems: list[ProblemRow]
    charts: list[ChartPair]
    beams: list[BeamRow]
    kernels: KernelsBlock
    lineage: list[LineageBlock]
    llm: list[RoleRow]
    cost_svg: str
    memory_enabled: bool
    retrievals: list[RetrievalRow]
    insights: list[InsightRow]
    insights_total: int
    generated_ts: float


class RunsModel(msgspec.Struct, kw_only=True):
    runs: list[RunRow]
    campaigns: list[Any]  # campaign_models.CampaignRow, the campaigns under the root and on the stream
    stream: str  # where live runs are followed from ("" when no event stream is followed)
    root: str
    warnings: list[str]
    generated_ts: float
    # the device queues of the root's MCP servers, a line each (replay/device_queues.py)
    device_queues: list[str] = []


class KernelModel(msgspec.Struct, kw_only=True):
    kernel_id: str
    problem: str
    iteration: int
    kind: str
    status: str
    latency_text: str
    pct_text: str
    language: str
    plan: str
    plan_html: str  # the plan's markdown rendered (raw HTML in it escaped)
    profile: list[tuple[str, str]]  # the profile's facts (replay/render/profile.py), "" when not profiled yet
    log: str
    previous_id: str | None
    diff_html: str  # unified diff against `previous_id` (escaped, one span per line), or ""
    added: int
    removed: int
    source: str


class CompareProblem(msgspec.Struct, kw_only=True):
    problem: str
    best_pct_text: list[str]  # per run
    speedup_text: list[str]  # recorded
    remeasured_text: list[str]  # re-measured ("-" where not made)
    best_pct_peak: list[float | None]
    speedup: list[float | None]
    pct_ratio_text: list[str]  # per run after the first: run / first
    speedup_ratio_text: list[str]
    pct_svg: str
    speedup_svg: str


class CompareModel(msgspec.Struct, kw_only=True):
    labels: list[str]
    runs: list[RunRow]
    config_differences: list[tuple[str, list[str]]]
    problems: list[CompareProblem]
    cost_ratio_text: list[str]
    report_path: str  # the static report of these runs, served by the dashboard
    generated_ts: float


class Memo:
    """What the models of one run keep between updates: the kernel tally, diff sizes (facts
    that never change once known) and parts keyed on what they depend on, so an update of a
    100k-event run rebuilds only what the new events touched."""

    def __init__(self) -> None:
        self.diff_sizes: dict[tuple[str, str], tuple[int, int]] = {}
        self.parts: dict[tuple, tuple[object, object]] = {}
        self.tally = KernelTally()

    def part(self, key: tuple, version: object, build: Callable[[], T]) -> T:
        hit = self.parts.get(key)
        if hit is not None and hit[0] == version:
            return hit[1]  # type: ignore[return-value]
        value = build()
        self.parts[key] = (version, value)
        return value

    def diff_size(self, before: KernelView, after: KernelView) -> tuple[int, int]:
        key = (before.kernel_id, after.kernel_id)
        got = self.diff_sizes.get(key)
        if got is None:
            got = self.diff_sizes[key] = diff_stats(before.source, after.source)
        return got


# --- runs list --------------------------------------------------------------------------------


def budget_of(view: RunView) -> float | None:
    return view.settings.llm.budget_usd if view.started is not None else None


@dataclass
class ProblemFigures:
    """One problem's figures as every page of the dashboard shows them: the fold's result,
    with the best measured kernel so far as its best (`open`: found in an iteration whose
    beam is not selected yet) and the re-measure of that best, if made."""

    result: ProblemResult
    best: KernelView | None
    open: bool
    remeasured: ev.ProblemRemeasured | None

    @property
    def baseline_ms(self) -> float | None:
        return self.result.baseline_ms

    @property
    def best_ms(self) -> float | None:
        return self.best.latency_ms if self.best is not None else None

    @property
    def speedup(self) -> float | None:
        """Recorded: the baseline's latency over the best's, from their search profiles."""
        b, k = self.baseline_ms, self.best_ms
        return b / k if b and k else None

    @property
    def best_pct_peak(self) -> float | None:
        return self.best.peak_fraction if self.best is not None else None

    @property
    def reported_speedup(self) -> float | None:
        rm = self.remeasured
        return rm.speedup if rm is not None and rm.speedup is not None else self.speedup


def best_so_far(view: RunView, p: ProblemView) -> tuple[KernelView | None, bool]:
    """The problem's best kernel: the selected one, or a faster one measured since, in an
    iteration whose beam is not selected yet (then `True`)."""
    best = view.kernels.get(p.best_id or "")
    selected_through = max(p.beams) if p.beams else -1
    fastest = best if best is not None and best.latency_ms is not None else None
    for kid in reversed(p.kernel_ids):  # proposal order: the open iteration's kernels come last
        k = view.kernels.get(kid)
        if k is None:
            continue
        if k.iteration < selected_through:
            break
        if k.iteration == selected_through or k.latency_ms is None:
            continue
        if fastest is None or fastest.latency_ms is None or k.latency_ms < fastest.latency_ms:
            fastest = k
    if fastest is None or fastest is best or fastest.kernel_id == p.baseline_id:
        return best, False
    return fastest, True


def problem_figures(view: RunView) -> list[ProblemFigures]:
    out = []
    for r in view.results():
        p = view.problems[r.problem]
        best, is_open = best_so_far(view, p)
        rm = (
            p.remeasured
            if p.remeasured is not None
            and best is not None
            and not is_open
            and p.remeasured.best.kernel_id == best.kernel_id
            else None
        )
        out.append(ProblemFigures(r, best, is_open, rm))
    return out


def run_row(
    view: RunView,
    source: str,
    *,
    streaming: bool,
    now: float | None = None,
    summary: RunSummary | None = None,
    figures: list[ProblemFigures] | None = None,
    driver: Driver | None = None,
    root: str = "runs",
) -> RunRow:
    """`driver`: what its lock says (replay/states.py; default: no lock to ask)."""
    now = now if now is not None else time.time()
    s = summary or summarize(view)
    figures = figures if figures is not None else problem_figures(view)
    state = RunListing(s, source, driver=driver or Driver(), root=root).state(now)  # as `accelopt runs` says
    budget = budget_of(view)
    peak_fraction = geomean(f.best_pct_peak for f in figures)
    speedup, recorded = geomean(f.reported_speedup for f in figures), geomean(f.speedup for f in figures)
    remeasured = sum(f.remeasured is not None and f.remeasured.speedup is not None for f in figures)
    return RunRow(
        run_id=s.run_id,
        state=state.name,
        status=state.label,
        resume=state.resume,
        live=streaming and source == "stream" and state.name == "running",
        source=source if source != "stream" or streaming else "stream (stopped)",
        problems=s.problems,
        iterations=s.iterations,
        iterations_done=s.iterations_done,
        kernels=s.kernels,
        events=s.events,
        peak_fraction=peak_fraction,
        pct_peak_text=fmt.pct(peak_fraction),
        speedup=speedup,
        speedup_text=fmt.speedup(speedup),
        speedup_label=fmt.speedup_source(remeasured, len(figures)),
        recorded_speedup_text=fmt.speedup(recorded),
        speedup_disagrees=any(f.remeasured is not None and not f.remeasured.agrees for f in figures),
        cost_usd=s.cost_usd,
        cost_text=fmt.usd(s.cost_usd),
        budget_usd=budget,
        budget_text=fmt.usd(budget) if budget is not None else "none",
        spend_fraction=(s.cost_usd / budget) if budget else None,
        llm_calls=s.llm_calls,
        tokens_text=fmt.tokens(s.tokens),
        started=fmt.stamp(s.started_ts),
        duration=fmt.duration(s.duration_s),
        last_event=fmt.ago(s.last_ts, now),
        device=s.device,
        search=s.search,
        models=s.models,
        parent_run=s.parent_run,
        fork_iteration=s.fork_iteration,
    )


# --- one run ----------------------------------------------------------------------------------


def _remeasured_text(rm: ev.ProblemRemeasured | None) -> tuple[str, str]:
    """The re-measured speedup with the medians it is the ratio of, and its noise band (or
    why it failed)."""
    if rm is None:
        return "-", ""
    if rm.speedup is None:
        return fmt.remeasured(rm), (rm.best if rm.best.status != "passed" else rm.baseline).log_head
    band = f"{rm.rounds} interleaved rounds; noise \u00b1{100 * rm.noise:.0f}%"
    return fmt.remeasured(rm), band + ("" if rm.agrees else "; the recorded speedup is outside it")


def _problem_rows(view: RunView, figures: list[ProblemFigures]) -> list[ProblemRow]:
    rows = []
    for f in figures:
        r, best = f.result, f.best
        remeasured_text, remeasured_title = _remeasured_text(f.remeasured)
        note = (
            f"best so far: iteration {best.iteration} is still open"
            if f.open and best is not None
            else r.note
        )
        rows.append(
            ProblemRow(
                problem=r.problem,
                device=r.device,
                baseline_ms=r.baseline_ms,
                best_ms=f.best_ms,
                baseline_text=fmt.ms(r.baseline_ms),
                best_text=fmt.ms(f.best_ms),
                speedup=f.speedup,
                speedup_text=fmt.speedup(f.speedup),
                remeasured_speedup=f.remeasured.speedup if f.remeasured is not None else None,
                remeasured_text=remeasured_text,
                remeasured_title=remeasured_title,
                best_open=f.open,
                baseline_pct_peak=r.baseline_pct_peak,
                best_pct_peak=f.best_pct_peak,
                baseline_pct_text=fmt.pct(r.baseline_pct_peak),
                best_pct_text=fmt.pct(f.best_pct_peak),
                kernels=r.kernels,
                iterations=r.iterations,
                cost_text=fmt.usd(r.cost_usd),
                best_kernel_id=best.kernel_id if best is not None else None,
                note=note,
            )
        )
    return rows


def _kind(k: KernelView) -> str:
    return "fix" if k.fix_of else ("baseline" if k.parent_id is None else "plan")


def _what(view: RunView, k: KernelView) -> str:
    if k.fix_of:
        return f"fix round {k.fix_round} of {k.fix_of[:12]}"
    return plan_title(view.plan_text(k.kernel_id)) or ("baseline" if k.parent_id is None else "")


def _beams(view: RunView) -> list[BeamRow]:
    out = []
    for name, p in sorted(view.problems.items()):
        closed = max(p.kept) if p.kept else None  # the latest closed iteration: what it kept
        kept = p.kept[closed] if closed is not None else []
        if not p.beams:
            out.append(BeamRow(problem=name, iteration=None, members=[], kept=kept, kept_iteration=closed))
            continue
        it = max(p.beams)
        base = view.kernels.get(p.baseline_id or "")
        base_ms = base.latency_ms if base is not None else None
        members = []
        for kid in p.beams[it]:
            k = view.kernels.get(kid)
            if k is None:
                continue
            lat = k.latency_ms
            members.append(
                BeamMemberRow(
                    kernel_id=kid,
                    iteration=k.iteration,
                    latency_text=fmt.ms(lat),
                    pct_text=fmt.pct(k.peak_fraction),
                    speedup_text=fmt.speedup(base_ms / lat if base_ms and lat else None),
                    plan=_what(view, k),
                    best=kid == p.best_id,
                )
            )
        out.append(BeamRow(problem=name, iteration=it, members=members, kept=kept, kept_iteration=closed))
    return out


_LOCATION = re.compile(r"(?<=[:(])\d+|0x[0-9a-fA-F]+")


def failure_reason(k: KernelView) -> str:
    """The line of a failed kernel's log that says why, with positions blanked so that the
    same error at another line groups with it."""
    log = k.profile.log if k.profile is not None else ""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    line = next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else "")
    return _LOCATION.sub("N", line)[:200] or "(no log)"


class KernelTally:
    """Kernels by problem and status, fixes, failures grouped by reason: brought up to date
    from the kernels proposed since the last update and those still pending then (a kernel's
    status changes once, from pending to its profile's), so an update does not walk every
    kernel of a long run."""

    def __init__(self) -> None:
        self.seen = 0  # kernels of view.kernels (insertion-ordered) looked at so far
        self.pending: dict[str, None] = {}  # kernels counted as pending (an ordered set)
        self.counts: dict[str, Counter[str]] = {}
        self.fixes: Counter[str] = Counter()
        self.fixes_ok: Counter[str] = Counter()
        self.groups: Counter[tuple[str, str]] = Counter()
        self.examples: dict[tuple[str, str], list[str]] = {}

    def update(self, view: RunView) -> None:
        new = list(itertools.islice(view.kernels, self.seen, None))
        self.seen += len(new)
        for kid in list(self.pending):
            k = view.kernels[kid]
            if k.status != "pending":
                del self.pending[kid]
                self.counts[k.problem]["pending"] -= 1
                self._final(k)
        for kid in new:
            k = view.kernels[kid]
            if k.problem not in view.problems:
                continue
            self.counts.setdefault(k.problem, Counter())
            if k.fix_of:
                self.fixes[k.problem] += 1
            if k.status == "pending":
                self.counts[k.problem]["pending"] += 1
                self.pending[kid] = None
            else:
                self._final(k)

    def _final(self, k: KernelView) -> None:
        st = k.status
        self.counts[k.problem][st] += 1
        if st == "passed":
            self.fixes_ok[k.problem] += bool(k.fix_of)
            return
        key = (st, failure_reason(k))
        self.groups[key] += 1
        ex = self.examples.setdefault(key, [])
        if len(ex) < 3:
            ex.append(k.kernel_id)


def _kernels(view: RunView, memo: Memo) -> KernelsBlock:
    tally = memo.tally
    tally.update(view)
    names = sorted(view.problems)
    counts = {name: {st: n for st, n in tally.counts.get(name, {}).items() if n} for name in names}
    fixes = {name: tally.fixes[name] for name in names}
    fixes_ok = {name: tally.fixes_ok[name] for name in names}
    groups, examples = tally.groups, tally.examples
    statuses = list(STATUSES) + sorted({s for c in counts.values() for s in c} - set(STATUSES))
    proposals: Counter[tuple[str, str]] = Counter((f.stage, f.reason) for f in view.failures)
    recent = []
    for kid in itertools.islice(reversed(view.kernels), RECENT_KERNELS):  # latest proposed first
        k = view.kernels[kid]
        recent.append(
            KernelRow(
                kernel_id=kid,
                problem=k.problem,
                iteration=k.iteration,
                kind=_kind(k),
                status=k.status,
                latency_text=fmt.ms(k.latency_ms),
                pct_text=fmt.pct(k.peak_fraction),
                what=_what(view, k),
            )
        )
    return KernelsBlock(
        statuses=statuses,
        counts=counts,
        fix_attempts=fixes,
        fixes_passed=fixes_ok,
        failures=[
            FailureGroup(status=s, reason=r, count=n, kernel_ids=examples[(s, r)])
            for (s, r), n in groups.most_common()
        ],
        proposal_failures=[
            FailureGroup(status=s, reason=r, count=n, kernel_ids=[]) for (s, r), n in proposals.most_common()
        ],
        recent=recent,
        total=len(view.kernels),
    )


def _lineage(view: RunView, memo: Memo) -> list[LineageBlock]:
    # a problem's path changes with its best kernel; sibling counts with its kernels
    return [
        memo.part(
            ("lineage", name),
            (p.best_id, len(p.kernel_ids)),
            functools.partial(_lineage_block, view, p, memo),
        )
        for name, p in sorted(view.problems.items())
    ]


def _lineage_block(view: RunView, p: ProblemView, memo: Memo) -> LineageBlock:
    rows = []
    for s in best_path(view, p.best_id) if p.best_id else []:
        k, prev = s.kernel, s.previous
        added, removed = memo.diff_size(prev, k) if prev is not None else (0, 0)
        rows.append(
            StepRow(
                kernel_id=k.kernel_id,
                previous_id=prev.kernel_id if prev is not None else None,
                kind=s.kind,
                label=f"fix round {k.fix_round}" if s.kind == "fix" else s.kind,
                iteration=k.iteration,
                status=k.status,
                latency_text=fmt.ms(k.latency_ms),
                pct_text=fmt.pct(k.peak_fraction),
                speedup_text=fmt.speedup(s.speedup),
                step_speedup_text=fmt.speedup(s.step_speedup),
                plan=plan_title(s.plan),
                siblings=s.siblings,
                added=added,
                removed=removed,
            )
        )
    return LineageBlock(problem=p.name, best_kernel_id=p.best_id, steps=rows)


def _llm(view: RunView) -> list[RoleRow]:
    roles = [r for r in ev.LLM_ROLES if r in view.usage] + sorted(set(view.usage) - set(ev.LLM_ROLES))
    rows = []
    for role in roles:
        u = view.usage[role]
        rows.append(
            RoleRow(
                role=role,
                calls=u.calls,
                failed=u.failed_calls,
                prompt_tokens=u.prompt_tokens,
                completion_tokens=u.completion_tokens,
                tokens_text=fmt.tokens(u.tokens),
                cost_usd=u.cost_usd,
                cost_text=fmt.usd(u.cost_usd),
                mean_latency_text=f"{u.latency_s / u.calls:.2f} s" if u.calls else "-",
                total_latency_text=fmt.duration(u.latency_s),
            )
        )
    return rows


def _cost_chart(view: RunView, limit: int = 300) -> str:
    t0 = view.first_ts or 0.0
    unit, scale = (
        ("h", 3600.0)
        if view.duration_s > 3 * 3600
        else (("min", 60.0) if view.duration_s > 180 else ("s", 1.0))
    )
    series = view.cost_series
    step = max(1, len(series) // limit)
    pts: list[tuple[float, float | None]] = [(0.0, 0.0)]
    pts += [((c.ts - t0) / scale, c.cost_usd) for c in series[::step]]
    if series and step > 1:
        pts.append(((series[-1].ts - t0) / scale, series[-1].cost_usd))
    return line_chart(
        [Series("LLM cost", pts)],
        title="LLM cost over time",
        name="cost-over-time",
        x_label=f"elapsed ({unit})",
        y_label="USD (cumulative)",
        x_fmt=lambda x: f"{x:g} {unit}",
        y_fmt=lambda y: f"${y:g}",
    )


def _retrieval(name: str, it: int, got: list) -> RetrievalRow:
    entries = {r.entry_id: r for m in got for r in m.entries}
    top = sorted(entries.values(), key=lambda r: -r.score)[:3]
    return RetrievalRow(
        problem=name,
        iteration=it,
        candidates=len(got),
        insights=len(entries),
        foreign=sum(1 for r in entries.values() if r.problem != name),
        top=[plan_title(r.title) for r in top],
    )


def _retrievals(view: RunView, memo: Memo) -> list[RetrievalRow]:
    # an iteration's row changes only while its candidates retrieve
    return [
        memo.part(("retrieved", name, it), len(got), functools.partial(_retrieval, name, it, got))
        for name, p in sorted(view.problems.items())
        for it, got in sorted(p.memory.items())
    ]


def _insights(view: RunView) -> list[InsightRow]:
    rows = []
    for m in reversed(view.memory_entries[-RECENT_INSIGHTS:]):
        e = m.entry
        rows.append(
            InsightRow(
                iteration=view.memory_entry_iteration.get(e.id),
                problem=e.problem,
                title=plan_title(e.title),
                speedup_text=fmt.speedup(e.speedup),
                kind="speedup" if e.positive else "undo regression",
            )
        )
    return rows


def _chart_pair(view: RunView, label: str, problem: str) -> ChartPair:
    pct_svg, speedup_svg = progress_charts([view], [label], problem)
    return ChartPair(problem=problem, pct_svg=pct_svg, speedup_svg=speedup_svg)


def run_model(
    view: RunView,
    source: str,
    *,
    streaming: bool,
    now: float | None = None,
    memo: Memo | None = None,
    driver: Driver | None = None,
    root: str = "runs",
) -> RunModel:
    """Everything the run page shows (`memo`: kept between updates of the same run; `driver`:
    what its lock says)."""
    now = now if now is not None else time.time()
    memo = memo or Memo()
    label = view.run_id or "run"
    charts = [
        memo.part(("charts", name), len(p.iterations), functools.partial(_chart_pair, view, label, name))
        for name, p in sorted(view.problems.items())
    ]
    figures = problem_figures(view)
    return RunModel(
        run=run_row(view, source, streaming=streaming, now=now, figures=figures, driver=driver, root=root),
        problems=_problem_rows(view, figures),
        charts=charts,
        beams=_beams(view),
        kernels=_kernels(view, memo),
        lineage=_lineage(view, memo),
        llm=_llm(view),
        cost_svg=memo.part(("cost",), len(view.cost_series), lambda: _cost_chart(view)),
        memory_enabled=view.settings.memory.enabled,
        retrievals=_retrievals(view, memo),
        insights=_insights(view),
        insights_total=len(view.memory_entries),
        generated_ts=now,
    )


def kernel_model(view: RunView, kernel_id: str) -> KernelModel | None:
    """One kernel: its facts, plan, log, source and the diff against the kernel it came from
    (the broken kernel for a fix, the parent for a plan)."""
    k = view.kernels.get(kernel_id)
    if k is None:
        return None
    prev = view.kernels.get(k.fix_of or k.parent_id or "")
    diff = ""
    added = removed = 0
    if prev is not None:
        diff = source_diff(
            prev.source, k.source, name_before=prev.kernel_id[:12], name_after=k.kernel_id[:12]
        )
        added, removed = diff_stats(prev.source, k.source)
    log = k.profile.log if k.profile is not None else ""
    plan = view.plan_text(k.kernel_id) or ""
    return KernelModel(
        kernel_id=k.kernel_id,
        problem=k.problem,
        iteration=k.iteration,
        kind=_kind(k),
        status=k.status,
        latency_text=fmt.ms(k.latency_ms),
        pct_text=fmt.pct(k.peak_fraction),
        language=k.language,
        plan=plan,
        plan_html=markdown.to_html(plan),
        profile=profile_facts(k.profile) if k.profile else [],
        log=log[-4000:],
        previous_id=prev.kernel_id if prev else None,
        diff_html=diff,
        added=added,
        removed=removed,
        source=k.source,
    )


# --- compare ----------------------------------------------------------------------------------


def _ratio(new: float | None, old: float | None) -> str:
    return f"{new / old:.2f}x" if new and old else "-"


def compare_model(
    views: Sequence[RunView],
    sources: Sequence[str],
    *,
    streaming: bool,
    report_path: str,
    now: float | None = None,
    drivers: Sequence[Driver] | None = None,
    root: str = "runs",
) -> CompareModel:
    """The side-by-side figures of `accelopt report RUN1 RUN2 ...` (the first run is the
    reference of the ratios; `drivers`: what each run's lock says)."""
    now = now if now is not None else time.time()
    labels = run_labels(views)
    figures = [problem_figures(v) for v in views]
    by_run = [{f.result.problem: f for f in fs} for fs in figures]
    problems = []
    for name in sorted(set().union(*(v.problems for v in views))):
        rs = [res.get(name) for res in by_run]
        pct = [r.best_pct_peak if r else None for r in rs]
        sp = [r.speedup if r else None for r in rs]
        pct_svg, sp_svg = progress_charts(views, labels, name)
        problems.append(
            CompareProblem(
                problem=name,
                best_pct_text=[fmt.pct(x) for x in pct],
                speedup_text=[fmt.speedup(x) for x in sp],
                remeasured_text=[_remeasured_text(r.remeasured)[0] if r else "-" for r in rs],
                best_pct_peak=pct,
                speedup=sp,
                pct_ratio_text=[_ratio(x, pct[0]) for x in pct[1:]],
                speedup_ratio_text=[_ratio(x, sp[0]) for x in sp[1:]],
                pct_svg=pct_svg,
                speedup_svg=sp_svg,
            )
        )
    rows = [
        run_row(v, src, streaming=streaming, now=now, figures=fs, driver=d, root=root)
        for v, src, fs, d in zip(views, sources, figures, drivers or [Driver()] * len(views), strict=True)
    ]
    return CompareModel(
        labels=labels,
        runs=rows,
        config_differences=[
            (k, ["-" if x is None else str(x) for x in vals]) for k, vals in config_differences(views)
        ],
        problems=problems,
        cost_ratio_text=[_ratio(v.cost_usd, views[0].cost_usd) for v in views[1:]],
        report_path=report_path,
        generated_ts=now,
    )
