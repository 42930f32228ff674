"""Helpers shared by the benchmark scripts: percentiles, machine facts, saving results, the
synthetic run the read-side benchmarks read, the load benchmarks' search and simulated device,
a side look at a run's event log."""

from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from events.log import EventLog

T = TypeVar("T")

RESULTS = Path(__file__).resolve().parent / "results"


def ask_log(url: str, ask: Callable[[EventLog], Awaitable[T]], timeout_s: float) -> T | None:
    """What `ask` gets of the event log at `url` (its stream not created), or None when the
    server cannot answer within `timeout_s`: the fault benchmarks look at servers they kill."""
    from events.log import EventLog

    async def get() -> T:
        elog = await EventLog.connect(url, create=False)
        try:
            return await ask(elog)
        finally:
            await elog.close()

    try:
        return asyncio.run(asyncio.wait_for(get(), timeout_s))
    except Exception:
        return None


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = max(0, min(len(s) - 1, round(q / 100 * (len(s) - 1))))
    return s[k]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def machine() -> dict[str, Any]:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).parent,
            timeout=5,
        ).stdout.strip()
    except Exception:
        commit = ""
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "commit": commit,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def synthetic_bench_run(problems: int, max_events: int) -> list[Any]:
    """The run the read-side benchmarks (replay, dashboard) read: synthesized NKI events of
    `problems` problems, a budget no spend reaches, cut at `max_events`."""
    from replay.synthetic import synthetic_run

    return synthetic_run(
        run_id="bench",
        problems=problems,
        preset="nki",
        overrides=("llm.budget_usd=100000",),
        max_events=max_events,
    )


def load_search(beam: int, plans: int, iterations: int) -> list[str]:
    """The search of the load benchmarks (scale, long run): `beam` x `plans` candidates an
    iteration, one sample a plan, no re-measure and no fix rounds."""
    return [
        f"search.beam_width={beam}",
        f"search.plans_per_candidate={plans}",
        "search.samples_per_plan=1",
        f"search.iterations={iterations}",
        "search.remeasure_rounds=0",
        "search.fix_rounds=0",
    ]


def sim_device(concurrency: int, profile_s: float, pass_rate: float, seed: int) -> list[str]:
    """The simulated device of the load benchmarks: one worker, `concurrency` profiles at a
    time of `profile_s` each, `pass_rate` of them correct."""
    return [
        "devices.sim.workers=1",
        f"devices.sim.concurrency={concurrency}",
        "devices.sim.options.allow=true",
        f"devices.sim.options.profile_s={profile_s}",
        f"devices.sim.options.pass_rate={pass_rate}",
        f"devices.sim.options.seed={seed}",
    ]


def save(name: str, figures: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"benchmark": name, "machine": machine(), **figures}, indent=2) + "\n")
    print(f"saved {path}")
    return path
