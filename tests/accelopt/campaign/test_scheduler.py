"""The campaign's scheduler as a pure function of its log (accelopt/campaign_core.py): what it
picks and why, how it settles and re-opens items, how it hands out and holds money, that a
device nobody serves is parked and reported, and that `replay --verify` re-derives the
schedule (and catches a decision that was changed). No NATS, Ray or devices: the inputs are
the events the driver would publish."""

from __future__ import annotations

import math
from pathlib import Path

import msgspec
import pytest
from campaign_log import CID, ITEMS, T0, Log, finished, item, started, synthetic_campaign

from accelopt import catalog as c
from accelopt.campaign import spec_from_dict
from accelopt.campaign_budget import utc_day
from accelopt.campaign_core import CampaignCore
from accelopt.config import ConfigError
from replay.campaign import CampaignDecider, CampaignView
from replay.states import Driver, campaign_state
from replay.verify import Verifier

DATA = Path(__file__).parent / "data"


def test_the_first_picks_fill_every_device_in_file_order_and_say_why() -> None:
    log = Log()
    outs = log.put(started({}))
    picks = [e for e in outs if isinstance(e, c.CampaignRunScheduled)]
    assert [(p.item, p.device) for p in picks] == [
        ("cpu_v2/silu@cpu", "cpu"),
        ("nki_tune/matmul@trn1", "trn1"),
    ]
    cpu = picks[0]
    assert cpu.run == f"{CID}-r001" and cpu.index == 1 and cpu.start_run is None and cpu.budget_usd is None
    assert "not run yet" in cpu.reason.why and cpu.reason.expected_gain == pytest.approx(0.2)
    # the queue says where every item of the device is and why
    assert [(q.item, q.state) for q in cpu.queue] == [
        ("cpu_v2/silu@cpu", "picked"),
        ("cpu_v2/bmm@cpu", "ready"),
        ("cpu_v2/matmul@cpu", "ready"),
    ]
    assert cpu.day == utc_day(T0)


def test_first_runs_that_pay_give_every_item_one_then_the_gainers_go_on_from_their_best() -> None:
    log = Log()
    log.put(started({}, items=ITEMS[:2]))
    silu = log.scheduled()[0]
    # silu's first run doubles it: an item not run yet now expects as much (the prior counted
    # as one first run)
    outs = log.put(finished(silu, T0 + 60, gain=2.0))
    (bmm,) = [e for e in outs if isinstance(e, c.CampaignRunScheduled)]
    assert bmm.item == "cpu_v2/bmm@cpu" and bmm.start_run is None
    assert bmm.reason.expected_gain == pytest.approx((math.log(2.0) + 0.2) / 2)
    assert "not run yet" in bmm.reason.why
    # bmm's first run gains little; both have run once and expect what repeat runs gain (none
    # seen yet: the prior): silu goes on first (file order), from its best kernel
    (nxt,) = [e for e in log.put(finished(bmm, T0 + 120, gain=1.05)) if isinstance(e, c.CampaignRunScheduled)]
    assert nxt.item == "cpu_v2/silu@cpu" and nxt.start_run == silu.run and nxt.start_kernel == f"k-{silu.run}"
    assert nxt.reason.expected_gain == pytest.approx(0.2) and "run once" in nxt.reason.why
    # its repeat run gains 1.5x: it stays on top, from that run's kernel
    (third,) = [
        e
        for e in log.put(finished(nxt, T0 + 180, gain=1.5, pct_peak=0.1))
        if isinstance(e, c.CampaignRunScheduled)
    ]
    repeat = (0.2 + math.log(1.5)) / 2
    assert third.item == "cpu_v2/silu@cpu" and third.start_run == nxt.run
    assert third.reason.expected_gain == pytest.approx((math.log(1.5) + repeat) / 2)
    others = {q.item: q for q in third.queue}
    assert others["cpu_v2/bmm@cpu"].state == "ready" and others["cpu_v2/bmm@cpu"].score < third.reason.score
    assert "10% of peak" in third.reason.why
    assert log.core.items["cpu_v2/silu@cpu"].speedup == pytest.approx(3.0)


