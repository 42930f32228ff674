"""The dashboard on a 100,000-event run, in a real browser: first paint and event-to-screen
latency.

A synthetic run (`replay.synthetic`: the real coordinator core in a simulated world, `nki`
preset on 8 problems) is published to a real nats-server; `accelopt dashboard` (in-process,
following that server) folds it; headless Chromium (Debian's, through Playwright) opens the
run page.

- catch-up: from the dashboard's start to its fold holding all 100k events;
- first paint: from navigation to the run's headline figures and problem table painted
  (`performance.now()` in the page, at the frame after they are drawn), median and worst of
  --paints fresh pages; the whole page drawn (charts, tables, lineage, memory); the runs list;
- event-to-screen: with the run page open, the run's next --live events are published one at
  a time, --gap-ms apart on average (jittered); for each, the time from just before its
  publish to the first render whose event count includes it (page clock vs publisher
  clock: the same machine). p50 / p95 / max; and the same up to the update reaching a plain
  SSE client (no browser), which splits the server's share from the browser's.

Usage: python benchmarks/dashboard_bench.py [--events 100000] [--live 300] [--gap-ms 100]
Targets: first paint < 2 s, event-to-screen p95 < 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import msgspec
from _common import median, percentile, save, synthetic_bench_run

import accelopt  # noqa: F401
from events.log import EventLog
from events.server import NatsServer
from replay.dashboard.browser import ServerThread, browser_missing, launch

TARGET_FIRST_PAINT_S = 2.0
TARGET_P95_S = 1.0

RECORDER = """
  window.__renders = [];
  document.addEventListener('accelopt:render', (e) => window.__renders.push([e.detail.events, e.detail.t]));
"""


async def _publish_all(url: str, events: list) -> None:
    elog = await EventLog.connect(url)
    try:
        await elog.publish_many(events)
    finally:
        await elog.close()


def publish_live(
    url: str, events: list, gap_ms: float, sent: list[tuple[int, float]], first_count: int
) -> None:
    """Publish `events` one by one, recording (event count after it, wall ms before publish)."""

    async def go() -> None:
        rng = random.Random(0)
        elog = await EventLog.connect(url)
        try:
            for i, e in enumerate(events):
                await asyncio.sleep(rng.uniform(0.2, 1.8) * gap_ms / 1000)
                sent.append((first_count + i + 1, time.time() * 1000))
                await elog.publish(e)
        finally:
            await elog.close()

    asyncio.run(go())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--live", type=int, default=300, help="events published one by one with the page open")
    ap.add_argument("--gap-ms", type=float, default=100.0, help="mean gap between live events")
    ap.add_argument("--paints", type=int, default=5)
    ap.add_argument("--problems", type=int, default=8)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    why = browser_missing()
    if why:
        print(f"dashboard_bench needs a browser: {why}")
        return 2

    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    events = synthetic_bench_run(args.problems, args.events + args.live)
    # the run is happening now: its history ends at this moment, the live events follow
    shift = time.time() - events[args.events - 1].ts
    events = [msgspec.structs.replace(e, ts=e.ts + shift) for e in events]
    history, live = events[: args.events], events[args.events :]
    print(f"synthesized {len(events):,} events in {time.perf_counter() - t0:.1f} s")

    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        nats = NatsServer(Path(tmp) / "nats")
        nats.start()
        try:
            t0 = time.perf_counter()
            asyncio.run(_publish_all(nats.url, history))
            print(f"published {len(history):,} events in {time.perf_counter() - t0:.1f} s")
            t0 = time.perf_counter()
            with ServerThread(Path(tmp) / "runs", nats_url=nats.url) as server:
                hub = server.server.hub
                while not (
                    hub.caught_up and (t := hub.get("bench")) is not None and t.view.events >= len(history)
                ):
                    time.sleep(0.05)
                catch_up_s = time.perf_counter() - t0
                print(f"dashboard caught up with {len(history):,} events in {catch_up_s:.2f} s")
                with sync_playwright() as p:
                    browser = launch(p)
                    try:
                        figures = measure(browser, server.url, args, history, live, nats.url)
                    finally:
                        browser.close()
        finally:
            nats.kill()
    figures["catch_up_s"] = round(catch_up_s, 3)
    # the machine is shared: how busy it was says how to read the figures
    figures["load_average_1min"] = {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)}
    ok = (
        figures["first_paint_run_s"]["max"] < TARGET_FIRST_PAINT_S
        and figures["event_to_screen_s"]["p95"] < TARGET_P95_S
    )
    print(
        f"first paint of the run page: median {figures['first_paint_run_s']['median']:.3f} s, "
        f"worst {figures['first_paint_run_s']['max']:.3f} s (target < {TARGET_FIRST_PAINT_S} s); runs list "
        f"median {figures['first_paint_runs_s']['median']:.3f} s"
    )
    print(
        f"whole run page drawn: median {figures['full_render_run_s']['median']:.3f} s, worst "
        f"{figures['full_render_run_s']['max']:.3f} s; the run model over HTTP: first "
        f"{figures['run_model_http_s']['cold']:.3f} s (built from the fold), then "
        f"{figures['run_model_http_s']['warm']:.3f} s"
    )
    e2s = figures["event_to_screen_s"]
    print(
        f"event-to-screen over {e2s['n']} live events: p50 {e2s['p50']:.3f} s, p95 {e2s['p95']:.3f} s, "
        f"max {e2s['max']:.3f} s (target p95 < {TARGET_P95_S} s) -> {'OK' if ok else 'MISSED'}"
    )
    sse = figures["event_to_sse_s"]
    print(
        f"of which the server (publish to the update received by a plain SSE client): p50 {sse['p50']:.3f} s, "
        f"p95 {sse['p95']:.3f} s"
    )
    if not args.no_save:
        save(
            "dashboard_bench",
            {
                "events": len(history),
                "problems": args.problems,
                "live_events": len(live),
                "gap_ms": args.gap_ms,
                **figures,
                "targets": {"first_paint_s": TARGET_FIRST_PAINT_S, "event_to_screen_p95_s": TARGET_P95_S},
                "met": ok,
            },
        )
    return 0 if ok else 1


def _paint(browser, url: str, n: int) -> tuple[float, float]:
    """Open `url` in a fresh page: seconds from navigation to its first figures painted, and
    to the whole page."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.goto(url)
        page.wait_for_function("(n) => Number(document.body.dataset.events) >= n", arg=n, timeout=30_000)
        first, full = page.evaluate("[window.__firstRender, window.__fullRender]")
        return first / 1000, full / 1000
    finally:
        context.close()


