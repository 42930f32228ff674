"""The CPU suite: 14 NKIBench operators, each with a valid definition and a passing baseline."""

from __future__ import annotations

import pytest

import suites
from hardware_agents.cpu import CpuAgent, c_signature
from hardware_agents.pipeline import inputgen, numpy_ref
from hardware_agents.pipeline.device_spec import roofline_terms

NKIBENCH = {
    "matmul",
    "transpose_matmul",
    "bmm",
    "bmm_softmax",
    "silu",
    "swiglu",
    "rmsnorm_matmul",
    "add_rmsnorm_matmul",
    "matmul_add_rmsnorm",
    "lora",
    "adamw",
    "rope_single_freq_apply",
    "gqa_full",
    "mamba",
}


def test_suite_has_the_14_nkibench_problems() -> None:
    assert "cpu" in suites.list_suites()
    assert set(suites.problem_names("cpu")) == NKIBENCH
    info = suites.suite_info("cpu")
    assert (info.device, info.language) == ("cpu", "c")


@pytest.mark.parametrize("name", sorted(NKIBENCH))
def test_definition_is_complete(name: str) -> None:
    p = suites.get_problem(f"cpu/{name}")
    d = p.definition
    assert d.x_numpy_reference and "def run" in d.reference
    assert all(t.dtype == "float32" for t in [*d.inputs.values(), *d.outputs.values()])
    terms = roofline_terms(p)
    assert terms.bytes_min > 0 and terms.flops_matmul + terms.flops_vector > 0
    assert p.baseline.spec.language == "c" and p.baseline.entry_symbol == "kernel"
    src = p.baseline.sources[0].content
    assert "#define" in src and "void kernel(" in src  # tunables as #defines, the documented entry
    assert "void kernel(" in c_signature(p)
    # every adversarial case yields a finite float64 reference
    for case in inputgen.input_cases(d, (0,)):
        ref = numpy_ref.reference_outputs(p, inputgen.make_inputs(p, case))
        assert all(bool((abs(r) < float("inf")).all()) for r in ref.values()), case.name


@pytest.mark.parametrize("name", sorted(NKIBENCH))
def test_baseline_passes(name: str, cpu_agent: CpuAgent) -> None:
    p = suites.get_problem(f"cpu/{name}")
    prof = cpu_agent.profile(p, p.baseline)
    assert prof.status == "passed", prof.log
    assert len(prof.correctness) >= 4 and all(c.passed for c in prof.correctness)
    assert any(c.case == "large" for c in prof.correctness)
    assert prof.latency is not None and prof.latency.median_ms > 0
    assert prof.peak_fraction is not None and 0 < prof.peak_fraction <= cpu_agent.max_pct_peak
    assert prof.bound in ("memory", "matmul", "vector")
    assert prof.toolchain["compiler"].startswith("gcc")
