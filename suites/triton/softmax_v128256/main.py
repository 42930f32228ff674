"""Row softmax in fp32, one program per row, three passes over the row: the maximum, the sum
of exp(x - max), then the normalized probabilities."""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 4096
NUM_WARPS = 8


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * n_cols
    m = tl.full([BLOCK], float("-inf"), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + offs, mask=offs < n_cols, other=float("-inf")).to(tl.float32)
        m = tl.maximum(m, x)
    row_max = tl.max(m, axis=0)
    s = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + offs, mask=offs < n_cols, other=float("-inf")).to(tl.float32)
        s += tl.exp(x - row_max)
    denom = tl.sum(s, axis=0)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(x_ptr + base + offs, mask=mask, other=float("-inf")).to(tl.float32)
        tl.store(out_ptr + base + offs, (tl.exp(x - row_max) / denom).to(out_ptr.dtype.element_ty), mask=mask)


def run(logits: torch.Tensor, probs: torch.Tensor) -> None:
    batch_size, vocab_size = logits.shape
    _softmax_kernel[(batch_size,)](logits, probs, vocab_size, BLOCK=BLOCK_SIZE, num_warps=NUM_WARPS)
