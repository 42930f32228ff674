"""A campaign's log, read: its state for status, the dashboard and reports (`CampaignView`),
its scheduler as `replay --verify` re-drives it (`CampaignDecider`), and what one of its runs came
to (`run_outcome`: the fields of `CampaignRunFinished`, read from the run's own log).

The view folds the campaign's events through the scheduler's own core (the items' state,
settled or not, is the core's, one fact in one place) and keeps the recorded decisions for
what a user looks at: each run's reasons and the queue at that moment, the spend per day,
parked devices, why it stopped.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from accelopt import catalog as ev
from accelopt.campaign import CampaignSpec
from accelopt.campaign_core import CampaignCore
from accelopt.campaign_items import ItemState
from events.runsource import CAMPAIGNS_DIR, fold_events
from replay.fold import RunView
from replay.states import STATES, State, campaign_run_state


def campaign_dir(root: str | Path, campaign_id: str) -> Path:
    return Path(root) / CAMPAIGNS_DIR / campaign_id


def is_campaign_event(e: ev.Event) -> bool:
    return type(e) in ev.CAMPAIGN_TYPES


def campaign_ids(root: str | Path) -> list[str]:
    """The campaigns with an exported log under `root`, oldest first."""
    base = Path(root) / CAMPAIGNS_DIR
    logs = sorted(base.glob("*/log.aolog"), key=lambda p: p.stat().st_mtime) if base.is_dir() else []
    return [p.parent.name for p in logs]


def unknown_campaign(campaign_id: str, root: str, nats_url: str | None = None) -> str | None:
    """Why `campaign_id` is not a campaign of `root` (or of the stream at `nats_url`), or None.
    Only reads: a mistyped id or root creates nothing. A campaign of this root has its folder
    `<root>/campaigns/<id>/` (its driver makes it before its first event)."""
    from events.subjects import check_run_id

    try:
        check_run_id(campaign_id)
    except ValueError as e:
        return f"campaign {e}"
    if campaign_dir(root, campaign_id).is_dir():
        return None
    if nats_url:
        if asyncio.run(_started_on(nats_url, campaign_id)):
            return None
        return f"campaign {campaign_id!r}: no CampaignStarted on the event stream at {nats_url}"
    if not Path(root).is_dir():
        return f"campaign {campaign_id!r}: no runs root {root!r} (--root: the folder the campaign ran under)"
    known = [p.name for p in sorted((Path(root) / CAMPAIGNS_DIR).glob("*")) if p.is_dir()]
    there = f"campaigns there: {', '.join(known)}" if known else "there are no campaigns there"
    return f"campaign {campaign_id!r}: not under {Path(root) / CAMPAIGNS_DIR} ({there})"


async def _started_on(url: str, campaign_id: str) -> bool:
    from events.log import EventLog

    elog = await EventLog.connect(url, create=False, name="accelopt-campaign")
    try:
        return await elog.last_event(campaign_id, ev.CampaignStarted.subject) is not None
    except Exception:  # no stream yet
        return False
    finally:
        await elog.close()


def load_campaign(
    campaign: str, root: str | Path, *, nats_url: str | None = None, prefer_stream: bool = False
) -> CampaignView:
    """Fold a campaign given by id (its export under `<root>/campaigns/`, else the stream) or
    as a log file. Raises events.runsource.RunNotFound (creating nothing: see
    `unknown_campaign`), or LOG_DAMAGE for a damaged log."""
    if not Path(campaign).is_file():
        why = unknown_campaign(campaign, str(root), nats_url)
        if why:
            from events.runsource import RunNotFound

            raise RunNotFound(why)
    view = CampaignView()
    fold_events(campaign, root, view.apply, nats_url=nats_url, prefer_stream=prefer_stream)
    if view.started is None:
        from events.runsource import RunNotFound

        raise RunNotFound(f"{campaign!r} is not a campaign (its log has no CampaignStarted)")
    return view


# --- one run's outcome -------------------------------------------------------------------------


def run_outcome(view: RunView, item: str, *, timed_out: bool = False) -> dict:
    """The fields of a `CampaignRunFinished` for the run folded in `view` (full, not compact:
    the priciest call is read from its cost series). A run of the campaign optimizes one
    problem; its gain is its best kernel over the kernel it started from: the end-of-problem
    re-measure where it made one, else its search's profiles, else (an emulated device) the
    cost model's estimates."""
    costs = [p.cost_usd for p in view.cost_series]
    max_call = max((b - a for a, b in zip([0.0, *costs], costs, strict=False)), default=0.0)
    status = view.status if not (timed_out and view.status == "running") else "incomplete"
    out: dict = {
        "status": status,
        "reason": view.failed.reason if view.failed else "",
        "cost_usd": view.cost_usd,
        "max_call_usd": max_call,
        "llm_calls": view.llm_calls,
        "duration_s": round(view.duration_s, 3),
        "memory_entries": list(view.memory_entry_ids),
    }
    if view.failed is not None and view.failed.reason.startswith("unserved: "):
        out["unserved"] = [view.failed.reason.removeprefix("unserved: ")]
    results = view.results()
    if not results:
        return out
    r = results[0]
    p = view.problems[r.problem]
    out["kernels"] = r.kernels
    base = view.kernels.get(p.baseline_id or "")
    if base is None or base.status not in ("passed", "unmeasured"):
        return out  # nothing to optimize from (its baseline failed, or never ran)
    best = view.kernels.get(r.best_kernel_id or "") or base
    estimated = r.speedup is None and base.estimated_ms is not None
    gain: float | None
    if best.kernel_id == base.kernel_id or best.source == base.source:
        gain, source = 1.0, "recorded"
    elif estimated:
        gain, source = r.est_speedup, "estimated"
    elif r.remeasured_speedup is not None:
        gain, source = r.remeasured_speedup, "remeasured"
    else:
        gain, source = r.speedup, "recorded"
    if gain is None or not math.isfinite(gain):
        return out
    out.update(
        gain=gain,
        gain_source=source,
        estimated=estimated,
        best_kernel_id=best.kernel_id,
        best_source=best.source,
        start_ms=r.est_baseline_ms if estimated else r.baseline_ms,
        best_ms=(r.est_best_ms if estimated else r.best_ms) if best is not base else None,
        pct_peak=(r.est_best_pct_peak if estimated else r.best_pct_peak),
    )
    if out["best_ms"] is None:
        out["best_ms"] = out["start_ms"]
    return out


