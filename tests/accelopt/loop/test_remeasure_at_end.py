"""The end-of-problem re-measure (a decision of the coordinator, on the log) and the
noise-aware summary rule, on the simulated world of sim.py (no LLM, no device)."""

from __future__ import annotations

import re

import pytest

from accelopt import catalog as c
from accelopt.beam_policy import Pair, Scored, noise_margin, plan_pair, select_summaries
from accelopt.config import ConfigError, config_from_dict, legacy_config, recorded_config
from accelopt.profile import LatencyStats, Profile
from cli.progress import results_table
from replay.fold import RunView
from replay.render import fmt
from replay.summary import summarize
from replay.verify import verify


def of(log, t):
    return [e for e in log if isinstance(e, t)]


def _profile(lat: float, spread: float = 0.0) -> Profile:
    return Profile(
        status="passed",
        device="cpu",
        peak_fraction=0.1,
        t_peak_ms=0.1,
        latency=LatencyStats(samples_ms=[lat], median_ms=lat, min_ms=lat, max_ms=lat, spread=spread),
    )


def loaded_baseline_world(sim_world, base_factor: float, *, fail_remeasure: bool = False):
    """A world where the baseline's search-time timing was taken under load: re-measured, it
    runs `base_factor` times its recorded latency; everything else re-measures as recorded."""

    class World(sim_world):
        def answer(self, e):
            out = super().answer(e)
            if isinstance(e, c.ProfileRequested) and e.purpose == "remeasure":
                res = out[0]
                if fail_remeasure and "TILE 4\n" not in e.source:
                    prof = Profile(status="incorrect", device="cpu", log="mismatch at [3]\nmore")
                else:
                    lat = res.profile.latency_ms * (base_factor if "TILE 4\n" in e.source else 1.0)
                    prof = _profile(lat, 0.02)
                out = [
                    c.KernelProfiled(
                        **{**{f: getattr(res, f) for f in ("event_id", "run_id", "ts")}},
                        kernel_id=res.kernel_id,
                        problem=res.problem,
                        device="cpu",
                        request_id=res.request_id,
                        profile=prof,
                    )
                ]
            return out

    return World()


def test_each_problem_ends_with_an_interleaved_remeasure_on_fresh_seeds(simulate, sim_world):
    _, log, _ = simulate(["memory.enabled=false", "search.remeasure_rounds=3"])
    assert isinstance(log[-1], c.RunCompleted)
    done = {e.problem: e for e in of(log, c.ProblemRemeasured)}
    assert set(done) == {"a", "b"}
    base_src = next(e.source for e in of(log, c.KernelProposed) if e.iteration == 0)
    for name, e in done.items():
        reqs = [r for r in of(log, c.ProfileRequested) if r.purpose == "remeasure" and r.problem == name]
        sides = ["baseline" if r.source == base_src else "best" for r in reqs]
        assert sides == ["baseline", "best", "best", "baseline", "baseline", "best"]  # interleaved, reversed
        # both sides of a round share seeds; rounds differ; none of the search's seed offsets
        offsets = [r.seed_offset for r in reqs]
        assert offsets[0::2] == offsets[1::2] and len(set(offsets)) == 3 and min(offsets) >= 700_000
        assert e.seed_offsets == sorted(set(offsets), key=offsets.index)
        # one at a time: each request is decided only after the previous one's result
        for r in reqs[1:]:
            prev = log.index(r)
            assert any(
                isinstance(x, c.KernelProfiled) and x.request_id == reqs[reqs.index(r) - 1].event_id
                for x in log[:prev]
            )
        # the sim times every kernel the same way each time: re-measured == recorded
        assert e.speedup == pytest.approx(e.recorded_speedup) and e.agrees and e.rounds == 3
        assert len(e.baseline.rounds_ms) == len(e.best.rounds_ms) == 3
        # the problem completed only after its re-measure
        last_it = max(
            i for i, x in enumerate(log) if isinstance(x, c.IterationCompleted) and x.problem == name
        )
        assert log.index(e) > last_it
    assert verify(log).ok
    view = RunView.from_events(log)
    table = _text(results_table(view, "t"))
    for r in view.results():
        assert r.remeasured_speedup == pytest.approx(done[r.problem].speedup)
        assert r.reported_speedup == r.remeasured_speedup
        # the table's row adds up: the search's baseline, best and their ratio; the re-measure
        # with the two medians it is the ratio of
        rm = done[r.problem]
        cells = [
            fmt.ms(r.baseline_ms),
            fmt.ms(r.best_ms),
            fmt.speedup(r.speedup),
            f"{fmt.speedup(rm.speedup)} ({fmt.ms(rm.baseline.median_ms)[:-3]} / {fmt.ms(rm.best.median_ms)})",
        ]
        assert re.search(r"\s+│\s+".join(map(re.escape, cells)), table), table


def test_a_speedup_that_noise_made_is_reported_with_the_recorded_one_beside(simulate, sim_world):
    # the baseline was timed under load at search time: re-measured it is 2x faster
    _, log, _ = simulate(
        ["memory.enabled=false", "search.remeasure_rounds=2"], world=loaded_baseline_world(sim_world, 0.5)
    )
    view = RunView.from_events(log)
    table = _text(results_table(view, "t"))
    for r in view.results():
        assert r.remeasured_speedup == pytest.approx(r.speedup / 2)
        assert not r.remeasure_agrees
        assert re.search(
            rf"{re.escape(fmt.speedup(r.speedup))}\s+│\s+{re.escape(fmt.speedup(r.remeasured_speedup))} \(",
            table,
        )  # recorded, then re-measured
    assert "disagrees with the recorded speedup beyond the timing noise where marked *" in " ".join(
        table.split()
    )
    s = summarize(view)
    assert s.speedup_disagrees and s.speedup_geomean == pytest.approx(s.recorded_speedup_geomean / 2)
    assert "(recorded" in s.speedup_text
    assert verify(log).ok


