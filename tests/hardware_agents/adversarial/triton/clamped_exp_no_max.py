# expect: incorrect
# problem: triton/softmax_v128256
# needle: (with 4x float32's own error)
# fails_only: large
# why: a softmax without max subtraction that keeps its exp from overflowing by clamping the
#      logit at 80 (exp(min(x, 80)) / sum): exact at ordinary magnitudes, finite but wrong
#      once logits pass 80 (every such logit weighs the same), which the large case's do.
#      Its outputs stay finite, so the judge consults its float32 floor (float32's own error
#      on those inputs) there, which must not excuse it.
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
    row_max = tl.max(m, axis=0)  # noqa: F841 (computed, then not used: the docstring lies)
    s = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + offs, mask=offs < n_cols, other=float("-inf")).to(tl.float32)
        s += tl.exp(tl.minimum(x, 80.0))
    denom = tl.sum(s, axis=0)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(x_ptr + base + offs, mask=mask, other=float("-inf")).to(tl.float32)
        tl.store(
            out_ptr + base + offs,
            (tl.exp(tl.minimum(x, 80.0)) / denom).to(out_ptr.dtype.element_ty),
            mask=mask,
        )


def run(logits: torch.Tensor, probs: torch.Tensor) -> None:
    batch_size, vocab_size = logits.shape
    _softmax_kernel[(batch_size,)](logits, probs, vocab_size, BLOCK=BLOCK_SIZE, num_warps=NUM_WARPS)