def test_a_big_first_run_does_not_make_the_next_one_pay_over_an_item_not_run_yet() -> None:
    """A first run starts from the baseline and gains most: an item run once expects what
    REPEAT runs on its device gained, not its own first run, so an item not run yet (which
    expects what first runs gained) goes before it. (The first expected_gain re-picked silu,
    scoring it by its 4.89x first run.)"""
    log = Log()
    log.put(started({}, items=ITEMS[:3]))
    (silu,) = log.running()
    (bmm,) = [e for e in log.put(finished(silu, T0 + 60, gain=4.89)) if isinstance(e, c.CampaignRunScheduled)]
    (nxt,) = [e for e in log.put(finished(bmm, T0 + 120, gain=1.3)) if isinstance(e, c.CampaignRunScheduled)]
    firsts = (0.2 + math.log(4.89) + math.log(1.3)) / 3
    assert nxt.item == "cpu_v2/matmul@cpu" and nxt.reason.expected_gain == pytest.approx(firsts)
    queued = {q.item: q for q in nxt.queue}
    assert queued["cpu_v2/silu@cpu"].state == "ready" and "expected gain +22% per run (run once" in (
        queued["cpu_v2/silu@cpu"].why
    )
    # repeat runs pool over the device's items: silu's second run sets what bmm's expects
    (again,) = [
        e for e in log.put(finished(nxt, T0 + 180, gain=1.0)) if isinstance(e, c.CampaignRunScheduled)
    ]
    assert again.item == "cpu_v2/silu@cpu" and again.reason.expected_gain == pytest.approx(0.2)
    outs = log.put(finished(again, T0 + 240, gain=1.05))
    (pick,) = [e for e in outs if isinstance(e, c.CampaignRunScheduled)]
    repeat = (0.2 + math.log(1.05)) / 2
    assert pick.item == "cpu_v2/bmm@cpu" and pick.reason.expected_gain == pytest.approx(repeat)
    silu_q = next(q for q in pick.queue if q.item == "cpu_v2/silu@cpu")
    assert silu_q.score < pick.reason.score


def test_an_item_not_run_yet_is_charged_the_median_run_not_a_stretched_mean() -> None:
    """One run stretched to 20 minutes pulls the mean run up to ~7 minutes; the median stays at
    the usual minute, and an item not run yet is charged that."""
    items = [*ITEMS[:3], item("cpu_v2", "relu", "cpu")]
    log = Log()
    log.put(started({}, items=items))
    for gain, seconds in ((2.0, 60.0), (2.0, 60.0), (1.0, 1200.0)):
        (s,) = log.running()
        outs = log.put(finished(s, s.ts + 60, gain=gain, duration_s=seconds))
    (relu,) = [e for e in outs if isinstance(e, c.CampaignRunScheduled)]
    assert relu.item == "cpu_v2/relu@cpu" and relu.reason.expected_s == pytest.approx(60.0)
    assert relu.reason.expected_gain == pytest.approx((0.2 + 2 * math.log(2.0)) / 4, abs=1e-6)


@pytest.mark.parametrize(
    ("policy", "first_three"),
    [
        # silu; then silu again (run once, it expects what repeat runs gain: none seen yet, the
        # prior, over bmm's first-run expectation, which silu's first run pulled down); then bmm
        ("expected_gain_v2", ["cpu_v2/silu@cpu", "cpu_v2/silu@cpu", "cpu_v2/bmm@cpu"]),
        # v3: bmm, not run yet, expects at least what a repeat run does (the prior): it ties with
        # silu's repeat and goes first (fewer runs); then silu's repeat
        ("expected_gain_v3", ["cpu_v2/silu@cpu", "cpu_v2/bmm@cpu", "cpu_v2/silu@cpu"]),
    ],
)
def test_an_item_that_stops_gaining_sinks_then_settles_on_its_plateau(
    policy: str, first_three: list[str]
) -> None:
    log = Log()
    spec = {"stop": {"plateau_runs": 2, "min_gain": 0.05}, "scheduler": {"policy": policy, "prior_gain": 0.2}}
    log.put(started(spec, items=ITEMS[:2]))
    ts = T0
    order = []
    for _ in range(6):
        (s,) = log.running()
        order.append(s.item)
        ts += 60
        log.put(finished(s, ts, gain=1.01))  # below min_gain: no progress
        if log.core.stopped:
            break
    # ..., both plateau, the campaign stops
    assert order[:3] == first_three
    assert {k: it.settled for k, it in log.core.items.items()} == {
        "cpu_v2/silu@cpu": "plateau",
        "cpu_v2/bmm@cpu": "plateau",
    }
    stop = log.events[-1]
    assert isinstance(stop, c.CampaignStopped) and stop.reason == "settled"