def test_a_kernel_that_fails_its_remeasure_stops_it_and_says_so(simulate, sim_world):
    _, log, _ = simulate(
        ["memory.enabled=false", "search.remeasure_rounds=3"],
        world=loaded_baseline_world(sim_world, 1.0, fail_remeasure=True),
    )
    assert isinstance(log[-1], c.RunCompleted)
    for e in of(log, c.ProblemRemeasured):
        assert e.best.status == "incorrect" and e.best.log_head == "mismatch at [3]"
        assert e.speedup is None and len(e.baseline.rounds_ms) == 1  # stopped after the failure
    view = RunView.from_events(log)
    assert all(r.remeasured_speedup is None and r.reported_speedup == r.speedup for r in view.results())


def test_remeasure_off_and_logs_recorded_before_it_existed(simulate, sim_world):
    _, log, _ = simulate(["memory.enabled=false", "search.remeasure_rounds=0"])
    assert of(log, c.ProblemRemeasured) == [] and isinstance(log[-1], c.RunCompleted)
    assert not [r for r in of(log, c.ProfileRequested) if r.purpose == "remeasure"]
    # a recorded config without the new settings replays with the old behaviour
    old = {"search": {"beam_width": 2}}
    assert legacy_config(old)["search"] == {
        "beam_width": 2,
        "remeasure_rounds": 0,
        "summary_noise_margin": False,
    }
    new = {"search": {"remeasure_rounds": 3, "summary_noise_margin": True}}
    assert legacy_config(new) is new


def test_summary_threshold_accounts_for_both_kernels_spread():
    assert noise_margin(0.0, 0.0) == 1.0 and noise_margin(0.1, 0.3) == pytest.approx(1.2)
    quiet = Scored("k", 0.8, True, "h", 1, spread=0.01)
    noisy = Scored("k", 0.8, True, "h", 1, spread=0.40)
    # a 1.25x speedup: real between two quiet timings, noise between a noisy parent and child
    assert plan_pair("p", 1.0, [quiet], 0.01).margin == pytest.approx(1.01)
    kw = dict(positive_threshold=1.04, negative_threshold=1.15, max_positive=4, max_total=8)
    assert len(select_summaries([plan_pair("p", 1.0, [quiet], 0.01)], **kw)) == 1
    assert select_summaries([plan_pair("p", 1.0, [noisy], 0.30)], **kw) == []
    # the fixed thresholds still hold when the noise is smaller
    assert select_summaries([Pair("p", "c", 1.03, 1.0)], **kw) == []
    # slowdowns too: 1/1.2 is beyond 1/1.15, but not beyond noise of +-25%
    assert len(select_summaries([Pair("p", "c", 1 / 1.2, 1.0)], **kw)) == 1
    assert select_summaries([Pair("p", "c", 1 / 1.2, 1.25)], **kw) == []
    # off: the reference rule
    assert plan_pair("p", 1.0, [noisy], 0.30, noise_aware=False).margin == 1.0


def test_noisy_timings_teach_nothing_in_a_run(simulate, sim_world):
    class Noisy(sim_world):
        def answer(self, e):
            out = super().answer(e)
            if isinstance(e, c.ProfileRequested) and out and out[0].profile.latency is not None:
                r = out[0]
                out = [
                    c.KernelProfiled(
                        event_id=r.event_id,
                        run_id=r.run_id,
                        ts=r.ts,
                        kernel_id=r.kernel_id,
                        problem=r.problem,
                        device="cpu",
                        request_id=r.request_id,
                        profile=_profile(r.profile.latency_ms, spread=5.0),
                    )
                ]
            return out

    _, log, _ = simulate(["memory.enabled=false", "search.remeasure_rounds=0"], world=Noisy())
    assert of(log, c.SummaryRequested) == []  # every pair is within the noise
    _, log, _ = simulate(
        ["memory.enabled=false", "search.remeasure_rounds=0", "search.summary_noise_margin=false"],
        world=Noisy(),
    )
    assert of(log, c.SummaryRequested)  # the reference rule learns from them


def test_a_recorded_config_with_retired_settings_still_decodes():
    """Logs recorded before `profiling.seeds` and `profiling.time_budget_s` were retired (they
    were never read) still replay and resume; a new config naming them is refused."""
    recorded = {
        "profiling": {"seeds": 3, "time_budget_s": 0.3, "timeout_s": 42.0},
        "search": {"beam_width": 2},
    }
    cfg = recorded_config(recorded)
    assert cfg.profiling.timeout_s == 42.0 and cfg.search.beam_width == 2 and cfg.search.remeasure_rounds == 0
    with pytest.raises(ConfigError, match=r"profiling\.seeds: unknown key"):
        config_from_dict({"profiling": {"seeds": 3}})


def _text(table) -> str:
    from rich.console import Console

    console = Console(width=250, record=True)
    console.print(table)
    return console.export_text()
