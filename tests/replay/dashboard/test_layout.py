"""Every page of the dashboard and the static report, in a real Chromium at 1400 px, on runs
made to stress the layout (three problems, kernel sources with a line far longer than any
panel, plans in markdown, re-measured speedups, a run cut in the middle of an iteration):
no element wider than the page, no blocks over each other, no row stretched, no legend over
data, markdown rendered (tests/shared/page_layout.py); and every speedup says what it was computed from.
Synthetic runs (replay/synthetic.py: the real coordinator core in a simulated world), so
these tests need no Ray and take seconds."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from page_layout import layout_problems, raw_markdown

from replay.render import fmt

RUN_A, RUN_B, RUN_OPEN = "20261126-100000-aaaa", "20261126-110000-bbbb", "20261126-120000-open"
LONG_LINE = "/* " + "a comment that runs far past the right edge of any panel, " * 5 + "*/"
WIDTH = 1400


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import replay.synthetic as synthetic
    from events.logfile import write_events

    root = tmp_path_factory.mktemp("layout") / "runs"
    with pytest.MonkeyPatch.context() as mp:  # every kernel carries one very long line near what plans change
        mp.setattr(
            synthetic,
            "SOURCE",
            synthetic.SOURCE.replace("#define UNROLL {unroll}", "#define UNROLL {unroll}  " + LONG_LINE),
        )
        runs = {
            RUN_A: synthetic.synthetic_run(run_id=RUN_A, problems=3, seed=1),
            RUN_B: synthetic.synthetic_run(run_id=RUN_B, problems=3, seed=2),
        }
        whole = synthetic.synthetic_run(
            run_id=RUN_OPEN, problems=1, seed=5, overrides=("search.iterations=3",)
        )
    # cut inside iteration 2: after a kernel of it passed faster than the best selected so far
    runs[RUN_OPEN] = whole[: _open_cut(whole)]
    for run_id, events in runs.items():
        (root / run_id).mkdir(parents=True)
        write_events(root / run_id / "log.aolog", events)
    return root


def _open_cut(events: list) -> int:
    """The index just after the first profile, in an iteration whose beam is not selected
    yet, of a kernel faster than the best selected before it."""
    from accelopt import catalog as ev
    from replay.fold import RunView

    view = RunView()
    for i, e in enumerate(events):
        view.apply(e)
        if isinstance(e, ev.KernelProfiled) and e.profile.latency_ms is not None:
            k = view.kernels[e.kernel_id]
            p = view.problems[k.problem]
            best = view.kernels.get(p.best_id or "")
            if (
                p.beams
                and k.iteration > max(p.beams)
                and best is not None
                and best.latency_ms
                and e.profile.latency_ms < best.latency_ms
            ):
                return i + 1
    raise AssertionError("the synthetic run never found a faster kernel in an open iteration")


@pytest.fixture(scope="module")
def dashboard(root: Path) -> Iterator[str]:
    from replay.dashboard.browser import ServerThread

    with ServerThread(root, scan_interval_s=0.3) as server:
        yield server.url


@pytest.fixture(scope="module")
def page(browser: Any, dashboard: str) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": WIDTH, "height": 1000})
    try:
        yield context.new_page()
    finally:
        context.close()


def _open(page: Any, url: str, ready: str) -> None:
    page.goto(url)
    page.wait_for_selector(ready)
    page.wait_for_function("() => document.body.dataset.events !== undefined")


def _expand(page: Any) -> None:
    """Open every collapsed part (diffs, sources, logs): what is in them is checked too."""
    page.evaluate("document.querySelectorAll('details').forEach((d) => { d.open = true; })")


def test_runs_list(page, dashboard):
    _open(page, f"{dashboard}/", f'table.runs tr[data-run="{RUN_A}"]')
    assert layout_problems(page, "main") == []
    # every speedup in the list says what it is; the subtitle agrees with the rows' source
    for run in (RUN_A, RUN_B):
        label = page.locator(f'tr[data-run="{run}"] td[data-col="speedup"] .src').inner_text()
        assert label.split(" · ")[0] == fmt.REMEASURED  # and the recorded figure beside it if they disagree
    assert page.locator(f'tr[data-run="{RUN_OPEN}"] td[data-col="speedup"] .src').inner_text() == fmt.RECORDED
    sub = page.locator("#runs-sub").inner_text()
    sources = set(page.locator("table.runs tr[data-run] td:last-child").all_inner_texts())
    assert sources == {"file"} and "not following an event stream now" in sub


def test_run_page_and_its_labels(page, dashboard, root):
    from replay.dashboard.models import problem_figures
    from replay.runs import fold_file

    _open(page, f"{dashboard}/run/{RUN_A}", "#sec-memory h2")
    _expand(page)
    assert layout_problems(page, "main") == []
    head = page.locator("#sec-problems thead").inner_text()
    assert "recorded speedup" in head and "re-measured speedup" in head and "recorded best" in head
    assert page.locator("#run-speedup ~ .src").inner_text().split(" · ")[0] == fmt.REMEASURED
    view = fold_file(root / RUN_A / "log.aolog")
    for f in problem_figures(view):
        row = page.locator(f'#sec-problems tr[data-problem="{f.result.problem}"]')
        rm = f.remeasured
        assert rm is not None and rm.speedup is not None
        # the re-measured speedup with the medians it is the ratio of
        assert row.locator('td[data-col="remeasured"]').inner_text() == (
            f"{fmt.speedup(rm.speedup)} ({fmt.ms(rm.baseline.median_ms).removesuffix(' ms')} / "
            f"{fmt.ms(rm.best.median_ms)})"
        )
        assert row.locator('td[data-col="speedup"]').inner_text() == fmt.speedup(f.speedup)


def test_kernel_view_plan_diff_and_profile(page, dashboard):
    _open(page, f"{dashboard}/run/{RUN_A}", "#sec-lineage button.diff-open")
    page.locator("#sec-lineage button.diff-open").last.click()
    page.wait_for_selector("#kernel pre.diff")
    drawer = page.locator("#drawer")
    assert layout_problems(page, "#drawer-body") == []
    # the plan's markdown is rendered, the long line is in the diff (wrapped, all of it on screen)
    assert drawer.locator(".plan strong").count() == 1 and drawer.locator(".plan code").count() >= 1
    assert LONG_LINE in drawer.locator("pre.diff").inner_text().replace("\n", "")
    # a passed kernel has its profile there (docs/dashboard.md), not only a failed one's log
    facts = dict(
        zip(
            drawer.locator("table.profile-facts th").all_inner_texts(),
            drawer.locator("table.profile-facts td").all_inner_texts(),
            strict=True,
        )
    )
    assert facts["status"] == "passed" and facts["latency (median)"].endswith(" ms") and "% of peak" in facts
    page.keyboard.press("Escape")


def test_the_best_kernel_so_far_while_an_iteration_is_open(page, dashboard, root):
    from replay.dashboard.models import problem_figures
    from replay.runs import fold_file

    view = fold_file(root / RUN_OPEN / "log.aolog")
    [f] = problem_figures(view)
    p = view.problems[f.result.problem]
    selected = view.kernels[p.best_id]
    fastest = min(
        (view.kernels[k] for k in p.kernel_ids if view.kernels[k].latency_ms is not None),
        key=lambda k: k.latency_ms,
    )
    assert f.open and f.best is fastest and fastest.latency_ms < selected.latency_ms
    assert f.result.best_ms == selected.latency_ms  # the fold's result still has the selected one
    _open(page, f"{dashboard}/run/{RUN_OPEN}", "#sec-problems td[data-col=best]")
    row = page.locator(f'#sec-problems tr[data-problem="{f.result.problem}"]')
    assert row.locator('td[data-col="best"]').inner_text() == fmt.ms(fastest.latency_ms)
    assert row.locator('td[data-col="speedup"]').inner_text() == fmt.speedup(f.speedup)
    assert f"iteration {fastest.iteration} is still open" in row.locator('td[data-col="note"]').inner_text()
    assert page.locator("#run-speedup").inner_text() == fmt.speedup(f.speedup)
    assert layout_problems(page, "main") == []


def test_compare_page(page, dashboard):
    _open(page, f"{dashboard}/compare?runs={RUN_A},{RUN_B}", "#sec-charts svg.chart")
    assert layout_problems(page, "main") == []
    head = page.locator("#sec-final thead").inner_text()
    assert f"{RUN_A} recorded speedup" in head and f"{RUN_B} re-measured speedup" in head
    for run in (RUN_A, RUN_B):
        label = page.locator(f'#sec-overview tr[data-run="{run}"] td[data-col="speedup"] .src').inner_text()
        assert label.split(" · ")[0] == fmt.REMEASURED


def test_static_report(page, dashboard):
    page.goto(f"{dashboard}/report?runs={RUN_A},{RUN_B}")
    page.wait_for_selector("section#failures")
    assert layout_problems(page) == []
    _expand(page)
    assert layout_problems(page) == [] and raw_markdown(page) == []
    assert "re-measured" in page.locator("table.runs tbody").inner_text()
    assert "recorded speedup" in page.locator("table.results thead").first.inner_text()


def test_the_checks_catch_what_they_look_for(page, dashboard):
    """Each check, on a page broken on purpose the way a real defect looked: so a clean page
    above means something."""
    _open(page, f"{dashboard}/run/{RUN_A}", "#sec-llm svg.chart")
    page.add_style_tag(
        content=".grid2 { display: grid; grid-template-columns: 400px 1fr; align-items: stretch; } "
        ".grid2 > .table-wrap { overflow: visible; }"
    )
    time.sleep(0.1)
    found = layout_problems(page, "main")
    assert any("overlap" in f for f in found), found
    _open(page, f"{dashboard}/run/{RUN_A}", "#sec-llm svg.chart")
    page.add_style_tag(
        content=".grid2 { display: grid; grid-template-columns: 1fr 1fr; align-items: stretch; } "
        "#sec-llm svg.chart { height: 600px; }"
    )
    page.evaluate(
        "document.querySelector('#sec-llm .table-wrap').replaceWith(document.querySelector('#sec-llm table'))"
    )  # the table as the grid's item
    assert any("tall for" in f for f in layout_problems(page, "main"))
    page.evaluate(
        "document.querySelector('main').append(Object.assign(document.createElement('div'), "
        "{className: 'plan', textContent: '**Increase LOOP_ORDER** with `TILE`'}))"
    )
    found = layout_problems(page, "main")
    assert any("raw markdown" in f for f in found), found
    page.add_style_tag(content="table.results { width: 2000px; }")
    assert any("scrolls its content sideways" in f for f in layout_problems(page, "main"))
    page.add_style_tag(content=".table-wrap { overflow: visible; }")
    assert any("reaches" in f for f in layout_problems(page, "main"))