def test_the_first_expected_gain_re_opens_a_plateaued_problem_on_an_insight_of_any_chip() -> None:
    log = Log()
    items = [item("cpu_v2", "matmul", "cpu"), item("nki_tune", "matmul", "trn1")]
    spec = {
        "stop": {"plateau_runs": 1},
        "devices": {"trn1": {"runs_at_once": 1}},
        "scheduler": {"policy": "expected_gain"},
    }
    log.put(started(spec, items=items))
    cpu, trn = sorted(log.running(), key=lambda s: s.device)
    log.put(finished(cpu, T0 + 30, gain=1.0))  # no gain: the cpu item plateaus
    assert log.core.items[cpu.item].settled == "plateau"
    assert not [s for s in log.running() if s.device == "cpu"]
    outs = log.put(finished(trn, T0 + 90, gain=1.5, memory_entries=["e1", "e2"], estimated=True))
    reopened = [e for e in outs if isinstance(e, c.CampaignRunScheduled) and e.device == "cpu"]
    assert len(reopened) == 1 and reopened[0].item == cpu.item
    assert reopened[0].policy == "expected_gain"
    assert reopened[0].reason.new_insights == 2 and reopened[0].reason.why.startswith("re-opened")
    assert "2 new insights of its operator" in reopened[0].reason.why


def _two_plateaued_c_matmuls_and_nki_insights(b_entries: list[str]) -> tuple[Log, list[c.Event]]:
    """cpu_v2/matmul@cpu plateaus; trn1's NKI matmul teaches the memory two insights; then
    cpu_v2/bmm@cpu (a C matmul too) ends its run with nothing gained and `b_entries` learnt."""
    log = Log()
    items = [
        item("cpu_v2", "matmul", "cpu"),
        item("cpu_v2", "bmm", "cpu", op_type="matmul"),
        item("nki_tune", "matmul", "trn1"),
    ]
    spec = {
        "stop": {"plateau_runs": 1},
        "devices": {"trn1": {"runs_at_once": 1}},
        "scheduler": {"policy": "expected_gain_v2_same_language"},
    }
    log.put(started(spec, items=items))
    a, trn = sorted(log.running(), key=lambda s: s.device)
    (b,) = [e for e in log.put(finished(a, T0 + 30, gain=1.0)) if isinstance(e, c.CampaignRunScheduled)]
    assert log.core.items[a.item].settled == "plateau" and b.item == "cpu_v2/bmm@cpu"
    log.put(finished(trn, T0 + 60, gain=1.5, memory_entries=["e1", "e2"], estimated=True))
    return log, log.put(finished(b, T0 + 90, gain=1.0, memory_entries=b_entries))


def test_an_insight_learnt_in_another_kernel_language_does_not_re_open_a_plateaued_problem() -> None:
    """Under `expected_gain_v2_same_language`, NKI insights (trn1) do not re-open the plateaued
    C matmul (cpu), nor count among its new insights; a C insight of its operator does."""
    log, outs = _two_plateaued_c_matmuls_and_nki_insights([])
    assert not [e for e in outs if isinstance(e, c.CampaignRunScheduled) and e.device == "cpu"]
    assert {k: it.settled for k, it in log.core.items.items() if k.endswith("@cpu")} == {
        "cpu_v2/matmul@cpu": "plateau",
        "cpu_v2/bmm@cpu": "plateau",
    }
    log, outs = _two_plateaued_c_matmuls_and_nki_insights(["c1"])
    (reopened,) = [e for e in outs if isinstance(e, c.CampaignRunScheduled) and e.device == "cpu"]
    assert reopened.item == "cpu_v2/matmul@cpu" and reopened.policy == "expected_gain_v2_same_language"
    assert reopened.reason.new_insights == 1 and reopened.reason.why.startswith("re-opened")
    assert "1 new insight of its operator" in reopened.reason.why


