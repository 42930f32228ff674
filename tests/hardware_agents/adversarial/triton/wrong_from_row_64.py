# expect: incorrect
# problem: triton/rmsnorm_h4096
# needle: boundary-batch_size-
# why: RMSNorm that takes the rows in tiles of 64 and addresses a row's input by its place
#      in its tile (`row % 64`), losing the tile's base: rows 0-63 are exact, and every row
#      from 64 on is row r - 64's input normalized (finite values of the right shape and
#      dtype) stored at row r. The small check workloads (batch 3 and 5) never reach row
#      64, so the interpreter passed it; its boundary workloads (65 to 129 rows) reach it.
#      On a GPU the production workload (8192 rows) does too. Its honest twin, with the
#      tile's base, is honest_twin_of_wrong_from_row_64.py.
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
    src = (row % TILE) * hidden  # the row's place in its tile; the tile's base is missing
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
