"""The opt-in that keeps the simulated device out of real runs.

The `sim` kind reports made-up latencies, so a real run must never select it by accident:
`accelopt run`, `run_session` (through the family's `refuse_run`, `family.py`) and the
agent's constructor all refuse it unless the
environment says `ACCELOPT_ALLOW_SIM=1` or the run's config opts in with
`devices.sim.options.allow=true` (which travels to every profiler host with the config).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

KIND = "sim"
ALLOW_ENV = "ACCELOPT_ALLOW_SIM"


def sim_allowed(options: Mapping[str, Any] | None = None) -> bool:
    """True when the environment or the agent options opt in to the simulated device."""
    if os.environ.get(ALLOW_ENV, "") == "1":
        return True
    return bool((options or {}).get("allow", False))


def refusal(options: Mapping[str, Any] | None = None) -> str | None:
    """Why a run on the sim kind may not start (no opt-in), or None. `options` are the run
    config's `devices.sim.options` (its `allow` opts in)."""
    if sim_allowed(options):
        return None
    return (
        f"device {KIND!r} is the simulated device for fleet tests and benchmarks (made-up latencies); "
        f"set {ALLOW_ENV}=1 or devices.{KIND}.options.allow=true to use it on purpose"
    )
