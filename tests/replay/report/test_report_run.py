"""The report of a real run: parsed back, it holds the plots, the tables with the run's own
numbers, the best kernel's lineage with a diff per step, and nothing fetched from outside."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from events.logfile import read_events
from replay.fold import RunView
from replay.render import fmt
from replay.render.report import build_report


@pytest.fixture(scope="module")
def report(real_run, parse_html):
    view = RunView.from_events(read_events(real_run.run_dir / "log.aolog"))
    html = build_report([view])
    return view, html, parse_html(html)


def test_sections_and_plots(report):
    view, html, doc = report
    ids = {s.attrs["id"] for s in doc.find_all("section")}
    assert ids == {"overview", "progress", "cost", "lineage", "memory", "failures"}
    charts = {svg.attrs["data-chart"]: svg for svg in doc.find_all("svg", cls="chart")}
    assert {
        "pct-peak:rownorm",
        "speedup:rownorm",
        "cost-over-time",
        "tokens-over-time",
        "tokens-per-role",
    } <= set(charts)
    for svg in charts.values():
        assert svg.find_all("title"), "every chart has a title"
    # one point per completed iteration (0 = baseline, 1, 2) with the recorded % of peak
    points = charts["pct-peak:rownorm"].find_all("circle")
    assert len(points) == 3
    for point, it in zip(points, view.problems["rownorm"].iterations, strict=True):
        assert (
            f"{100 * it.best_pct_peak:.1f}" in point.text()
            or f"{100 * it.best_pct_peak:.0f}%" in point.text()
        )
    # tokens per role: one bar per role used, prompt and completion stacked
    bars = charts["tokens-per-role"].find_all("rect", cls=None)
    roles = [r for r in ("planner", "executor", "fixer", "summarizer") if r in view.usage]
    assert len([b for b in bars if b.find_all("title")]) == 2 * len(roles)
    # every SVG is well-formed XML on its own
    svgs = re.findall(r"<svg.*?</svg>", html, re.S)
    assert len(svgs) == len(charts)
    for svg in svgs:
        ET.fromstring(svg)


def test_tables_hold_the_run_numbers(report):
    view, _, doc = report
    r = view.results()[0]
    results = doc.find("table", cls="results", data_run=view.run_id).rows()
    row = next(x for x in results if x[0] == "rownorm")
    assert row[2:7] == [
        fmt.ms(r.baseline_ms),
        fmt.ms(r.best_ms),
        fmt.speedup(r.speedup),
        fmt.pct(r.baseline_pct_peak),
        fmt.pct(r.best_pct_peak),
    ]
    assert row[7] == str(r.kernels) and r.speedup > 1.0
    iterations = doc.find("table", cls="iterations", data_problem="rownorm").rows()[1:]
    assert [x[0] for x in iterations] == ["0", "1", "2"]
    for x, pt in zip(iterations, view.best_per_iteration("rownorm"), strict=True):
        assert (
            x[1] == pt.best_kernel_id[:12]
            and x[2] == fmt.ms(pt.best_latency_ms)
            and x[4] == fmt.speedup(pt.speedup)
        )
    overview = doc.find("table", cls="runs").rows()
    assert overview[1][0] == view.run_id and overview[1][1] == "completed"
    usage = {x[1]: x for x in doc.find("table", cls="usage").rows()[1:]}
    for role, u in view.usage.items():
        assert usage[role][2] == str(u.calls)
    statuses = doc.find("table", cls="statuses").rows()
    assert statuses[1][0] == "rownorm" and int(statuses[1][1]) == sum(k.passed for k in view.kernels.values())


def test_lineage_of_the_best_kernel_with_diffs(report, parse_html):
    from replay.render import markdown

    view, _, doc = report
    best = view.problems["rownorm"].best_id
    ol = doc.find("ol", cls="lineage", data_problem="rownorm")
    steps = ol.find_all("li", cls="step")
    assert [s.attrs["data-kernel"] for s in steps] == [k.kernel_id for k in view.lineage(best)]
    assert len(steps) >= 2, "the tuner improves rownorm within two iterations"
    assert "baseline" in steps[0].attrs["class"]
    for step in steps[1:]:
        diff = step.find("pre", cls="diff")
        assert diff.find_all("span", cls="add") and diff.find_all("span", cls="del")
        plan = view.plan_text(step.attrs["data-kernel"])
        if plan:  # rendered from its markdown: its words, none of its marks
            shown = step.find("div", cls="plan")
            words = " ".join(parse_html(f"<div>{markdown.to_html(plan)}</div>").text().split())
            assert " ".join(shown.text().split()) == words and "**" not in words
            assert shown.find("strong") is not None
    k = view.kernels[best]
    assert fmt.ms(k.latency_ms) in steps[-1].find("div", cls="step-head").text()
    tree = doc.find("ul", cls="tree", data_problem="rownorm")
    assert len(tree.find_all("li")) == len(view.problems["rownorm"].kernel_ids)
    assert {li.attrs["data-kernel"] for li in tree.find_all("li", cls="on-path")} == {
        k.kernel_id for k in view.lineage(best)
    }


def test_self_contained(report):
    _, html, doc = report
    assert not doc.find_all("script") and not doc.find_all("link") and not doc.find_all("img")
    for n in doc.iter():
        for attr in ("src", "href"):
            assert not n.attrs.get(attr, "#").split("#")[0], f"external reference in <{n.tag} {attr}>"
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in html
