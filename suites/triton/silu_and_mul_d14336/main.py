"""SiLU-and-multiply (SwiGLU activation): out = silu(x[:, :d]) * x[:, d:], computed in fp32;
one program per (token, BLOCK_SIZE columns)."""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024
NUM_WARPS = 4


@triton.jit
def _silu_and_mul_kernel(x_ptr, out_ptr, d, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < d
    gate = tl.load(x_ptr + row * 2 * d + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * 2 * d + d + cols, mask=mask, other=0.0).to(tl.float32)
    silu = gate / (1.0 + tl.exp(-gate))
    tl.store(out_ptr + row * d + cols, (silu * up).to(out_ptr.dtype.element_ty), mask=mask)


def run(x: torch.Tensor, out: torch.Tensor) -> None:
    num_tokens, d = out.shape
    grid = (num_tokens, triton.cdiv(d, BLOCK_SIZE))
    _silu_and_mul_kernel[grid](x, out, d, BLOCK=BLOCK_SIZE, num_warps=NUM_WARPS)