def _fetch_s(url: str) -> float:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as r:
        r.read()
    return time.perf_counter() - t0


def delays(sent: list[tuple[int, float]], shown: list[tuple[int, float]]) -> list[float]:
    """Per published event: seconds until the first update whose event count includes it."""
    out, j = [], 0
    for count, t_pub in sent:
        while j < len(shown) and shown[j][0] < count:
            j += 1
        out.append((shown[j][1] - t_pub) / 1000)
    return out


def listen(url: str, total: int, received: list[tuple[int, float]]) -> None:
    """Read the run's event stream like the page does, without a browser."""
    import aiohttp

    async def go() -> None:
        async with aiohttp.ClientSession() as s, s.get(url, timeout=aiohttp.ClientTimeout(total=600)) as r:
            async for raw in r.content:
                if raw.startswith(b"data: "):
                    n = msgspec.json.decode(raw[6:])["run"]["events"]
                    received.append((n, time.time() * 1000))
                    if n >= total:
                        return

    asyncio.run(go())


def measure(browser, url: str, args: argparse.Namespace, history: list, live: list, nats_url: str) -> dict:
    # the server's share: the run's model built from the fold (first request), then cached
    model_cold = _fetch_s(f"{url}/api/run/bench")
    model_warm = _fetch_s(f"{url}/api/run/bench")
    runs, run, run_full = [], [], []
    for _ in range(args.paints):
        first, full = _paint(browser, f"{url}/run/bench", len(history))
        run.append(first)
        run_full.append(full)
        runs.append(_paint(browser, f"{url}/", len(history))[1])
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.add_init_script(RECORDER)
    page.goto(f"{url}/run/bench")
    page.wait_for_function(
        "(n) => Number(document.body.dataset.events) >= n", arg=len(history), timeout=30_000
    )
    total = len(history) + len(live)
    sent: list[tuple[int, float]] = []
    received: list[tuple[int, float]] = []  # what a plain SSE client got, to split server from browser time
    listener = threading.Thread(target=listen, args=(f"{url}/api/run/bench/stream", total, received))
    listener.start()
    time.sleep(1.0)
    publisher = threading.Thread(target=publish_live, args=(nats_url, live, args.gap_ms, sent, len(history)))
    publisher.start()
    publisher.join()
    page.wait_for_function("(n) => Number(document.body.dataset.events) >= n", arg=total, timeout=30_000)
    listener.join(30)
    renders = page.evaluate("window.__renders")
    context.close()
    latencies = delays(sent, [(int(n), float(t)) for n, t in renders])
    sse = delays(sent, received)
    return {
        "first_paint_run_s": {
            "median": round(median(run), 3),
            "max": round(max(run), 3),
            "all": [round(x, 3) for x in run],
        },
        "full_render_run_s": {
            "median": round(median(run_full), 3),
            "max": round(max(run_full), 3),
            "all": [round(x, 3) for x in run_full],
        },
        "first_paint_runs_s": {"median": round(median(runs), 3), "max": round(max(runs), 3)},
        "run_model_http_s": {"cold": round(model_cold, 3), "warm": round(model_warm, 3)},
        "event_to_screen_s": {
            "n": len(latencies),
            "p50": round(percentile(latencies, 50), 3),
            "p95": round(percentile(latencies, 95), 3),
            "max": round(max(latencies), 3),
        },
        "event_to_sse_s": {
            "n": len(sse),
            "p50": round(percentile(sse, 50), 3),
            "p95": round(percentile(sse, 95), 3),
            "max": round(max(sse), 3),
        },
        "renders_during_live": len(renders) - 1,
    }


if __name__ == "__main__":
    sys.exit(main())
