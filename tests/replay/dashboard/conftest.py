"""Fixtures of the dashboard tests: the dashboard in a background thread, a real Chromium
through Playwright (the browser tests skip with the reason when there is none), and one real
run (real NATS, Ray, compiled CPU kernels, offline `builtin/tuner`) that a page follows live
from before its first event; every browser test reads that one run."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import testdirs

# the headroom suite's rownorm: its tunable has a large real effect, so the tuner surely
# improves it within two iterations (the best kernel has a diff to show)
HEADROOM_SUITE = str(testdirs.HEADROOM_SUITE)
PROBLEM = "rownorm"
ITERATIONS = 2
TOKEN = "dashboard-test-" + secrets.token_hex(8)


# module scope, not session: Playwright's sync API keeps an event loop running in this thread
# while it is open, which would break `asyncio.run` in every test after it
@pytest.fixture(scope="module")
def playwright_session() -> Iterator[Any]:
    from replay.dashboard.browser import browser_missing

    why = browser_missing()
    if why:
        pytest.skip(f"browser tests skipped: {why}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def browser(playwright_session: Any) -> Iterator[Any]:
    from replay.dashboard.browser import launch

    b = launch(playwright_session)
    try:
        yield b
    finally:
        b.close()


@dataclass
class LiveRun:
    """A real run started after a page opened on it; `wait()` until it has ended."""

    run_id: str
    root: Path
    url: str  # the dashboard, with the token
    page: Any  # opened on /run/<run_id> before the run's first event
    thread: threading.Thread
    problem: str = PROBLEM
    iterations: int = ITERATIONS
    token: str = TOKEN
    outcome: list = field(default_factory=list)
    error: list = field(default_factory=list)

    def wait(self, timeout: float = 840.0) -> Any:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the run did not end in time"
        if self.error:
            raise self.error[0]
        return self.outcome[0]

    def link(self, path: str) -> str:
        return f"{self.url}{path}{'&' if '?' in path else '?'}token={TOKEN}"


@pytest.fixture(scope="module")
def live_run(ray_session, shared_nats, browser, tmp_path_factory) -> Iterator[LiveRun]:
    import suites
    from accelopt.config import build_config
    from actors.session import new_run_id, run_session
    from replay.dashboard.browser import ServerThread

    tmp = tmp_path_factory.mktemp("dashboard-run")
    root = tmp / "runs"
    root.mkdir()
    cfg = build_config(preset="quick", overrides=[
        f"root={root}", f"memory.uri={tmp / 'memory'}", f"suite={HEADROOM_SUITE}", f"problems=[{PROBLEM}]",
        f"search.iterations={ITERATIONS}", "search.plans_per_candidate=2", "profiling.timeout_s=60",
        "search.remeasure_rounds=0",  # the end-of-problem re-measure is not what these tests look at
    ])
    problem = suites.get_problem(f"{HEADROOM_SUITE}/{PROBLEM}")
    run_id = new_run_id()
    with ServerThread(root, nats_url=shared_nats.url, token=TOKEN, scan_interval_s=0.5) as server:
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        # every render the page makes, with what it showed (the test reads the history)
        page.add_init_script("""
          window.__renders = [];
          document.addEventListener('accelopt:render', (e) => {
            const text = (id) => { const n = document.getElementById(id); return n ? n.textContent : null; };
            window.__renders.push({events: e.detail.events, iterations: text('run-iterations'),
                                   status: text('run-status'), live: !!document.querySelector('h1 .live')});
          });
        """)
        live = LiveRun(run_id, root, server.url, page, threading.Thread(target=lambda: None))
        page.goto(live.link(f"/run/{run_id}"))
        page.wait_for_selector("p.waiting", state="visible")
        page.evaluate("window.__opened = 'before the run'")

        def go() -> None:
            try:
                live.outcome.append(run_session(cfg, [problem], nats_url=shared_nats.url, run_id=run_id,
                                                timeout_s=780))
            except BaseException as e:
                live.error.append(e)

        live.thread = threading.Thread(target=go, name="live-run", daemon=True)
        live.thread.start()
        try:
            yield live
        finally:
            live.thread.join(840)
            context.close()
