"""Number formatting shared by reports and `accelopt runs` (consistent with the live
progress table of `accelopt run`)."""

from __future__ import annotations

import time
from typing import Any

__all__ = [
    "ago",
    "duration",
    "ms",
    "pct",
    "remeasured",
    "speedup",
    "speedup_source",
    "stamp",
    "tokens",
    "usd",
]


def pct(x: float | None) -> str:
    return f"{100 * x:.1f}%" if x is not None else "-"


def ms(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.3f} ms" if x < 100 else f"{x:.1f} ms"


def speedup(x: float | None) -> str:
    return f"{x:.2f}x" if x is not None else "-"


def usd(x: float | None) -> str:
    if x is None:
        return "-"
    return f"${x:.4f}" if x < 100 else f"${x:,.2f}"


def tokens(n: int | float) -> str:
    n = float(n)
    if n >= 1e9:
        return f"{n / 1e9:.2f}B"
    if n >= 1e6:
        return f"{n / 1e6:.2f}M"
    if n >= 1e4:
        return f"{n / 1e3:.1f}k"
    return f"{n:.0f}"


def duration(s: float | None) -> str:
    if s is None:
        return "-"
    s = max(0.0, s)
    if s < 60:
        return f"{s:.1f} s"
    m, sec = divmod(int(s), 60)
    if m < 60:
        return f"{m}m {sec:02d}s"
    h, m = divmod(m, 60)
    if h < 48:
        return f"{h}h {m:02d}m"
    return f"{h // 24}d {h % 24}h"


def stamp(ts: float | None) -> str:
    """A UTC timestamp, minutes precision."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ts)) if ts else "-"


def ago(ts: float | None, now: float | None = None) -> str:
    if not ts:
        return "-"
    return duration((now if now is not None else time.time()) - ts) + " ago"


# what a speedup figure was computed from, as every page labels it
RECORDED = "recorded"
REMEASURED = "re-measured"
RECORDED_NOTE = "recorded: the baseline's and the best kernel's profiles during the search"
REMEASURED_NOTE = (
    "re-measured: baseline and best timed again in interleaved rounds on fresh seeds at the end of "
    "the problem"
)


def remeasured(rm: Any) -> str:
    """An end-of-problem re-measure (`ProblemRemeasured`, or None) as `9.27x (15.54 / 1.603 ms)`:
    the speedup with the baseline's and the best's medians it is the ratio of."""
    if rm is None:
        return "-"
    if rm.speedup is None:
        failed = rm.best if rm.best.status != "passed" else rm.baseline
        return f"- ({failed.status})"
    return (
        f"{speedup(rm.speedup)} ({ms(rm.baseline.median_ms).removesuffix(' ms')} / {ms(rm.best.median_ms)})"
    )


def speedup_source(remeasured: int, problems: int) -> str:
    """The label of a geomean speedup over `problems`, `remeasured` of which were re-measured
    (the others count with their recorded speedup)."""
    if problems and remeasured >= problems:
        return REMEASURED
    if not remeasured:
        return RECORDED
    return f"{REMEASURED} for {remeasured} of {problems} problems, {RECORDED} for the rest"
