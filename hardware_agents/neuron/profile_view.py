"""`neuron-profile view --output-format summary-json` over NEFF/NTFF pairs.

`summarize` is a sandbox target the agent runs in a child of its own, with copies of the
profiler files the timing child wrote: it loads neither the kernel nor the Neuron SDK, so
nothing the kernel did to its own process reaches the reading.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import msgspec

from hardware_agents.neuron.protocol import SummaryRequest, SummaryResult

_MAX_SUMMARY_BYTES = 8 << 20


def profile_total_time(
    neuron_profile: str, neff: Path, ntff: Path, timeout_s: float = 120.0
) -> tuple[str, str]:
    """(summary-json text, error) of one NEFF/NTFF pair."""
    cmd = [neuron_profile, "view", "--output-format", "summary-json", "-n", str(neff), "-s", str(ntff)]
    try:
        proc = subprocess.run(cmd, capture_output=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "", f"{' '.join(cmd)}: {type(e).__name__}: {e}"
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace")[-2000:]
        return "", f"{' '.join(cmd)} exited with {proc.returncode}: {err}"
    return proc.stdout[:_MAX_SUMMARY_BYTES].decode(errors="replace"), ""


def summarize(payload: bytes, workdir: Path) -> SummaryResult:
    """Sandbox target: the summaries of `pairs` (relative to the work dir)."""
    req = msgspec.msgpack.decode(payload, type=SummaryRequest)
    out = SummaryResult()
    for neff, ntff in req.pairs:
        text, err = profile_total_time(req.neuron_profile, workdir / neff, workdir / ntff, req.timeout_s)
        out.texts.append(text)
        out.errors.append(err)
    return out


__all__ = ["profile_total_time", "summarize"]