def _plateaued_c_matmul_and_nki_insights(settings: list[str]) -> tuple[c.CampaignStarted, list[c.Event]]:
    """cpu_v2/matmul@cpu plateaus, then nki_tune/matmul@trn1 (the same operator) teaches the
    memory two insights, under `expected_gain_v2` (which counts insights of any language) with
    the insight sources the driver records for these runs' memory settings (`settings`)."""
    from actors.runtime.campaign import insight_sources

    items = [item("cpu_v2", "matmul", "cpu"), item("nki_tune", "matmul", "trn1")]
    spec = {"stop": {"plateau_runs": 1}, "devices": {"trn1": {"runs_at_once": 1}}, "set": settings}
    sources = insight_sources(
        spec_from_dict({"problems": ["cpu_v2/matmul@cpu"], **spec}), items, ["cpu", "trn1"], "runs", "/tmp/m"
    )
    log = Log()
    first = started(spec, items=items, insight_sources=sources)
    log.put(first)
    cpu, trn = sorted(log.running(), key=lambda s: s.device)
    log.put(finished(cpu, T0 + 30, gain=1.0))
    assert log.core.items[cpu.item].settled == "plateau"
    return first, log.put(finished(trn, T0 + 90, gain=1.5, memory_entries=["e1", "e2"], estimated=True))


def test_the_scheduler_counts_only_the_insights_an_items_planner_sees() -> None:
    """By default a planner sees no insight of another chip, so NKI insights neither count for
    nor re-open a plateaued C item of their operator; where its runs share memory across chips
    (`memory.cross_device_share` > 0), they do."""
    first, outs = _plateaued_c_matmul_and_nki_insights([])
    assert first.insight_sources == {"cpu_v2/matmul@cpu": [], "nki_tune/matmul@trn1": []}
    assert not [e for e in outs if isinstance(e, c.CampaignRunScheduled) and e.device == "cpu"]
    first, outs = _plateaued_c_matmul_and_nki_insights(["memory.cross_device_share=0.25"])
    assert first.insight_sources == {
        "cpu_v2/matmul@cpu": ["nki_tune/matmul@trn1"],
        "nki_tune/matmul@trn1": ["cpu_v2/matmul@cpu"],
    }
    (reopened,) = [e for e in outs if isinstance(e, c.CampaignRunScheduled) and e.device == "cpu"]
    assert reopened.reason.new_insights == 2 and "2 new insights of its operator" in reopened.reason.why
    # the memory off: nothing is seen, nothing counts
    first, _ = _plateaued_c_matmul_and_nki_insights(
        ["memory.enabled=false", "memory.cross_device_share=0.25"]
    )
    assert first.insight_sources == {"cpu_v2/matmul@cpu": [], "nki_tune/matmul@trn1": []}


def test_target_pct_peak_settles_an_item() -> None:
    log = Log()
    log.put(started({"stop": {"target_pct_peak": 0.5}}, items=ITEMS[:1]))
    (s,) = log.running()
    outs = log.put(finished(s, T0 + 60, gain=3.0, pct_peak=0.6))
    assert log.core.items[s.item].settled == "target"
    assert isinstance(outs[-1], c.CampaignStopped) and outs[-1].reason == "settled"


def test_the_budget_is_shared_held_and_never_passed() -> None:
    """Two devices, a $1.00 cap, calls up to $0.01: each run gets its share less the reserve for
    the calls it may have in flight; what is handed out is held until the run ends; when what is
    left cannot fund a run, the campaign stops on the budget with its spend under the cap."""
    log = Log()
    log.put(started({"budget": {"total_usd": 1.0}}, max_call=0.01))
    runs = log.running()
    assert len(runs) == 2
    first = runs[0]
    # the first of two free slots: half of $1.00, less 4 roles x in-flight x $0.01
    assert first.llm_inflight == 6 and first.budget_usd == pytest.approx(0.26)
    held = sum(r.committed_usd for r in log.core.runs.values())
    assert held <= 1.0 + 1e-12
    ts = T0
    spent = 0.0
    while not log.core.stopped:
        s = log.running()[0]
        ts += 60
        # the worst case: a run reaches its budget with every call it may have in flight
        # (its in-flight limit, else the runs' default of 16 per role) still to come, each $0.01
        cost = s.budget_usd + 4 * (s.llm_inflight or 16) * 0.01
        spent += cost
        log.put(finished(s, ts, gain=1.2, cost_usd=cost, max_call_usd=0.005))
        assert log.core.spent_usd == pytest.approx(spent)
        assert spent + sum(r.committed_usd for r in log.core.running) <= 1.0 + 1e-9
    stop = log.events[-1]
    assert isinstance(stop, c.CampaignStopped) and stop.reason == "budget", stop
    assert spent <= 1.0
    spends = [e for e in log.events if isinstance(e, c.CampaignBudgetSpent)]
    assert spends[-1].spent_usd == pytest.approx(spent) and spends[-1].total_usd == 1.0


