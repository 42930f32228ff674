# expect: incorrect
# problem: triton/rmsnorm_h4096
# why: after the correctness checks, computes only the first row and copies it to the
#      others (same shapes, finite values): the full check of each round's last output
#      against the reference catches it.
_CALLS = [0]

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
    if _CALLS[0] <= 5:
        _launch(hidden_states, weight, output)
        return
    _launch(hidden_states[:1], weight, output[:1])
    output[1:].copy_(output[:1].expand_as(output[1:]))