# --- the read model ---------------------------------------------------------------------------


@dataclass
class CampaignRun:
    scheduled: ev.CampaignRunScheduled
    finished: ev.CampaignRunFinished | None = None


@dataclass
class ItemPoint:
    ts: float
    speedup: float  # over the suite's baseline
    pct_peak: float | None
    run: str
    figures: str = ""  # how they were had (`figure_label`)


class CampaignView:
    def __init__(self, campaign_id: str | None = None) -> None:
        self.campaign_id = campaign_id
        self.core: CampaignCore | None = None
        self.started: ev.CampaignStarted | None = None
        self.runs: dict[str, CampaignRun] = {}
        self.history: dict[str, list[ItemPoint]] = {}  # item -> its speedup after each of its runs
        self.spend: list[ev.CampaignBudgetSpent] = []
        self.parked: list[ev.CampaignDeviceParked] = []
        self.paused: ev.CampaignPaused | None = None
        self.stopped: ev.CampaignStopped | None = None
        self.resumed: list[ev.CampaignResumed] = []
        self.queues: dict[str, ev.CampaignRunScheduled] = {}  # device -> its last decision
        self.events = 0
        self.first_ts: float | None = None
        self.last_ts: float | None = None

    @classmethod
    def from_events(cls, events: Iterable[ev.Event]) -> CampaignView:
        view = cls()
        for e in events:
            view.apply(e)
        return view

    def apply(self, e: ev.Event) -> None:
        if not is_campaign_event(e):
            return
        self.events += 1
        if self.campaign_id is None:
            self.campaign_id = e.run_id
        self.first_ts = e.ts if self.first_ts is None else min(self.first_ts, e.ts)
        self.last_ts = e.ts if self.last_ts is None else max(self.last_ts, e.ts)
        if self.core is None:
            self.core = CampaignCore(e.run_id)
        if isinstance(e, ev.CampaignStarted):
            self.started = self.started or e
        elif isinstance(e, ev.CampaignRunScheduled):
            self.runs.setdefault(e.run, CampaignRun(e))
            self.queues[e.device] = e
            self.paused = None
        elif isinstance(e, ev.CampaignRunFinished):
            run = self.runs.get(e.run)
            if run is not None and run.finished is None:
                run.finished = e
        elif isinstance(e, ev.CampaignBudgetSpent):
            if all(s.run != e.run for s in self.spend):
                self.spend.append(e)
        elif isinstance(e, ev.CampaignDeviceParked):
            self.parked.append(e)
        elif isinstance(e, ev.CampaignPaused):
            self.paused = e
        elif isinstance(e, ev.CampaignStopped):
            self.stopped = self.stopped or e
        elif isinstance(e, ev.CampaignResumed):
            self.resumed.append(e)
        self.core.step(e)  # the core's view of the items (its decisions are the recorded ones)
        if isinstance(e, ev.CampaignRunFinished):
            it = self.items.get(e.item)
            points = self.history.setdefault(e.item, [])
            if it is not None and all(p.run != e.run for p in points):
                points.append(
                    ItemPoint(e.ts, it.speedup, it.pct_peak, e.run, figure_label(it, self.item_figures))
                )

    # --- derived ------------------------------------------------------------------------------

    @property
    def spec(self) -> CampaignSpec | None:
        return self.core.spec if self.core is not None else None

    @property
    def items(self) -> dict[str, ItemState]:
        return self.core.items if self.core is not None else {}

    @property
    def item_figures(self) -> str:
        """ "measured", or "product" for a log from before measured figures."""
        return self.started.item_figures if self.started is not None else "measured"

    @property
    def spent_usd(self) -> float:
        return self.core.spent_usd if self.core is not None else 0.0

    def spend_per_day(self) -> dict[str, float]:
        return dict(sorted(self.core.day_spent.items())) if self.core is not None else {}

    def item_state(self, it: ItemState, campaign: State | None = None) -> str:
        """`ready`, `parked`, `settled: ...`, or while a run of it has no end, that run's state
        (replay/states.py) in the campaign's `campaign` state (default: driven)."""
        if it.running:
            return campaign_run_state(None, campaign or State(name="running")).name
        if self.core is not None and it.item.device in self.core.parked:
            return "parked"
        return f"settled: {it.settled}" if it.settled else "ready"

    def finished_runs(self) -> list[CampaignRun]:
        return [r for r in self.runs.values() if r.finished is not None]

    def run_ids(self) -> list[str]:
        return list(self.runs)


