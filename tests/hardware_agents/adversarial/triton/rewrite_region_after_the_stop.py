# expect: incorrect
# problem: triton/softmax_v128256
# needle: (with 4x float32's own error)
# fails_only: large
# ran: large case rewritten after the stop
# why: the clamped softmax of clamped_exp_no_max.py (exact at ordinary magnitudes, finite but
#      wrong on the large case), which keeps its output tensor of the large case (a view of the
#      judge's region) and, at its first call after the stop before timing round 0, writes an
#      honest torch softmax of that case's logits into it. A case that needs the float32 floor
#      is judged again after the rounds; were its outputs read from the region again then, the
#      rewritten values would pass. The judge must use what it read while the child was held
#      stopped (rewrite_outputs_after_the_stop.py is the same trick on the child's files).
"""Row softmax in fp32, one program per row."""

import os
import sys

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 4096
NUM_WARPS = 8
_KEPT: dict[str, torch.Tensor] = {}


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * n_cols
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
        tl.store(out_ptr + base + offs, (tl.exp(tl.minimum(x, 80.0)) / denom), mask=mask)


def run(logits: torch.Tensor, probs: torch.Tensor) -> None:
    if "probs" in _KEPT and os.path.exists("out/correctness.msgpack"):
        _KEPT.pop("probs").copy_(_KEPT.pop("honest"))
        print("large case rewritten after the stop", file=sys.stderr, flush=True)
    batch_size, vocab_size = logits.shape
    _softmax_kernel[(batch_size,)](logits, probs, vocab_size, BLOCK=BLOCK_SIZE, num_warps=NUM_WARPS)
    if not _KEPT and not os.path.exists("out/correctness.msgpack") and float(logits.abs().max()) > 500:
        _KEPT["probs"], _KEPT["honest"] = probs, torch.softmax(logits.float(), dim=-1).clone()
