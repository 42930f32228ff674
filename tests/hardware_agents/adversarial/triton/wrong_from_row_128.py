# expect: incorrect
# problem: triton/fused_add_rmsnorm_h4096
# needle: boundary-batch_size-129
# why: a persistent fused add + RMSNorm: a grid of at most 128 programs, each meant to loop
#      over every 128th row from its own, but the loop covers its own row only. Rows from 128
#      on are never written (the harness's NaN stays). Every check workload of the problem
#      (batch 3 and 5) has fewer than 128 rows, so the interpreter passed it; its boundary
#      workload of 129 rows is the one that reaches row 128 (the GPU's 8192 rows do too).
#      Its honest twin, with the loop, is honest_twin_of_wrong_from_row_128.py.
"""Fused residual add + RMSNorm as a persistent kernel: a grid of at most NUM_PROGRAMS
programs, each normalizing its own row."""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024
NUM_PROGRAMS = 128
NUM_WARPS = 4


@triton.jit
def _add_rmsnorm_row(x_ptr, r_ptr, w_ptr, out_ptr, res_out_ptr, row, hidden, eps, BLOCK: tl.constexpr):
    base = tl.cast(row, tl.int64) * hidden
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, hidden, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < hidden
        x = tl.load(x_ptr + base + offs, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + base + offs, mask=mask, other=0.0).to(tl.float32)
        s = x + r
        tl.store(res_out_ptr + base + offs, s.to(res_out_ptr.dtype.element_ty), mask=mask)
        acc += s * s
    inv_rms = tl.rsqrt(tl.sum(acc, axis=0) / hidden + eps)
    for start in range(0, hidden, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < hidden
        x = tl.load(x_ptr + base + offs, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + base + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + base + offs, ((x + r) * inv_rms * w).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _fused_add_rmsnorm_kernel(
    x_ptr, r_ptr, w_ptr, out_ptr, res_out_ptr, n_rows, hidden, eps, BLOCK: tl.constexpr
):
    # its own row only: the loop over every NUM_PROGRAMS-th row from it is missing
    _add_rmsnorm_row(x_ptr, r_ptr, w_ptr, out_ptr, res_out_ptr, tl.program_id(0), hidden, eps, BLOCK)


def run(
    hidden_states: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    output: torch.Tensor,
    residual_out: torch.Tensor,
) -> None:
    batch_size, hidden_size = hidden_states.shape
    grid = (min(batch_size, NUM_PROGRAMS),)
    _fused_add_rmsnorm_kernel[grid](
        hidden_states,
        residual,
        weight,
        output,
        residual_out,
        batch_size,
        hidden_size,
        1e-6,
        BLOCK=BLOCK_SIZE,
        num_warps=NUM_WARPS,
    )
