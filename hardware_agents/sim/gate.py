"""The opt-in that keeps the simulated device out of real runs.

The `sim` kind reports made-up latencies, so a real run must never select it by accident:
`accelopt run`, `run_session` and the agent's constructor all refuse it unless the
environment says `ACCELOPT_ALLOW_SIM=1` or the run's config opts in with
`devices.sim.options.allow=true` (which travels to every profiler host with the config).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

KIND = "sim"
ALLOW_ENV = "ACCELOPT_ALLOW_SIM"


def sim_allowed(options: Mapping[str, Any] | None = None) -> bool:
    """True when the environment or the agent options opt in to the simulated device."""
    if os.environ.get(ALLOW_ENV, "") == "1":
        return True
    return bool((options or {}).get("allow", False))


def refusal(devices: Iterable[str], options: Mapping[str, Any] | None = None) -> str | None:
    """Why a run on `devices` may not start (the sim kind without the opt-in), or None."""
    if KIND in set(devices) and not sim_allowed(options):
        return (
            f"device {KIND!r} is the simulated device for fleet tests and benchmarks (made-up latencies); "
            f"set {ALLOW_ENV}=1 or devices.{KIND}.options.allow=true to use it on purpose"
        )
    return None


def run_refusal(cfg: Any, devices: Iterable[str]) -> str | None:
    """`refusal` for a run: `cfg` is its RunConfig (its `devices.sim.options` may opt in)."""
    dcfg = cfg.devices.get(KIND)
    return refusal(devices, dcfg.options if dcfg is not None else None)
