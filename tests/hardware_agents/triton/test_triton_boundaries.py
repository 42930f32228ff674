"""The interpreter's boundary workloads (`hardware_agents/triton/boundaries.py`): check
workloads across the tile boundaries kernels break at (rows 63/64/65, 127/128/129, a partial
tile after whole ones), within the interpreter's budget, never past the problem's own
workload, valid for paged operators; and a kernel wrong from row 64 on, which every other
interpreter check passes, is `incorrect` through them."""

from __future__ import annotations

import msgspec
import pytest
from testdirs import ADVERSARIAL
from triton_helpers import edited, failing, solution

import hardware_agents.triton.stages as stages
import suites
from accelopt.problem import AxisConst, Problem, SafetensorsInput, Solution, Workload
from hardware_agents.index_inputs import synthesize
from hardware_agents.triton import H100Agent, plan_triton_cases
from hardware_agents.triton.boundaries import BOUNDARY_ELEMENTS, boundary_workloads, free_axes
from hardware_agents.triton.inputs import input_elements

NAMES = sorted(p.name for p in suites.load_suite("triton"))
SEEDS = (0, 21, 42)


def _boundaries(p: Problem) -> list[Workload]:
    return boundary_workloads(p)


def test_rmsnorm_is_checked_past_rows_64_and_128_in_the_interpreter(triton_suite):
    p = triton_suite["rmsnorm_h4096"]
    edge = stages.plan_boundary_cases(p, SEEDS)
    assert [c.workload.axes["batch_size"] for c in edge] == [129, 128, 65, 127]  # both sides of 128, past 64
    assert [c.name for c in edge] == [f"boundary-batch_size-{n}-seed0" for n in (129, 128, 65, 127)]
    assert all(c.case.seed == SEEDS[0] and not c.case.adversarial for c in edge)
    plan, contents = plan_triton_cases(p, SEEDS, on_gpu=False)  # the profile's own child: as before
    assert contents == ["seed0", "seed21", "seed42"] and not any(
        c.label.startswith("boundary-") for c in plan
    )


@pytest.mark.parametrize("name", NAMES)
def test_every_suite_problem_gets_boundary_workloads_within_the_budget(triton_suite, name):
    p = triton_suite[name]
    got = _boundaries(p)
    assert got, f"{name}: no boundary workload"
    assert sum(input_elements(p.definition, w) for w in got) <= BOUNDARY_ELEMENTS
    checks = {tuple(sorted(w.axes.items())) for w in p.check_workloads}
    keys = [tuple(sorted(w.axes.items())) for w in got]
    assert len(set(keys)) == len(keys) and not set(keys) & checks  # new shapes only
    free = free_axes(p.definition, p.check_workloads[0])
    for w in got:
        axis = w.x_label.removeprefix("boundary-").rsplit("-", 1)[0]
        assert axis in free and w.axes[axis] <= p.workload.axes[axis], (w.x_label, w.axes)


def test_gemm_gets_a_whole_tile_and_a_partial_one_along_every_axis(triton_suite):
    p = triton_suite["gemm_fp16"]
    got = _boundaries(p)
    for axis in ("M", "N", "K"):
        values = {w.axes[axis] for w in got if w.x_label.startswith(f"boundary-{axis}-")}
        assert values == {63, 64, 65, 127, 128, 129} - {p.check_workloads[1].axes[axis]}, (axis, values)
        # a 64-wide tile: 65, 127 and 129 end in a partial one after a whole one
        assert {v for v in values if v > 64 and v % 64} == {65, 127, 129}


def test_rows_too_wide_for_63_get_a_smaller_boundary(triton_suite):
    """Softmax over 128,256 logits: 63 rows hold 8M input elements, past the budget, so its
    batch axis crosses the largest smaller boundary that fits (9 rows: tiles of 8)."""
    p = triton_suite["softmax_v128256"]
    assert [w.axes["batch_size"] for w in _boundaries(p)] == [9]
    assert input_elements(p.definition, _boundaries(p)[0]) <= BOUNDARY_ELEMENTS


def test_paged_boundaries_vary_the_page_table_and_keep_the_indices_valid(triton_suite):
    """Of a paged decode, the page table's length crosses the boundaries (a sequence's tiles
    of keys), its sequences stay the check workloads' few, the cache holds every page."""
    p = triton_suite["gqa_paged_decode_h32_kv8_d128_ps1"]
    got = _boundaries(p)
    consts = {k: a.value for k, a in p.definition.axes.items() if isinstance(a, AxisConst)}
    assert [w.axes["num_kv_indices"] for w in got] == [129, 128, 65, 127, 64, 63]
    for w in got:
        a = w.axes
        assert a["batch_size"] == min(c.axes["batch_size"] for c in p.check_workloads)
        assert a["len_indptr"] == a["batch_size"] + 1 and a["num_pages"] >= a["num_kv_indices"]
        idx = synthesize(p.definition, {**consts, **a}, SEEDS[0])
        lengths = idx["kv_indptr"][1:] - idx["kv_indptr"][:-1]
        assert int(idx["kv_indptr"][-1]) == a["num_kv_indices"] and max(lengths) > 32  # past a 32-key tile
        assert len(set(idx["kv_indices"].tolist())) == a["num_kv_indices"]  # distinct pages


