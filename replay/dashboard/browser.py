"""Running the dashboard beside other work, and the real browser that the browser tests
(tests/replay/dashboard) and benchmarks/dashboard_bench.py drive through Playwright: Debian's
`chromium` (`apt-get install chromium`), since Playwright's own browser download may not be
reachable. `ACCELOPT_CHROMIUM` names another Chromium binary."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from replay.dashboard.server import DashboardServer

CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def find_chromium() -> str | None:
    """The Chromium binary to drive, or None."""
    for c in (
        os.environ.get("ACCELOPT_CHROMIUM"),
        CHROMIUM,
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return c
    return None


def browser_missing() -> str | None:
    """Why no browser can be driven here (None: one can)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the Python package 'playwright' is not installed (pip install -e '.[dev]')"
    if find_chromium() is None:
        return (
            f"no Chromium at {CHROMIUM}: install Debian's with `sudo apt-get install -y chromium` "
            "(or set ACCELOPT_CHROMIUM to a Chromium binary)"
        )
    return None


def launch(playwright: Any, **kw: Any) -> Any:
    """A headless Chromium from a started `sync_playwright()`."""
    return playwright.chromium.launch(executable_path=find_chromium(), headless=True, args=LAUNCH_ARGS, **kw)


class ServerThread:
    """A `DashboardServer` on its own event loop in a daemon thread (for callers that are
    not async, like Playwright's sync API)."""

    def __init__(self, root: str | Path, **kw: Any) -> None:
        kw.setdefault("port", 0)
        self.server = DashboardServer(root, **kw)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="dashboard", daemon=True)

    @property
    def url(self) -> str:
        return self.server.url

    def call(self, coro: Any, timeout: float = 30.0) -> Any:
        """Run `coro` on the dashboard's loop and wait for it."""
        fut: Future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return fut.result(timeout)

    def start(self) -> ServerThread:
        self._thread.start()
        self.call(self.server.start())
        return self

    def stop(self) -> None:
        try:
            self.call(self.server.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            if not self.loop.is_running():
                self.loop.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
