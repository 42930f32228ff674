"""A campaign's log as its driver writes it, without NATS, Ray or devices: each input the
driver would publish, then the scheduler core's decisions (accelopt/campaign_core.py). For
the scheduler's tests and the dashboard's campaign page."""

from __future__ import annotations

from accelopt import catalog as c
from accelopt.campaign import spec_from_dict
from accelopt.campaign_core import CampaignCore

CID = "camp-test"
T0 = 1_800_000_000.0  # a fixed clock: decisions depend on the inputs' timestamps only


def item(suite: str, problem: str, device: str, op_type: str | None = None) -> c.CampaignItem:
    return c.CampaignItem(
        key=f"{suite}/{problem}@{device}",
        suite=suite,
        problem=problem,
        device=device,
        language="nki" if device == "trn1" else "c",
        op_type=op_type or problem,
        content_hash="h-" + problem,
    )


ITEMS = [
    item("cpu_v2", "silu", "cpu"),
    item("cpu_v2", "bmm", "cpu"),
    item("cpu_v2", "matmul", "cpu"),
    item("nki_tune", "matmul", "trn1"),
]


def started(
    spec: dict,
    items=ITEMS,
    max_call: float = 0.0,
    ts: float = T0,
    insight_sources: dict[str, list[str]] | None = None,
) -> c.CampaignStarted:
    full = {"problems": ["cpu_v2/silu@cpu"], **spec}
    return c.CampaignStarted(
        event_id=c.derive_event_id(CID, "CampaignStarted"),
        run_id=CID,
        ts=ts,
        name="t",
        spec=spec_from_dict(full).to_dict(),
        items=items,
        root="runs",
        memory_uri="/tmp/m",
        max_call_usd=max_call,
        insight_sources=insight_sources,
    )


def finished(s: c.CampaignRunScheduled, ts: float, **fields) -> c.CampaignRunFinished:
    base = {"status": "completed", "duration_s": 60.0, "best_kernel_id": f"k-{s.run}", "best_source": "src"}
    return c.CampaignRunFinished(
        event_id=c.derive_event_id(CID, "CampaignRunFinished", s.run),
        run_id=CID,
        ts=ts,
        run=s.run,
        item=s.item,
        **{**base, **fields},
    )


class Log:
    """The campaign's log as the driver writes it: each input, then the core's decisions."""

    def __init__(self) -> None:
        self.core = CampaignCore(CID, clock=lambda: 0.0)
        self.events: list[c.Event] = []

    def put(self, e: c.Event) -> list[c.Event]:
        outs = self.core.step(e)
        self.events += [e, *outs]
        return outs

    def scheduled(self) -> list[c.CampaignRunScheduled]:
        return [e for e in self.events if isinstance(e, c.CampaignRunScheduled)]

    def running(self) -> list[c.CampaignRunScheduled]:
        return [r.scheduled for r in self.core.running]


def synthetic_campaign(policy: str = "expected_gain") -> list[c.Event]:
    """A campaign with a $2 budget whose every run teaches the memory an insight. Under the first
    `expected_gain` (the default here: the dashboard's tests read its log) those insights keep
    re-opening the plateaued items until the budget stops it; under `expected_gain_v2` the NKI
    insights do not re-open the C items and it stops with every item settled."""
    log = Log()
    spec = {"budget": {"total_usd": 2.0}, "stop": {"plateau_runs": 2}, "scheduler": {"policy": policy}}
    log.put(started(spec, max_call=0.01))
    ts = T0
    gains = iter([2.0, 1.0, 1.3, 1.0, 1.0, 1.6, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    while not log.core.stopped:
        s = log.running()[0]
        ts += 45
        gain = next(gains, 1.0)
        pct = 0.2 if s.device == "cpu" else None
        log.put(
            finished(s, ts, gain=gain, cost_usd=0.05, max_call_usd=0.004, memory_entries=["m"], pct_peak=pct)
        )
    return log.events


def policy_campaign(policy: str) -> list[c.Event]:
    """A campaign that tells the expected-gain policies apart: one item whose first run is big
    and whose repeats gain little, an outlier run length, and NKI insights (trn1) arriving
    while C items (cpu) of the same operator sit on a plateau."""
    log = Log()
    spec = {
        "scheduler": {"policy": policy},
        "stop": {"plateau_runs": 2, "max_runs": 16},
        "devices": {"trn1": {"runs_at_once": 1}},
    }
    log.put(started(spec))
    first_gain = {"silu": 4.0, "bmm": 1.5, "matmul": 1.3}
    ts = T0
    n = 0
    while not log.core.stopped:
        s = log.running()[0]
        n += 1
        ts += 60
        it = log.core.items[s.item]
        name = it.item.problem
        gain = first_gain[name] if it.runs == 0 else (1.08 if name == "bmm" else 1.01)
        trn = s.device == "trn1"
        log.put(
            finished(
                s,
                ts,
                gain=gain,
                duration_s=900.0 if n == 3 else (120.0 if it.runs == 0 else 40.0),
                memory_entries=["m"] if trn else [],
                estimated=trn,
            )
        )
    return log.events
