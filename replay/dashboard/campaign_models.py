"""The dashboard's campaign view models: a folded `CampaignView` in, msgspec Structs out.

The campaign page shows per device each item's best speedup and % of peak over time, the
spend per day, each device's queue and why each item is where it is, and the runs (each a
link to its run page). Charts and rows are the static report's (`replay/render/campaign.py`).
"""

from __future__ import annotations

import time

import msgspec

from replay.campaign import FIGURES_NOTE, CampaignView, item_rows, run_states, summary
from replay.render import fmt
from replay.render.campaign import (
    ITEM_HEADERS,
    QUEUE_HEADERS,
    RUN_HEADERS,
    devices,
    item_cells,
    peak_chart,
    queue_rows,
    run_cells,
    speedup_chart,
    spend_chart,
)
from replay.states import State


class CampaignRow(msgspec.Struct, kw_only=True):
    """One campaign in the list (and the header of its page)."""

    campaign_id: str
    name: str
    state: str  # its state's name (replay/states.py)
    status: str  # its label, as `accelopt campaign status` shows it
    resume: str  # the command that goes on with it ("" where nothing does)
    live: bool
    source: str
    runs: int
    run_states: str  # how many of its runs are in each state: "3 completed, 1 interrupted"
    items: int
    speedup_text: str  # geomean over items: measured, and estimated apart
    spent_usd: float
    spend_text: str  # spent / total budget
    policy: str
    started: str
    last_event: str
    events: int
    stopped: str  # why it stopped ("" while it goes on)


class DeviceBlock(msgspec.Struct, kw_only=True):
    device: str
    speedup_svg: str
    pct_svg: str
    queue_headers: list[str]
    queue: list[list[str]]  # its last decision's queue: each item's place and why
    parked: str  # why nobody serves it ("" when it is served)


class CampaignModel(msgspec.Struct, kw_only=True):
    campaign: CampaignRow
    item_headers: list[str]
    items: list[list[str]]
    figures_note: str  # how the items' speedups and % of peak were had
    devices: list[DeviceBlock]
    spend_svg: str
    spend_per_day: dict[str, float]
    run_headers: list[str]
    runs: list[list[str]]
    generated_ts: float


def _geomeans(s: dict) -> str:
    parts = []
    if s["geomean_speedup_measured"] is not None:
        parts.append(fmt.speedup(s["geomean_speedup_measured"]))
    if s["geomean_speedup_estimated"] is not None:
        parts.append("est. " + fmt.speedup(s["geomean_speedup_estimated"]))
    return " · ".join(parts) or "-"


def campaign_row(
    view: CampaignView, source: str, state: State, *, streaming: bool, now: float | None = None
) -> CampaignRow:
    """`state`: the campaign's (replay/states.py: its log and its driver's lock)."""
    s = summary(view, state)
    spec = view.spec
    total = spec.budget.total_usd if spec is not None else None
    return CampaignRow(
        campaign_id=view.campaign_id or "",
        name=s["name"],
        state=state.name,
        status=state.label,
        resume=state.resume,
        live=streaming and source == "stream" and state.live,
        source=source,
        runs=len(view.runs),
        run_states=s["run_states"],
        items=len(view.items),
        speedup_text=_geomeans(s),
        spent_usd=view.spent_usd,
        spend_text=fmt.usd(view.spent_usd) + (f" / {fmt.usd(total)}" if total is not None else ""),
        policy=s["policy"],
        started=fmt.stamp(s["started_ts"]),
        last_event=fmt.ago(view.last_ts, now),
        events=view.events,
        stopped=f"{view.stopped.reason}: {view.stopped.detail}" if view.stopped else "",
    )


def campaign_model(view: CampaignView, source: str, state: State, *, streaming: bool) -> CampaignModel:
    parked = {p.device: p.reason for p in view.parked}
    if view.core is not None:
        parked = {d: parked.get(d, why) for d, why in view.core.parked.items()}
    runs = run_states(view, state)
    return CampaignModel(
        campaign=campaign_row(view, source, state, streaming=streaming),
        item_headers=ITEM_HEADERS,
        items=[item_cells(r) for r in item_rows(view, state)],
        figures_note=FIGURES_NOTE,
        devices=[
            DeviceBlock(
                device=d,
                speedup_svg=speedup_chart(view, d),
                pct_svg=peak_chart(view, d),
                queue_headers=QUEUE_HEADERS,
                queue=queue_rows(view, d),
                parked=parked.get(d, ""),
            )
            for d in devices(view)
        ],
        spend_svg=spend_chart(view),
        spend_per_day=view.spend_per_day(),
        run_headers=RUN_HEADERS,
        runs=[run_cells(view, r, runs[r]) for r in reversed(view.run_ids())],
        generated_ts=time.time(),
    )
