"""The simulated device (kind "sim"): profiles that sleep, for fleet tests and benchmarks.

A profile takes no CPU while it "runs" (it waits on an event for `profile_s`), then reports
a kernel latency drawn from a log-normal distribution and a pass/fail outcome, both
deterministic per (agent seed, problem, kernel source). Many profiles may run at once in
one process (`concurrent_profiles`), so one host can stand in for a fleet of devices: see
`benchmarks/scale_bench.py` and docs/cluster.md.

Hidden: its probe is false unless opted in (`gate.py`), so `available_devices()` leaves it
out, and `get_agent("sim")`, `accelopt run --device sim` and `run_session` refuse it
without `ACCELOPT_ALLOW_SIM=1` or `devices.sim.options.allow=true`. Its test suite is not
shipped: `hardware_agents.sim.suite.write_suite(dir)` writes one where a test wants it.
"""

from hardware_agents.sim.gate import ALLOW_ENV, KIND, refusal, sim_allowed

__all__ = ["ALLOW_ENV", "KIND", "refusal", "sim_allowed"]
