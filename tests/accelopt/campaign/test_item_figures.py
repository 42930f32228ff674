"""An item's speedup and % of peak are its last measurement's (`CampaignItemMeasured`: its best
against the suite's baseline in the same interleaved rounds), never a product of its runs'
gains; the run's gain (candidate over start in those rounds) is what plateaus are judged by
and the measured % of peak what targets are. A log from before measured figures still folds,
with the product, marked as such. The scheduler core on a campaign's log as its driver writes
it (tests/shared/campaign_log.py): the real driver's measurements are in test_campaign_figures.py."""

from __future__ import annotations

import math

import msgspec
import pytest
from campaign_log import CID, T0, Log, finished, item, started

from accelopt import catalog as c
from replay.campaign import CampaignDecider, CampaignView, item_rows, summary
from replay.states import Driver, campaign_state
from replay.verify import Verifier

SILU = [item("cpu_v2", "silu", "cpu")]


def _started(spec: dict) -> c.CampaignStarted:
    return msgspec.structs.replace(started(spec, items=SILU), item_figures="measured")


def side(ms: list[float], pct: float | None = None, status: str = "passed") -> c.RemeasuredSide:
    med = sorted(ms)[len(ms) // 2] if ms else None
    return c.RemeasuredSide(
        kernel_id=f"k{ms[0] if ms else 0}", status=status, rounds_ms=ms, median_ms=med, peak_fraction=pct
    )


def measured(s: c.CampaignRunScheduled, ts: float, **sides: c.RemeasuredSide) -> c.CampaignItemMeasured:
    return c.CampaignItemMeasured(
        event_id=c.derive_event_id(CID, "CampaignItemMeasured", s.run),
        run_id=CID,
        ts=ts,
        run=s.run,
        item=s.item,
        method="interleaved",
        rounds=3,
        seed_offsets=[5_000_000, 5_010_000, 5_020_000],
        **sides,
    )


def _silu_runs(log: Log) -> list[c.CampaignRunScheduled]:
    return [s for s in log.running() if s.item == "cpu_v2/silu@cpu"]


def two_measured_runs(spec: dict | None = None) -> tuple[Log, list[c.CampaignRunScheduled]]:
    """cpu_v2/silu@cpu twice: run 1 measures the baseline at 10 ms and its best at 5 ms (2.0x;
    the run's own profiles said 2.2x); run 2 starts from that kernel, measured at 4.8 ms in its
    rounds, the baseline at 10.4 ms, and its best at 4.0 ms: the item is 2.6x, where the product
    of the gains would be 2.0 x 1.2 = 2.4x (or 2.2 x 1.3 = 2.86x from the recorded gains)."""
    log = Log()
    log.put(_started({"problems": ["cpu_v2/silu@cpu"], **(spec or {})}))
    (s1,) = _silu_runs(log)
    ts = T0 + 60
    log.put(measured(s1, ts, origin=side([10.0, 10.1, 9.9], 0.05), candidate=side([5.0, 5.1, 4.9], 0.10)))
    log.put(finished(s1, ts + 1, gain=2.2, gain_source="remeasured", pct_peak=0.11))
    (s2,) = _silu_runs(log)
    ts += 60
    log.put(
        measured(
            s2,
            ts,
            origin=side([10.4, 10.5, 10.3], 0.048),
            start=side([4.8, 4.9, 4.7], 0.104),
            candidate=side([4.0, 4.1, 3.9], 0.125),
        )
    )
    log.put(finished(s2, ts + 1, gain=1.3, gain_source="remeasured", pct_peak=0.2))
    return log, [s1, s2]


def test_an_items_speedup_is_its_last_measurement_not_a_product_of_gains() -> None:
    log, (_, s2) = two_measured_runs()
    it = log.core.items["cpu_v2/silu@cpu"]
    assert it.speedup == pytest.approx(10.4 / 4.0)  # 2.6x: the product would be 2.4x or 2.86x
    assert it.pct_peak == pytest.approx(0.125)  # the measured best's, not the run's recorded 0.2
    assert it.best_run == s2.run and it.runs == 2
    assert it.log_gains == pytest.approx([math.log(10.0 / 5.0), math.log(4.8 / 4.0)])
    assert (it.measured, it.measured_run, it.measured_rounds) == ("interleaved", s2.run, 3)
    view = CampaignView.from_events(log.events)
    (row,) = [r for r in item_rows(view) if r.item == "cpu_v2/silu@cpu"]
    assert row.speedup == pytest.approx(2.6) and row.figures.startswith("measured (3 rounds, ±")
    assert "3 interleaved rounds on fresh seeds" in row.figures_how and s2.run in row.figures_how
    assert [p.speedup for p in view.history["cpu_v2/silu@cpu"]] == pytest.approx([2.0, 2.6])
    s = summary(view, campaign_state(view, Driver()))
    assert s["item_figures"] == "measured"


def _after_one_doubling_run() -> tuple[Log, c.CampaignRunScheduled, c.CampaignRunScheduled]:
    """cpu_v2/silu@cpu's first run measured at 2.0x (baseline 10 ms, its best 5 ms, 10% of
    peak); its second run scheduled."""
    log = Log()
    log.put(_started({"problems": ["cpu_v2/silu@cpu"]}))
    (s1,) = _silu_runs(log)
    log.put(measured(s1, T0 + 60, origin=side([10.0]), candidate=side([5.0], 0.1)))
    log.put(finished(s1, T0 + 61, gain=2.0))
    (s2,) = _silu_runs(log)
    return log, s1, s2


def test_a_candidate_the_measurement_finds_slower_than_its_start_is_not_taken() -> None:
    log, s1, s2 = _after_one_doubling_run()
    # the run's own profiles said 1.5x; in the item's rounds its kernel is slower than its start
    log.put(measured(s2, T0 + 120, origin=side([9.0]), start=side([5.2], 0.09), candidate=side([5.5])))
    log.put(finished(s2, T0 + 121, gain=1.5, best_kernel_id="k-slower"))
    it = log.core.items["cpu_v2/silu@cpu"]
    assert it.best_run == s1.run and it.best_kernel == f"k-{s1.run}"
    assert it.speedup == pytest.approx(9.0 / 5.2) and it.pct_peak == pytest.approx(0.09)  # refreshed
    assert it.log_gains[-1] == 0.0


def test_an_items_net_gains_come_from_its_measurements_spread() -> None:
    """The core folds each run's gain less what the noise of its measurement (its start and its
    best in the same rounds) alone could make: a 1.05x inside a +-10 % spread nets nothing."""
    log, _, s2 = _after_one_doubling_run()
    start = msgspec.structs.replace(side([5.25], 0.1), spread=0.1)
    cand = msgspec.structs.replace(side([5.0], 0.1), spread=0.1)
    log.put(measured(s2, T0 + 120, origin=side([10.0]), start=start, candidate=cand))
    log.put(finished(s2, T0 + 121, gain=1.05))
    it = log.core.items["cpu_v2/silu@cpu"]
    assert it.log_gains == pytest.approx([math.log(2.0), math.log(1.05)])
    assert it.log_noise == pytest.approx([0.0, math.log(1.1)])
    assert it.net_log_gains == pytest.approx([math.log(2.0), 0.0])
    ctx = log.core._context("cpu")
    assert ctx.repeat_run_gain == pytest.approx((0.2 + math.log(1.05)) / 2)
    assert ctx.repeat_run_net_gain == pytest.approx(0.2 / 2)


def test_settling_uses_the_measured_figures() -> None:
    # target: the run's own profiles say 90% of peak, the measurement 30%: not at its target
    log = Log()
    log.put(_started({"problems": ["cpu_v2/silu@cpu"], "stop": {"target_pct_peak": 0.8}}))
    (s1,) = _silu_runs(log)
    log.put(measured(s1, T0 + 60, origin=side([10.0]), candidate=side([5.0], 0.3)))
    log.put(finished(s1, T0 + 61, gain=2.0, pct_peak=0.9))
    assert log.core.items["cpu_v2/silu@cpu"].settled == ""
    # plateau: runs whose own profiles gained 1.5x each, each measured no faster than its start
    log = Log()
    log.put(_started({"problems": ["cpu_v2/silu@cpu"], "stop": {"plateau_runs": 2}}))
    for n in range(3):
        (s,) = _silu_runs(log)
        start = {"start": side([5.0])} if n else {}
        cand = side([5.0]) if n == 0 else side([5.05])
        log.put(measured(s, T0 + 60 * (n + 1), origin=side([10.0]), candidate=cand, **start))
        log.put(finished(s, T0 + 60 * (n + 1) + 1, gain=1.5))
    it = log.core.items["cpu_v2/silu@cpu"]
    assert it.settled == "plateau" and it.speedup == pytest.approx(2.0)


def test_a_run_without_a_measurement_changes_nothing_in_a_measured_campaign() -> None:
    log = Log()
    log.put(_started({"problems": ["cpu_v2/silu@cpu"]}))
    (s1,) = _silu_runs(log)
    log.put(finished(s1, T0 + 61, gain=3.0, pct_peak=0.5))
    it = log.core.items["cpu_v2/silu@cpu"]
    assert (it.speedup, it.pct_peak, it.best_run, it.measured) == (1.0, None, None, "")


def test_a_log_from_before_measured_figures_folds_with_the_product_marked() -> None:
    log = Log()
    log.put(started({"problems": ["cpu_v2/silu@cpu"]}, items=SILU))  # no item_figures: a log written before
    for gain in (2.0, 1.25):
        (s,) = _silu_runs(log)
        log.put(finished(s, T0 + 60, gain=gain, pct_peak=0.2))
    view = CampaignView.from_events(log.events)
    (row,) = [r for r in item_rows(view) if r.item == "cpu_v2/silu@cpu"]
    assert row.speedup == pytest.approx(2.5) and row.figures == "product (old log)"
    assert "not a measurement" in row.figures_how
    assert summary(view, campaign_state(view, Driver()))["item_figures"] == "product"


def test_replay_verify_re_derives_a_measured_campaign_and_needs_its_measurements() -> None:
    log, _ = two_measured_runs({"stop": {"max_runs": 3}})
    v = Verifier(CampaignDecider)
    assert all(v.feed(e) for e in log.events) and v.result().ok
    # without its measurements the core decides otherwise: run 2 would start from the baseline
    v = Verifier(CampaignDecider)
    for e in log.events:
        if not isinstance(e, c.CampaignItemMeasured):
            v.feed(e)
    d = v.result().divergence
    assert d is not None and (d.kind, d.event_type) == ("different", "CampaignRunScheduled")
    assert isinstance(d.recorded, c.CampaignRunScheduled) and d.recorded.start_run is not None
    assert isinstance(d.replayed, c.CampaignRunScheduled) and d.replayed.start_run is None


def test_a_recorded_log_from_before_still_folds_verifies_and_says_its_figures_are_a_product() -> None:
    """data/expected_gain_v1_campaign.jsonl: a campaign log written before measured figures."""
    from pathlib import Path

    data = Path(__file__).parent / "data" / "expected_gain_v1_campaign.jsonl"
    decoder = msgspec.json.Decoder(c.AnyEvent)
    events = [decoder.decode(line) for line in data.read_bytes().splitlines()]
    v = Verifier(CampaignDecider)
    assert all(v.feed(e) for e in events) and v.result().ok
    view = CampaignView.from_events(events)
    rows = item_rows(view)
    ran = [r for r in rows if r.runs]
    assert ran and {r.figures for r in ran} == {"product (old log)"}
    gains: dict[str, float] = {}
    for e in events:
        if isinstance(e, c.CampaignRunFinished) and e.gain is not None and e.gain > 1.0:
            gains[e.item] = gains.get(e.item, 1.0) * e.gain
    assert {r.item: r.speedup for r in ran if r.item in gains} == pytest.approx(gains)
