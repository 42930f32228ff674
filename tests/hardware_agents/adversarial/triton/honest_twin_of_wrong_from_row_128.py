# expect: passed
# problem: triton/fused_add_rmsnorm_h4096
# why: the honest twin of wrong_from_row_128.py: the same persistent fused add + RMSNorm on at
#      most 128 programs, each looping over every 128th row from its own. It must pass the
#      boundary workloads (65 and 129 rows) that catch its twin.
"""Fused residual add + RMSNorm as a persistent kernel: a grid of at most NUM_PROGRAMS
programs, each looping over every NUM_PROGRAMS-th row from its own."""

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
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):  # every NUM_PROGRAMS-th row from its own
        _add_rmsnorm_row(x_ptr, r_ptr, w_ptr, out_ptr, res_out_ptr, row, hidden, eps, BLOCK)


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