def item_points_by_run(root: str | Path) -> dict[str, tuple[str, str, ItemPoint]]:
    """Each campaign run under `root` (its exported log): (campaign, item, the item's figures
    after the run's end). For `accelopt runs`: a campaign's run gains over the kernel it started
    from, its item's figure is over the suite's baseline. A damaged log is skipped."""
    from events.runsource import file_events

    out: dict[str, tuple[str, str, ItemPoint]] = {}
    for cid in campaign_ids(root):
        view = CampaignView(cid)
        try:
            for e in file_events(campaign_dir(root, cid) / "log.aolog"):
                view.apply(e)
        except (OSError, ValueError):
            continue
        for item, points in view.history.items():
            out.update((p.run, (cid, item, p)) for p in points)
    return out


# --- verify --------------------------------------------------------------------------------------


class CampaignDecider:
    """A campaign's scheduler (`CampaignCore`) as `replay --verify` drives it
    (`replay.verify.Verifier(CampaignDecider)`): its decisions are the types it authors, and
    the log is finished once it holds the campaign's stop."""

    def __init__(self, campaign_id: str) -> None:
        self.core = CampaignCore(campaign_id)

    def read(self, e: ev.Event) -> ev.Event:
        return e

    def is_decision(self, e: ev.Event) -> bool:
        return type(e) in ev.CAMPAIGN_DECISION_TYPES

    def step(self, e: ev.Event) -> list[ev.Event]:
        return self.core.step(e)

    def unasked(self, e: ev.Event) -> bool:
        return False

    def ends(self, e: ev.Event) -> bool:
        return isinstance(e, ev.CampaignStopped)


# --- what a user reads ---------------------------------------------------------------------------


FIGURES_NOTE = (
    "speedup and % of peak: the item's best kernel against the suite's baseline, measured together at the "
    "end of its last run: measured (N rounds, ±noise): N interleaved rounds on fresh seeds, the ratio of "
    "the medians, two figures within ±noise cannot be told apart; estimated: the cost model's latencies "
    "(an emulated device); product (old log): a log from before measured figures, the product of its "
    "runs' gains, not a measurement"
)


def figure_label(it: ItemState, item_figures: str = "measured") -> str:
    """How an item's speedup and % of peak were had, in a table cell: `measured (3 rounds,
    ±4%)`, `estimated`, `product (old log)`, or `-` before any run ended."""
    if it.measured == "interleaved":
        noise = f", ±{it.noise:.0%}" if it.noise is not None else ""
        return f"measured ({it.measured_rounds} round{'s' if it.measured_rounds != 1 else ''}{noise})"
    if it.measured == "estimated":
        return "estimated"
    if item_figures == "product" and it.runs:
        return "product (old log)"
    return "-"


def figure_how(it: ItemState, item_figures: str = "measured") -> str:
    """The same in a sentence."""
    if it.measured == "interleaved":
        noise = f"; two figures within ±{it.noise:.0%} cannot be told apart" if it.noise is not None else ""
        return (
            f"measured at the end of {it.measured_run}: its best against the suite's baseline in "
            f"{it.measured_rounds} interleaved round{'s' if it.measured_rounds != 1 else ''} on fresh seeds, "
            f"the ratio of the medians{noise}"
        )
    if it.measured == "estimated":
        return (
            f"estimated at the end of {it.measured_run}: the cost model's latency of its best against "
            "the suite's baseline's (an emulated device: not a measurement)"
        )
    if item_figures == "product" and it.runs:
        return "a log from before measured figures: the product of its runs' gains, not a measurement"
    return "no run of it has ended"


