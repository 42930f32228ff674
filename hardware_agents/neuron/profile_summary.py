"""Parsing `neuron-profile view --output-format summary-json -n K.neff -s K.ntff`.

The summary is a JSON object keyed by the profiled NEFF (one entry for one kernel), whose
value holds `total_time` (seconds of on-device time) and the profiler's metrics. AccelOpt
shows the planner 16 of them plus the latency (the paper's `profile_list.json` and
`displayed_profiles.json`); they become `Profile.counters`.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

# The paper's profile fields (prompts/profile_list.json of the reference code), in its order.
COUNTER_FIELDS: tuple[str, ...] = (
    "hbm_read_bytes",
    "hbm_write_bytes",
    "psum_read_bytes",
    "psum_write_bytes",
    "sbuf_read_bytes",
    "sbuf_write_bytes",
    "spill_reload_bytes",
    "spill_save_bytes",
    "hardware_flops",
    "transpose_flops",
    "peak_flops_bandwidth_ratio",
    "mm_arithmetic_intensity",
    "hfu_estimated_percent",
    "scalar_engine_active_time_percent",
    "vector_engine_active_time_percent",
    "gpsimd_engine_active_time_percent",
)
# With the latency (`total_time`), the 17 fields the paper's planner sees.
TOTAL_TIME = "total_time"


class SummaryError(ValueError):
    """A profiler summary without a usable on-device time."""


class ProfileSummary(msgspec.Struct, frozen=True, kw_only=True):
    total_time_s: float
    counters: dict[str, float] = {}
    key: str = ""


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        x = float(value)
    elif isinstance(value, str):
        try:
            x = float(value.strip().rstrip("%").replace(",", ""))
        except ValueError:
            return None
    else:
        return None
    return x if math.isfinite(x) else None


def _entry(doc: Any) -> tuple[str, dict[str, Any]]:
    if not isinstance(doc, dict) or not doc:
        raise SummaryError("summary JSON is not a non-empty object")
    if TOTAL_TIME in doc:
        return "", doc
    for key, value in doc.items():  # {"<neff>": {...}}: the first entry with a total_time
        if isinstance(value, dict) and TOTAL_TIME in value:
            return str(key), value
    raise SummaryError(f"summary JSON has no '{TOTAL_TIME}' (keys: {', '.join(list(map(str, doc))[:8])})")


def parse_summary(text: str | bytes) -> ProfileSummary:
    """total_time (seconds) and the counters present in one summary-json document."""
    raw = text.encode() if isinstance(text, str) else text
    try:
        doc = msgspec.json.decode(raw)
    except msgspec.DecodeError as e:
        lo, hi = raw.find(b"{"), raw.rfind(b"}")  # the tool may print log lines around the JSON
        try:
            if lo < 0 or hi <= lo:
                raise msgspec.DecodeError(str(e))
            doc = msgspec.json.decode(raw[lo : hi + 1])
        except msgspec.DecodeError:
            raise SummaryError(f"summary is not JSON: {e}") from None
    key, entry = _entry(doc)
    total = _number(entry.get(TOTAL_TIME))
    if total is None or total <= 0:
        raise SummaryError(f"summary total_time {entry.get(TOTAL_TIME)!r} is not a positive number")
    counters = {f: v for f in COUNTER_FIELDS if (v := _number(entry.get(f))) is not None}
    return ProfileSummary(total_time_s=total, counters=counters, key=key)


__all__ = ["COUNTER_FIELDS", "TOTAL_TIME", "ProfileSummary", "SummaryError", "parse_summary"]