def test_the_day_budget_pauses_until_the_next_day() -> None:
    log = Log()
    log.put(started({"budget": {"daily_usd": 0.5}}, items=ITEMS[:1], max_call=0.01))
    (s,) = log.running()
    outs = log.put(finished(s, T0 + 60, gain=1.5, cost_usd=s.budget_usd + 0.1, max_call_usd=0.01))
    (pause,) = [e for e in outs if isinstance(e, c.CampaignPaused)]
    assert pause.until_ts > T0 and utc_day(pause.until_ts) != utc_day(T0)
    assert not log.running() and not log.core.stopped
    tick = c.CampaignTicked(event_id="tick1", run_id=CID, ts=pause.until_ts + 1, why="day")
    (nxt,) = [e for e in log.put(tick) if isinstance(e, c.CampaignRunScheduled)]
    assert nxt.day == utc_day(pause.until_ts)


def test_a_device_nobody_serves_is_parked_and_reported_not_waited_on() -> None:
    log = Log()
    log.put(started({}, items=[item("cpu_v2", "silu", "h100")]))
    (s,) = log.running()
    outs = log.put(
        finished(s, T0 + 120, status="failed", reason="unserved: profiler-h100", unserved=["profiler-h100"])
    )
    parked = [e for e in outs if isinstance(e, c.CampaignDeviceParked)]
    assert len(parked) == 1 and parked[0].device == "h100" and parked[0].items == [s.item]
    stop = outs[-1]
    assert isinstance(stop, c.CampaignStopped) and stop.reason == "no profilers"
    assert "accelopt worker --device h100" in stop.detail
    assert log.core.items[s.item].runs == 0  # the run did not count against the item


def test_a_resume_tries_a_parked_device_again() -> None:
    log = Log()
    log.put(started({}, items=[item("cpu_v2", "silu", "h100"), item("cpu_v2", "bmm", "cpu")]))
    h100 = next(s for s in log.running() if s.device == "h100")
    log.put(finished(h100, T0 + 120, status="failed", unserved=["profiler-h100"]))
    assert not [s for s in log.running() if s.device == "h100"]
    resumed = c.CampaignResumed(event_id="r1", run_id=CID, ts=T0 + 200, attempt=1)
    assert [e.device for e in log.put(resumed) if isinstance(e, c.CampaignRunScheduled)] == ["h100"]


def test_time_and_run_limits_stop_the_campaign_once_its_runs_end() -> None:
    log = Log()
    log.put(started({"stop": {"max_hours": 1.0}}, items=ITEMS[:1]))
    (s,) = log.running()
    assert s.deadline_ts == pytest.approx(T0 + 3600)
    outs = log.put(finished(s, T0 + 3700, status="incomplete", gain=1.3))
    assert isinstance(outs[-1], c.CampaignStopped) and outs[-1].reason == "time"
    log = Log()
    log.put(started({"stop": {"max_runs": 2}}, items=ITEMS[:1]))
    for i in range(2):
        (s,) = log.running()
        outs = log.put(finished(s, T0 + 60 * (i + 1), gain=1.5))
    assert len(log.scheduled()) == 2 and outs[-1].reason == "max_runs"


def test_round_robin_takes_every_item_in_turn() -> None:
    log = Log()
    log.put(started({"scheduler": {"policy": "round_robin"}}, items=ITEMS[:3]))
    order = []
    for i in range(6):
        (s,) = log.running()
        order.append(s.item.split("/")[1])
        log.put(finished(s, T0 + 60 * (i + 1), gain=2.0 if s.item.endswith("silu@cpu") else 1.0))
    assert order == ["silu@cpu", "bmm@cpu", "matmul@cpu"] * 2