def figure_text(it: ItemState) -> str:
    """`3.21x over the baseline, 12.0% of peak (measured (3 rounds, ±4%))`: the driver's note."""
    pct = f", {it.pct_peak:.1%} of peak" if it.pct_peak is not None else ""
    est = "est. " if it.estimated else ""
    return f"{est}{it.speedup:.2f}x over the baseline{pct} ({figure_label(it)})"


@dataclass
class ItemRow:
    item: str
    device: str
    runs: int
    speedup: float  # over the suite's baseline, as `figures` says it was had
    pct_peak: float | None
    estimated: bool  # a cost model's figures (an emulated device)
    figures: str  # how: "measured (3 rounds, ±4%)", "estimated", "product (old log)", "-"
    figures_how: str  # the same in a sentence
    state: str
    why: str  # its place in its device's last queue
    cost_usd: float
    best_run: str | None
    best_kernel: str | None


def item_rows(view: CampaignView, campaign: State | None = None) -> list[ItemRow]:
    why: dict[str, str] = {}
    for decision in view.queues.values():
        for q in decision.queue:
            why[q.item] = f"{q.state}: {q.why}" if q.why else q.state
    return [
        ItemRow(
            item=key,
            device=it.item.device,
            runs=it.runs,
            speedup=it.speedup,
            pct_peak=it.pct_peak,
            estimated=it.estimated,
            figures=figure_label(it, view.item_figures),
            figures_how=figure_how(it, view.item_figures),
            state=view.item_state(it, campaign),
            why=why.get(key, "not scheduled yet"),
            cost_usd=it.cost_usd,
            best_run=it.best_run,
            best_kernel=it.best_kernel,
        )
        for key, it in view.items.items()
    ]


def geomean_speedup(rows: list[ItemRow], *, estimated: bool | None = None) -> float | None:
    xs = [r.speedup for r in rows if estimated is None or r.estimated == estimated]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def run_states(view: CampaignView, state: State) -> dict[str, State]:
    """Each of the campaign's runs' state (replay/states.py), given the campaign's."""
    return {run: campaign_run_state(r.finished, state) for run, r in view.runs.items()}


def state_counts(states: Iterable[State]) -> str:
    """`2 completed, 1 interrupted`: how many runs are in each state, in the vocabulary's order."""
    names = [s.name for s in states]
    return ", ".join(f"{names.count(n)} {n}" for n in STATES if n in names)


def summary(view: CampaignView, state: State) -> dict:
    """The campaign in one JSON object (`<root>/campaigns/<id>/campaign.json`, `campaign status
    --json`), in its `state` (replay/states.py: from its log and its driver's lock)."""
    rows = item_rows(view, state)
    spec = view.spec
    started = view.started
    runs = run_states(view, state)
    return {
        "campaign_id": view.campaign_id,
        "name": started.name if started else "",
        "state": state.name,
        "status": state.label,
        "resume": state.resume,
        "stopped": {"reason": view.stopped.reason, "detail": view.stopped.detail} if view.stopped else None,
        "started_ts": started.ts if started else None,
        "last_ts": view.last_ts,
        "policy": spec.scheduler.policy if spec else "",
        "runs": len(view.runs),
        "running": [run for run, st in runs.items() if st.name == "running"],
        "run_states": state_counts(runs.values()),
        "resumes": len(view.resumed),
        "spent_usd": view.spent_usd,
        "budget": {"total_usd": spec.budget.total_usd, "daily_usd": spec.budget.daily_usd} if spec else None,
        "spend_per_day": view.spend_per_day(),
        "item_figures": view.item_figures,
        "geomean_speedup_measured": geomean_speedup(rows, estimated=False),
        "geomean_speedup_estimated": geomean_speedup(rows, estimated=True),
        "parked": {p.device: p.reason for p in view.parked},
        "items": [r.__dict__ for r in rows],
        "run_list": [
            {
                "run": r.scheduled.run,
                "index": r.scheduled.index,
                "item": r.scheduled.item,
                "scheduled_ts": r.scheduled.ts,
                "why": r.scheduled.reason.why,
                "state": runs[r.scheduled.run].name,
                "status": runs[r.scheduled.run].label,
                "resume": runs[r.scheduled.run].resume,
                "gain": r.finished.gain if r.finished else None,
                "cost_usd": r.finished.cost_usd if r.finished else None,
                "duration_s": r.finished.duration_s if r.finished else None,
            }
            for r in view.runs.values()
        ],
    }
