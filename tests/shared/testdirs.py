"""The test folders other folders borrow from (helpers, a suite, the adversarial corpus).

`tests/` mirrors the packages: `tests/<package>/...` tests that package. tests/conftest.py
puts this folder (`tests/shared/`) on `sys.path`, so a test module can `from testdirs import
...`; benchmarks put it there themselves.
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
ADVERSARIAL = TESTS / "hardware_agents" / "adversarial"  # hostile kernels with the status each must get
CPU = TESTS / "hardware_agents" / "cpu"  # cpu_helpers
TRITON = TESTS / "hardware_agents" / "triton"  # triton_helpers, fib_helpers
NEURON = TESTS / "hardware_agents" / "neuron"  # neuron_helpers and the neuronxcc stand-in
LLM = TESTS / "actors" / "llm"  # llm_helpers
LOOP = TESTS / "accelopt" / "loop"  # sim (the core's simulated world), loop_cli
PROMPTS = TESTS / "prompts"  # prompt_samples
HEADROOM_SUITE = LOOP / "headroom_suite"  # a small real suite with room to tune