@pytest.mark.parametrize("policy", ["expected_gain_v2", "expected_gain"])
def test_replay_verify_re_derives_the_schedule_and_catches_a_changed_decision(policy: str) -> None:
    events = synthetic_campaign(policy)
    v = Verifier(CampaignDecider)
    for e in events:
        assert v.feed(e)
    report = v.result()
    assert report.ok and report.decisions_checked > 5 and not report.pending_at_end
    # a decision changed after the fact (another item picked) is caught where it is
    i = next(i for i, e in enumerate(events) if isinstance(e, c.CampaignRunScheduled) and e.index == 3)
    other = next(q.item for q in events[i].queue if q.state == "ready")
    altered = [*events[:i], msgspec.structs.replace(events[i], item=other), *events[i + 1 :]]
    v = Verifier(CampaignDecider)
    for e in altered:
        if not v.feed(e):
            break
    bad = v.result()
    assert not bad.ok and bad.divergence.position == i + 1 and bad.divergence.kind == "different"
    # a log cut off mid-way (a killed driver) verifies, with what it had yet to publish
    cut = events[:i]
    v = Verifier(CampaignDecider)
    for e in cut:
        v.feed(e)
    assert v.result().ok


@pytest.mark.parametrize(
    ("policy", "status"),
    [
        ("expected_gain_v2", "completed (budget)"),
        ("expected_gain_v2_same_language", "completed (settled)"),
        ("expected_gain", "completed (budget)"),
    ],
)
def test_a_resumed_core_re_derives_what_was_decided_and_adds_nothing(policy: str, status: str) -> None:
    events = synthetic_campaign(policy)
    core = CampaignCore(CID)
    outbox: dict[str, c.Event] = {}
    for e in events:  # as the driver refolds its log on resume
        outbox.pop(e.event_id, None)
        outbox.update((o.event_id, o) for o in core.step(e))
    assert outbox == {}  # every decision it re-derived is already on the log: nothing to publish again
    view = CampaignView.from_events(events)
    assert campaign_state(view, Driver()).label == status and len(view.runs) == len(
        [e for e in events if isinstance(e, c.CampaignRunScheduled)]
    )


def test_a_log_written_by_the_first_expected_gain_still_verifies() -> None:
    """data/expected_gain_v1_campaign.jsonl was written by the first `expected_gain` (as it was
    before `expected_gain_v2`; `policy_campaign("expected_gain")`). Its file names its policy,
    so `replay --verify` re-derives it with that policy: it verifies, while the same inputs
    under `expected_gain_v2` make other decisions."""
    decoder = msgspec.json.Decoder(c.AnyEvent)
    events = [
        decoder.decode(line) for line in (DATA / "expected_gain_v1_campaign.jsonl").read_bytes().splitlines()
    ]
    v = Verifier(CampaignDecider)
    for e in events:
        assert v.feed(e), v.result().divergence
    report = v.result()
    assert report.ok and report.decisions_checked == sum(type(e) in c.CAMPAIGN_DECISION_TYPES for e in events)
    assert {e.policy for e in events if isinstance(e, c.CampaignRunScheduled)} == {"expected_gain"}
    first = events[0]
    assert isinstance(first, c.CampaignStarted)
    v2 = [
        msgspec.structs.replace(
            first, spec={**first.spec, "scheduler": {"policy": "expected_gain_v2", "prior_gain": 0.2}}
        ),
        *events[1:],
    ]
    v = Verifier(CampaignDecider)
    diverged = not all(v.feed(e) for e in v2)
    assert diverged and v.result().divergence is not None


def test_bad_campaign_files_name_the_key() -> None:
    with pytest.raises(ConfigError, match=r"devices\.cpu\.preset"):
        spec_from_dict({"problems": ["cpu_v2/silu@cpu"], "devices": {"cpu": {"preset": "nope"}}})
    with pytest.raises(ConfigError, match=r"scheduler\.policy"):
        spec_from_dict({"problems": ["cpu_v2/silu@cpu"], "scheduler": {"policy": "greedy"}})
    with pytest.raises(ConfigError, match="problems"):
        spec_from_dict({"problems": ["silu"]})
    with pytest.raises(ConfigError, match=r"budget\.total_usd"):
        spec_from_dict({"problems": ["a/b"], "budget": {"total_usd": -1}})
    with pytest.raises(ConfigError, match="unknown"):
        spec_from_dict({"problems": ["a/b"], "stopp": {}})
