"""Every baseline of the Triton suite passes in the Triton interpreter (CPU-only host:
correct at the small check workloads and their boundary workloads, status `unmeasured`), and the suite is shaped for
the loop: production workload timed on a GPU, small workloads for the interpreter,
roofline expressions, tunable constants."""

from __future__ import annotations

import pytest

import suites
from accelopt.problem import eval_expression
from hardware_agents.base import DEFAULT_SEEDS
from hardware_agents.languages.tunables import find_tunables
from hardware_agents.triton import plan_triton_cases
from hardware_agents.triton.stages import plan_boundary_cases

NAMES = sorted(p.name for p in suites.load_suite("triton"))


def test_suite_has_the_seven_operators(triton_suite):
    ops = {p.definition.op_type for p in triton_suite.values()}
    assert len(triton_suite) == 7
    assert {"rmsnorm", "gemm", "activation", "softmax", "rope", "gqa_paged"} <= ops
    assert "fused_add_rmsnorm_h4096" in triton_suite
    info = suites.suite_info("triton")
    assert info.device == "h100" and info.language == "triton" and info.entry_point == "main.py::run"


@pytest.mark.parametrize("name", NAMES)
def test_problem_shape(triton_suite, name):
    p = triton_suite[name]
    assert p.workload.x_label == "prod" and len(p.check_workloads) == 2
    assert p.baseline.spec.destination_passing_style and p.baseline.spec.language == "triton"
    roof = p.definition.x_roofline
    assert roof is not None and p.definition.x_tolerance is not None
    for w in (p.workload, *p.check_workloads):
        axes = {k: a.value for k, a in p.definition.axes.items() if hasattr(a, "value")} | w.axes
        assert eval_expression(roof.bytes_min, axes) > 0
    small = sum(
        eval_expression(
            roof.bytes_min,
            {**{k: a.value for k, a in p.definition.axes.items() if hasattr(a, "value")}, **w.axes},
        )
        for w in p.check_workloads
    )
    prod = eval_expression(
        roof.bytes_min,
        {**{k: a.value for k, a in p.definition.axes.items() if hasattr(a, "value")}, **p.workload.axes},
    )
    assert (
        prod > 20 * small
    )  # the production workload is what a GPU times; the small ones are for the interpreter
    names = {t.name for t in find_tunables(p.baseline.sources[0].content)}
    assert any(n.startswith("BLOCK") for n in names) and "NUM_WARPS" in names


def test_plans_pick_the_workload_by_tier(triton_suite):
    p = triton_suite["rmsnorm_h4096"]
    gpu_plan, gpu_contents = plan_triton_cases(p, (0, 21, 42), on_gpu=True)
    cpu_plan, cpu_contents = plan_triton_cases(p, (0, 21, 42), on_gpu=False)
    assert cpu_contents == ["seed0", "seed21", "seed42"]
    assert {c.workload.x_label for c in gpu_plan} == {"prod", "small-1", "small-2"}
    assert {c.workload.x_label for c in cpu_plan} == {"small-1", "small-2"}
    assert [c.name for c in cpu_plan] == ["seed0", "seed21", "seed42", "large", "small-2-seed0"]
    assert gpu_contents == ["seed0", "seed21", "seed42"] and all(
        c.workload.x_label == "prod" for c in gpu_plan if c.name in gpu_contents
    )


@pytest.mark.parametrize("name", NAMES)
def test_baseline_correct_in_the_interpreter(interp_agent, triton_suite, name):
    """Correct at the small check workloads and at every boundary workload
    (`boundaries.boundary_workloads`: rows 63-65 and 127-129, a partial tile after whole ones)."""
    p = triton_suite[name]
    prof = interp_agent.profile(p, p.baseline)
    assert prof.status == "unmeasured", prof.log
    assert prof.latency is None and prof.peak_fraction is None
    assert prof.correctness and all(c.passed for c in prof.correctness)
    cases = [c.case for c in prof.correctness]
    assert any(not c.startswith(("seed", "small", "boundary")) for c in cases)  # an adversarial case ran
    assert any("small-2" in c for c in cases)  # and the second small workload
    boundary = [c.split(" ")[0] for c in cases if c.startswith("boundary-")]
    assert boundary and boundary == [c.name for c in plan_boundary_cases(p, DEFAULT_SEEDS)]
    assert prof.counters["boundary_cases"] == len(boundary) and "boundary workloads too" in prof.log
    assert "not timed" in prof.log and prof.toolchain["mode"] == "interpreter"
