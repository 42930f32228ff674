# expect: passed
# problem: triton/rmsnorm_h4096
# why: the honest twin of wrong_from_row_64.py: the same RMSNorm over rows taken in tiles of
#      64, addressing a row's input by its tile's base plus its place in the tile. It must
#      pass the boundary workloads (65 to 129 rows) that catch its twin.
"""RMSNorm, one program per row, the rows taken in tiles of TILE_ROWS."""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024
TILE_ROWS = 64
NUM_WARPS = 4


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, out_ptr, hidden, eps, BLOCK: tl.constexpr, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    src = ((row // TILE) * TILE + row % TILE) * hidden  # the tile's base, then the row's place in it
    dst = row * hidden
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, hidden, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < hidden
        x = tl.load(x_ptr + src + offs, mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    inv_rms = tl.rsqrt(tl.sum(acc, axis=0) / hidden + eps)
    for start in range(0, hidden, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < hidden
        x = tl.load(x_ptr + src + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + dst + offs, (x * inv_rms * w).to(out_ptr.dtype.element_ty), mask=mask)


def run(hidden_states: torch.Tensor, weight: torch.Tensor, output: torch.Tensor) -> None:
    batch_size, hidden_size = hidden_states.shape
    _rmsnorm_kernel[(batch_size,)](
        hidden_states,
        weight,
        output,
        hidden_size,
        1e-6,
        BLOCK=BLOCK_SIZE,
        TILE=TILE_ROWS,
        num_warps=NUM_WARPS,
    )
