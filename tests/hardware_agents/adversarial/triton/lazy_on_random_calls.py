# expect: incorrect
# problem: triton/rmsnorm_h4096
# needle: disagree with the reference at sampled elements
# why: behaves in the checks, then on a random 15% of the timed calls serves the previous
#      call's output (finite values of the right shape and dtype) instead of computing. Full
#      checks of a few calls per profile let it through about a third of the time; every
#      timed call is now checked at secret positions the parent names after the round.
#      (Seeded, so that the test's short profile of 8 timed calls has a lazy one: the 6th.)
import random

_RNG = random.Random(6)
_CALLS = [0]
_LAST = [None]

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, out_ptr, hidden, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * hidden
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, hidden, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < hidden
        x = tl.load(x_ptr + base + offs, mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    inv_rms = tl.rsqrt(tl.sum(acc, axis=0) / hidden + eps)
    for start in range(0, hidden, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < hidden
        x = tl.load(x_ptr + base + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + base + offs, (x * inv_rms * w).to(out_ptr.dtype.element_ty), mask=mask)


def _launch(hidden_states, weight, output):
    _rmsnorm_kernel[(hidden_states.shape[0],)](hidden_states, weight, output, hidden_states.shape[1], 1e-6,
                                               BLOCK=1024, num_warps=4)


def run(hidden_states, weight, output):
    _CALLS[0] += 1
    if _CALLS[0] > 5 and _LAST[0] is not None and _RNG.random() < 0.15:
        output.copy_(_LAST[0])
        return
    _launch(hidden_states, weight, output)
    _LAST[0] = output.clone()
