"""Known-wrong Triton kernels are caught in the interpreter: off-by-one masks (reads into the
next row or the guard zone, writes past the output), a softmax without max subtraction
(the large-magnitude adversarial case), wrong output dtype and shape, an output element
never written (poison)."""

from __future__ import annotations

from triton_helpers import edited, failing, solution

SOFTMAX = "softmax_v128256"
RMSNORM = "rmsnorm_h4096"


def test_off_by_one_load_mask_reads_the_guard(interp_agent, triton_suite):
    p = triton_suite[SOFTMAX]
    src = edited(
        p,
        'x = tl.load(x_ptr + base + offs, mask=offs < n_cols, other=float("-inf")).to(tl.float32)\n'
        "        s += tl.exp(x - row_max)",
        'x = tl.load(x_ptr + base + offs, mask=offs <= n_cols, other=float("-inf")).to(tl.float32)\n'
        "        s += tl.exp(x - row_max)",
    )
    prof = interp_agent.profile(p, solution(p, src))
    assert prof.status == "incorrect", prof.log
    assert "non-finite" in prof.log  # the last row read the NaN guard zone past the input


def test_off_by_one_store_mask_writes_past_the_output(interp_agent, triton_suite):
    p = triton_suite[SOFTMAX]
    src = edited(
        p,
        "        mask = offs < n_cols\n        x = tl.load(x_ptr + base + offs, mask=mask",
        "        mask = offs <= n_cols\n        x = tl.load(x_ptr + base + offs, mask=offs < n_cols",
    )
    prof = interp_agent.profile(p, solution(p, src))
    assert prof.status == "incorrect", prof.log
    assert "wrote outside the bounds of output(s) probs" in prof.log


def test_softmax_without_max_subtraction_fails_the_large_case(interp_agent, triton_suite):
    p = triton_suite[SOFTMAX]
    src = edited(p, "s += tl.exp(x - row_max)", "s += tl.exp(x)")
    src = src.replace("(tl.exp(x - row_max) / denom)", "(tl.exp(x) / denom)")
    prof = interp_agent.profile(p, solution(p, src))
    assert prof.status == "incorrect", prof.log
    assert failing(prof) == ["large"]  # correct on ordinary inputs, overflows at large magnitudes
    # refused for the reason, not as a bare mismatch; its non-finite outputs never reach the floor
    assert (
        "large: overflow: non-finite probs where the reference is finite, at inputs scaled x1000" in prof.log
    )
    assert "exp without max subtraction" in prof.log
    assert "fp32_floor_cases" not in prof.counters and "phase_fp32_floor_s" not in prof.counters


VALUE_RETURNING = """
import torch
import triton
import triton.language as tl

BLOCK_SIZE = 4096


@triton.jit
def _kernel(x_ptr, w_ptr, out_ptr, hidden, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * hidden + offs).to(tl.float32)
    w = tl.load(w_ptr + offs).to(tl.float32)
    y = x * tl.rsqrt(tl.sum(x * x, axis=0) / hidden + 1e-6) * w
    tl.store(out_ptr + row * hidden + offs, y.to(out_ptr.dtype.element_ty))


def run(hidden_states, weight):
    out = torch.empty(hidden_states.shape, dtype=OUT_DTYPE)
    _kernel[(hidden_states.shape[0],)](hidden_states, weight, out, hidden_states.shape[1], BLOCK=BLOCK_SIZE)
    return RESULT
"""


def test_wrong_output_dtype(interp_agent, triton_suite):
    p = triton_suite[RMSNORM]
    ok = VALUE_RETURNING.replace("OUT_DTYPE", "torch.bfloat16").replace("RESULT", "out")
    good = interp_agent.profile(p, solution(p, ok, dps=False))
    assert good.status == "unmeasured", good.log  # the value-returning convention itself works
    bad = VALUE_RETURNING.replace("OUT_DTYPE", "torch.float32").replace("RESULT", "out")
    prof = interp_agent.profile(p, solution(p, bad, dps=False))
    assert prof.status == "incorrect", prof.log
    assert "has dtype float32, the definition says bfloat16" in prof.log


def test_wrong_output_shape_and_count(interp_agent, triton_suite):
    p = triton_suite[RMSNORM]
    flat = VALUE_RETURNING.replace("OUT_DTYPE", "torch.bfloat16").replace("RESULT", "out.reshape(-1)")
    prof = interp_agent.profile(p, solution(p, flat, dps=False))
    assert prof.status == "incorrect" and "has shape" in prof.log, prof.log
    two = VALUE_RETURNING.replace("OUT_DTYPE", "torch.bfloat16").replace("RESULT", "out, out")
    prof = interp_agent.profile(p, solution(p, two, dps=False))
    assert prof.status == "incorrect" and "returned 2 value(s)" in prof.log, prof.log


def test_unwritten_output_rows_are_caught_by_the_poison(interp_agent, triton_suite):
    p = triton_suite[RMSNORM]
    src = edited(p, "_rmsnorm_kernel[(batch_size,)]", "_rmsnorm_kernel[(max(batch_size - 1, 1),)]")
    prof = interp_agent.profile(p, solution(p, src))
    assert prof.status == "incorrect", prof.log
    assert "NaN" in prof.log and "never written" in prof.log
