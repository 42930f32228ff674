"""The dashboard in a real Chromium, on a real run it follows live: iterations appear without
a reload, the numbers on screen are the fold's, a kernel's diff opens, a wrong token is
refused. One run serves every test (tests/replay/dashboard/conftest.py: `live_run`)."""

from __future__ import annotations

import difflib

import pytest
from page_layout import layout_problems

from replay.render import fmt
from replay.runs import fold_file
from replay.summary import summarize

# the shared run is real (Ray, compiled kernels): on a busy machine it takes minutes
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def finished(live_run):
    """The run once it has ended, and its fold from the exported log (an independent path:
    the page's figures come from the stream)."""
    outcome = live_run.wait()
    assert not outcome.timed_out and outcome.view.completed is not None
    view = fold_file(live_run.root / live_run.run_id / "log.aolog")
    page = live_run.page
    page.wait_for_function(
        "(n) => Number(document.body.dataset.events) === n", arg=view.events, timeout=10_000
    )
    return view


def test_iterations_appear_live_without_reload(live_run, finished):
    ITERATIONS = live_run.iterations
    page = live_run.page
    assert page.evaluate("window.__opened") == "before the run", "the page was reloaded"
    renders = page.evaluate("window.__renders")
    seen = [r["iterations"] for r in renders if r["iterations"]]
    # every iteration showed up on its own, in order, on the page opened before the run began
    wanted = [f"{i}/{ITERATIONS}" for i in range(1, ITERATIONS + 1)]
    assert [s for s in dict.fromkeys(seen) if s in wanted] == wanted, seen
    assert any(r["status"] == "running" and r["live"] for r in renders), "never shown as running live"
    assert renders[-1]["status"] == "completed" and not renders[-1]["live"]
    events = [r["events"] for r in renders]
    assert events == sorted(events) and len(set(events)) >= 2 * ITERATIONS


def test_numbers_on_screen_match_the_fold(live_run, finished):
    view = finished
    PROBLEM, ITERATIONS = live_run.problem, live_run.iterations
    s = summarize(view)
    page = live_run.page
    text = lambda sel: page.locator(sel).first.inner_text().strip()  # noqa: E731
    assert text("#run-status") == s.status == "completed"
    assert text("#run-iterations") == s.iterations == f"{ITERATIONS}/{ITERATIONS}"
    assert text("#run-pct") == fmt.pct(s.pct_peak_geomean)
    assert text("#run-speedup") == fmt.speedup(s.speedup_geomean)
    assert text("#run-kernels") == str(s.kernels)
    assert text("#run-spend").startswith(f"{fmt.usd(s.cost_usd)} / ")
    assert layout_problems(page, "main") == []  # the real run's page: nothing too wide or overlapping
    [r] = view.results()
    row = f'#sec-problems tr[data-problem="{PROBLEM}"]'
    assert r.speedup is not None and r.speedup > 1.0
    for col, want in (
        ("baseline", fmt.ms(r.baseline_ms)),
        ("best", fmt.ms(r.best_ms)),
        ("speedup", fmt.speedup(r.speedup)),
        ("base_pct", fmt.pct(r.baseline_pct_peak)),
        ("best_pct", fmt.pct(r.best_pct_peak)),
        ("kernels", str(r.kernels)),
        ("iterations", str(r.iterations)),
    ):
        assert text(f'{row} td[data-col="{col}"]') == want, col
    for role, u in view.usage.items():
        assert text(f'#sec-llm tr[data-role="{role}"] td[data-col="calls"]') == str(u.calls)
        assert text(f'#sec-llm tr[data-role="{role}"] td[data-col="cost"]') == fmt.usd(u.cost_usd)
    # one chart point per completed iteration, the beam of the last one, the kernels' statuses
    points = page.locator(f'svg[data-chart="pct-peak:{PROBLEM}"] circle')
    assert points.count() == len(view.best_per_iteration(PROBLEM)) == ITERATIONS + 1
    p = view.problems[PROBLEM]
    beam = page.locator(f'#sec-beams div[data-problem="{PROBLEM}"] tr[data-kernel]')
    assert [beam.nth(i).get_attribute("data-kernel") for i in range(beam.count())] == p.beams[max(p.beams)]
    passed = sum(1 for k in p.kernel_ids if view.kernels[k].passed)
    assert text(f'#sec-kernels table.statuses tr[data-problem="{PROBLEM}"] td[data-status="passed"]') == str(
        passed
    )
    # the runs list shows the same run with the same figures
    page.goto(live_run.link("/"))
    run_row = page.locator(f'table.runs tr[data-run="{view.run_id}"]')
    run_row.wait_for()
    assert run_row.locator('td[data-col="pct_peak"]').inner_text() == fmt.pct(s.pct_peak_geomean)
    assert run_row.locator('td[data-col="speedup"] b').inner_text() == fmt.speedup(s.speedup_geomean)
    # with what it was computed from (the run ends its problem with a re-measure)
    assert (
        run_row.locator('td[data-col="speedup"] .src').inner_text().split(" · ")[0]
        == s.speedup_label
        == fmt.REMEASURED
    )
    assert layout_problems(page, "main") == []
    assert run_row.locator('td[data-col="iterations"]').inner_text() == s.iterations
    assert run_row.locator('td[data-col="status"]').inner_text() == "completed"
    page.go_back()
    page.wait_for_selector("#run-status")


def test_a_kernel_diff_opens(live_run, finished):
    view = finished
    page = live_run.page
    best = view.kernels[view.problems[live_run.problem].best_id]
    step = page.locator(f'ol.lineage li[data-kernel="{best.kernel_id}"] button.diff-open')
    step.click()
    drawer = page.locator("#drawer")
    drawer.wait_for(state="visible")
    page.wait_for_selector(f'#kernel[data-kernel="{best.kernel_id}"] pre.diff')
    before = view.kernels[best.fix_of or best.parent_id]
    want = [
        ln
        for ln in difflib.unified_diff(before.source.splitlines(), best.source.splitlines(), lineterm="", n=0)
        if ln.startswith(("+", "-")) and not ln.startswith(("+++", "---"))
    ]
    assert want, "the best kernel differs from the one it came from"
    shown = drawer.locator("pre.diff span.add, pre.diff span.del").all_inner_texts()
    assert shown == want
    assert layout_problems(page, "#drawer-body") == []
    page.keyboard.press("Escape")
    drawer.wait_for(state="hidden")


def test_a_wrong_token_is_refused(live_run, browser):
    context = browser.new_context()  # no cookie from the authorized page
    try:
        page = context.new_page()
        url = live_run.url
        TOKEN = live_run.token
        assert page.goto(f"{url}/?token=wrong-{TOKEN}").status == 403
        assert page.goto(f"{url}/run/{live_run.run_id}").status == 401
        api = context.request
        assert api.get(f"{url}/api/runs", headers={"X-AccelOpt-Token": "nope"}).status == 403
        assert api.get(f"{url}/api/run/{live_run.run_id}/stream").status == 401
        assert api.get(f"{url}/static/app.js").status == 401
        ok = api.get(f"{url}/api/runs", headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status == 200 and live_run.run_id in ok.text()
        # with the right token once, the page (and its event stream) work from the cookie
        assert page.goto(f"{url}/?token={TOKEN}").status == 200
        page.wait_for_selector(f'table.runs tr[data-run="{live_run.run_id}"]')
        assert page.goto(f"{url}/run/{live_run.run_id}").status == 200
        page.wait_for_selector("#run-status")
    finally:
        context.close()
