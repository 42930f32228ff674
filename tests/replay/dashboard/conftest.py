"""Fixtures of the dashboard tests: the dashboard in a background thread, a real Chromium
through Playwright (the browser tests skip with the reason when there is none), and the real
run of tests/replay/conftest.py (real NATS, Ray, compiled CPU kernels, offline
`builtin/tuner`), which a page follows live from before its first event; every browser test
reads that one run (and the report's tests read it after them)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

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
    """The shared real run, started after a page opened on it; `wait()` until it has ended."""

    run_id: str
    root: Path
    url: str  # the dashboard, with the token
    page: Any  # opened on /run/<run_id> before the run's first event
    shared: Any  # tests/replay/conftest.py: SharedRun
    problem: str
    iterations: int
    token: str = TOKEN

    def wait(self) -> Any:
        return self.shared.wait()

    def link(self, path: str) -> str:
        return f"{self.url}{path}{'&' if '?' in path else '?'}token={TOKEN}"


@pytest.fixture(scope="module")
def live_run(shared_real_run, shared_nats, browser) -> Iterator[LiveRun]:
    from replay.dashboard.browser import ServerThread

    if shared_real_run.started:
        pytest.skip(
            "the shared real run was started before its page could open (run the dashboard tests first)"
        )
    with ServerThread(
        shared_real_run.root, nats_url=shared_nats.url, token=TOKEN, scan_interval_s=0.5
    ) as server:
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
        shared = shared_real_run
        live = LiveRun(
            shared.run_id,
            shared.root,
            server.url,
            page,
            shared,
            problem=shared.problem.name,
            iterations=shared.cfg.search.iterations,
        )
        page.goto(live.link(f"/run/{live.run_id}"))
        page.wait_for_selector("p.waiting", state="visible")
        page.evaluate("window.__opened = 'before the run'")
        shared.start()
        try:
            yield live
        finally:
            try:
                shared.wait()
            except BaseException:  # the tests say what went wrong; the other modules wait again
                pass
            context.close()
