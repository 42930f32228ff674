"""The float32 floor of the Triton judge's adversarial cases (`TritonJudge._floor_check`,
`ProblemData.floor`, `reference.fp32_floor_of`), in the Triton interpreter through the real
agent and sandboxed children.

An attention whose keys differ by 1e-4 of their size: at the `large` case's 1000x magnitudes
its scores are ~8e3 apart by ~0.8, a few hundred float32 ulps, so the softmax weights carry
float32's rounding of the scores, and an honest kernel summing in float32 in another order
than the float32 reference misses the plain tolerance on half the elements. With the floor
(the reference re-run in float32 on inputs moved by one ulp, in the reference's child) it
passes; without it, it fails. A kernel that rounds its scores to bf16 passes the ordinary
seeds (scores of ~0.008) and fails the large case with the floor too."""

from __future__ import annotations

import pytest
from triton_helpers import failing

from accelopt.problem import AxisVar, Definition, Problem, Solution, TensorSpec, Workload, one_file_solution
from hardware_agents.triton import judge as triton_judge

REFERENCE = """import torch


@torch.no_grad()
def run(q, k, v):
    s = q.float() @ k.float().T
    return torch.softmax(s, dim=-1) @ v.float()
"""

KERNEL = """import torch
import triton
import triton.language as tl


@triton.jit
def _attn(q_ptr, k_ptr, v_ptr, o_ptr, N: tl.constexpr, D: tl.constexpr):
    i = tl.program_id(0)
    dn = tl.arange(0, D)
    nn = tl.arange(0, N)
    q = tl.load(q_ptr + i * D + dn)
    k = tl.load(k_ptr + nn[:, None] * D + dn[None, :])
    s = tl.sum(k * q[None, :], axis=1)
    SCORES
    p = tl.exp(s - tl.max(s, axis=0))
    v = tl.load(v_ptr + nn[:, None] * D + dn[None, :])
    o = tl.sum(p[:, None] * v, axis=0) / tl.sum(p, axis=0)
    tl.store(o_ptr + i * D + dn, o)


def run(q, k, v, out):
    _attn[(q.shape[0],)](q, k, v, out, N=k.shape[0], D=q.shape[1])
"""

HONEST = KERNEL.replace("SCORES", "")
BF16_SCORES = KERNEL.replace("SCORES", "s = s.to(tl.bfloat16).to(tl.float32)")


def tie_attention() -> Problem:
    d = Definition(
        name="tie_attention_n256_d64",
        op_type="attention",
        axes={"Q": AxisVar(), "N": AxisVar(), "D": AxisVar()},
        inputs={
            "q": TensorSpec(shape=["Q", "D"], dtype="float32"),
            "k": TensorSpec(shape=["N", "D"], dtype="float32"),
            "v": TensorSpec(shape=["N", "D"], dtype="float32"),
        },
        outputs={"out": TensorSpec(shape=["Q", "D"], dtype="float32")},
        reference=REFERENCE,
        # `large` (every float input x1000): keys 1 + 1e-4 * normal, queries 1000 * normal
        x_input_init={"k": "0.001 + 0.0000001 * normal(0, 1)"},
    )
    base = one_file_solution(d.name, HONEST, entry_point="main.py::run", language="triton", device="h100")
    return Problem(
        definition=d, workload=Workload(uuid="t", axes={"Q": 64, "N": 256, "D": 64}), baseline=base
    )


@pytest.fixture(scope="module")
def problem() -> Problem:
    return tie_attention()


def _kernel(problem: Problem, source: str, name: str) -> Solution:
    return one_file_solution(
        problem.definition.name,
        source,
        entry_point="main.py::run",
        language="triton",
        device="h100",
        name=name,
    )


def test_an_honest_float32_kernel_passes_the_large_case_with_the_floor(interp_agent, problem) -> None:
    prof = interp_agent.profile(problem, problem.baseline)
    assert prof.status == "unmeasured", prof.log
    assert prof.counters["fp32_floor_cases"] == 1.0, prof.counters
    assert prof.counters["phase_fp32_floor_s"] > 0
    # the log says the tolerance alone rejected it there, and by how much
    assert "large passed only with the tolerance widened by 4x float32's own error" in prof.log, prof.log
    assert "elements outside allclose" in prof.log


def test_without_the_floor_the_same_kernel_fails_the_large_case(
    interp_agent, problem, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(triton_judge.TritonJudge, "_floor_check", lambda self, case, label, got, plain: plain)
    prof = interp_agent.profile(problem, _kernel(problem, HONEST, "honest_without_floor"))
    assert prof.status == "incorrect", prof.log
    assert failing(prof) == ["large"]
    assert "float32's own error" not in prof.log


def test_scores_rounded_to_bf16_fail_the_large_case_with_the_floor(interp_agent, problem) -> None:
    prof = interp_agent.profile(problem, _kernel(problem, BF16_SCORES, "bf16_scores"))
    assert prof.status == "incorrect", prof.log
    assert failing(prof) == ["large"]  # right at ordinary magnitudes: only the floor could excuse it
    assert "(with 4x float32's own error)" in prof.log, prof.log
    assert "fp32_floor_cases" not in prof.counters