def test_never_past_the_problems_own_workload(triton_suite):
    """A GPU checks the problem's own workload; the interpreter is never stricter than it."""
    p = triton_suite["rmsnorm_h4096"]
    small = msgspec.structs.replace(p, workload=msgspec.structs.replace(p.workload, axes={"batch_size": 100}))
    assert [w.axes["batch_size"] for w in _boundaries(small)] == [65, 64, 63]
    tiny = msgspec.structs.replace(p, workload=msgspec.structs.replace(p.workload, axes={"batch_size": 5}))
    assert _boundaries(tiny) == []


def test_recorded_inputs_fix_their_workloads_shape(triton_suite):
    """Boundary workloads draw their inputs at random: they derive from the check workloads
    that do, never from one whose input is recorded data."""
    p = triton_suite["rmsnorm_h4096"]
    recorded = msgspec.structs.replace(
        p.check_workloads[0], inputs={"hidden_states": SafetensorsInput(path="x.safetensors", tensor_key="x")}
    )
    assert boundary_workloads(msgspec.structs.replace(p, check_workloads=[recorded])) == []
    mixed = boundary_workloads(msgspec.structs.replace(p, check_workloads=[recorded, p.check_workloads[1]]))
    assert [w.axes["batch_size"] for w in mixed] == [129, 128, 65, 127]
    assert all(not w.inputs for w in mixed)


def test_a_problem_checked_at_its_own_workload_gets_none(triton_suite):
    """Without check workloads the interpreter runs the problem's own workload, what a GPU
    checks: nothing to make up for (a kernel for power-of-two sizes only stays right there)."""
    p = triton_suite["rmsnorm_h4096"]
    assert boundary_workloads(msgspec.structs.replace(p, check_workloads=[])) == []


def _wrong_from_row_64(p: Problem) -> Solution:
    return solution(
        p, (ADVERSARIAL / "triton" / "wrong_from_row_64.py").read_text(), name="wrong_from_row_64"
    )


def test_a_kernel_wrong_from_row_64_is_incorrect_at_the_boundaries(interp_agent: H100Agent, triton_suite):
    p = triton_suite["rmsnorm_h4096"]
    prof = interp_agent.profile(p, _wrong_from_row_64(p), seeds=(0,))
    assert prof.status == "incorrect", prof.log
    bad = failing(prof)
    assert bad and all(c.startswith("boundary-batch_size-") for c in bad), bad  # the small ones pass
    assert "boundary-batch_size-65-seed0 (batch_size=65)" in bad
    assert {"seed0", "large", "small-2-seed0 (batch_size=5)"} <= {
        c.case for c in prof.correctness if c.passed
    }
    assert prof.counters["boundary_cases"] == 4


def test_without_the_boundary_workloads_it_passes(
    interp_agent: H100Agent, triton_suite, monkeypatch: pytest.MonkeyPatch
):
    """The gap the boundary workloads close: with them taken out, the same kernel is kept as
    correct, so the test above fails if they are removed."""
    monkeypatch.setattr(stages, "boundary_workloads", lambda problem: [])
    p = triton_suite["rmsnorm_h4096"]
    prof = interp_agent.profile(p, _wrong_from_row_64(p), seeds=(0,))
    assert prof.status == "unmeasured", prof.log
    assert not any(c.case.startswith("boundary-") for c in prof.correctness)


def test_out_of_time_at_the_boundaries_keeps_the_verdict_and_says_so(interp_agent: H100Agent, triton_suite):
    """The interpreter's slowness is no fault of the kernel: a kernel correct at the check
    workloads whose boundary child runs out of time stays `unmeasured`, named unchecked there."""
    p = triton_suite["rmsnorm_h4096"]
    slow = edited(
        p,
        "    batch_size, hidden_size = hidden_states.shape\n",
        "    batch_size, hidden_size = hidden_states.shape\n"
        "    if batch_size > 64:\n        import time\n\n        time.sleep(600)\n",
    )
    prof = interp_agent.profile(p, solution(p, slow, name="slow_past_64"), seeds=(0,), timeout_s=30.0)
    assert prof.status == "unmeasured", prof.log
    assert (
        prof.counters["boundary_unchecked"] == 1.0
        and "not checked at the boundary workloads (timeout" in prof.log
    )
    assert not any(c.case.startswith("boundary-") for c in prof.correctness)
