"""Two runs side by side (an ablation against its parent): config differences, both runs on
each chart, final figures with ratios, LLM calls and cost, the fork shown."""

from __future__ import annotations

import pytest

from replay.fold import RunView
from replay.render import fmt
from replay.render.report import build_report


@pytest.fixture(scope="module")
def compared(synthetic, parse_html):
    a = RunView.from_events(synthetic(run_id="base-run", problems=2, overrides=("search.iterations=4",)))
    b = RunView.from_events(
        synthetic(
            run_id="ablation",
            problems=2,
            seed=1,
            parent_run="base-run",
            fork_iteration=1,
            overrides=("search.iterations=4", "search.beam_width=1", "memory.enabled=false"),
        )
    )
    return a, b, parse_html(build_report([a, b]))


def test_settings_that_differ(compared):
    _, _, doc = compared
    rows = {r[0]: r[1:] for r in doc.find("table", cls="config-diff").rows()[1:]}
    assert rows["search.beam_width"] == ["2", "1"]
    assert rows["memory.enabled"] == ["True", "False"]
    assert rows["seed"] == ["0", "1"]
    assert "root" not in rows and "search.iterations" not in rows


def test_final_figures_with_ratios(compared):
    a, b, doc = compared
    table = doc.find("table", cls="comparison").rows()
    assert table[0][0] == "problem" and "%peak ablation / base-run" in table[0]
    ra = {r.problem: r for r in a.results()}
    rb = {r.problem: r for r in b.results()}
    for row in table[1:]:
        name = row[0]
        assert row[1:5] == [
            fmt.pct(ra[name].best_pct_peak),
            fmt.speedup(ra[name].speedup),
            fmt.pct(rb[name].best_pct_peak),
            fmt.speedup(rb[name].speedup),
        ]
        assert row[5] == f"{rb[name].best_pct_peak / ra[name].best_pct_peak:.2f}x"
        assert row[6] == f"{rb[name].speedup / ra[name].speedup:.2f}x"


def test_llm_use_and_fork(compared):
    a, b, doc = compared
    rows = {r[0]: r for r in doc.find("table", cls="comparison-cost").rows()[1:]}
    assert rows["base-run"][1:3] == ["-", "-"]
    assert rows["ablation"][1:3] == ["base-run", "1"]
    assert rows["base-run"][3] == str(a.llm_calls) and rows["ablation"][3] == str(b.llm_calls)
    assert rows["base-run"][5] == fmt.usd(a.cost_usd) and rows["ablation"][5] == fmt.usd(b.cost_usd)
    assert rows["ablation"][6] == f"{b.cost_usd / a.cost_usd:.2f}x"
    overview = {r[0]: r for r in doc.find("table", cls="runs").rows()[1:]}
    assert overview["ablation"][-1] == "base-run @ iteration 1"


def test_both_runs_on_each_chart(compared):
    _, _, doc = compared
    for problem in ("op00", "op01"):
        for kind in ("pct-peak", "speedup"):
            svg = doc.find("svg", data_chart=f"{kind}:{problem}")
            series = [g.attrs["data-series"] for g in svg.find_all("g", cls="series")]
            assert series == ["base-run", "ablation"]
            assert all(len(g.find_all("circle")) == 5 for g in svg.find_all("g", cls="series"))
    for name in ("cost-over-time", "tokens-over-time", "tokens-per-role"):
        svg = doc.find("svg", data_chart=name)
        assert [g.attrs["data-series"] for g in svg.find_all("g", cls="series")] == ["base-run", "ablation"]
    # per run: its own lineage and memory sections
    assert {d.attrs["data-run"] for d in doc.find_all("div", cls="run-lineage")} == {"base-run", "ablation"}
    assert doc.find("table", cls="memory", data_run="base-run").rows()[1:]
    assert not doc.find_all("table", cls="memory", data_run="ablation")
    assert "memory retrieval off" in doc.find("section", id="memory").text()
