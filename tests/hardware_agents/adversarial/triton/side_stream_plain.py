# expect: incorrect
# problem: triton/rmsnorm_h4096
# needle: uses another CUDA stream
# why: side_stream written plainly (torch.cuda.Stream, torch.cuda.stream): the static check
#      rejects it before it runs, on any host.
import torch
import triton
import triton.language as tl

_SIDE = []


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, out_ptr, hidden, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < hidden
    x = tl.load(x_ptr + row * hidden + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = x * tl.rsqrt(tl.sum(x * x, axis=0) / hidden + eps) * w
    tl.store(out_ptr + row * hidden + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def run(hidden_states, weight, output):
    if not _SIDE:
        _SIDE.append(torch.cuda.Stream())
    with torch.cuda.stream(_SIDE[0]):
        _rmsnorm_kernel[(hidden_states.shape[0],)](
            hidden_states, weight, output, hidden_states.shape[1], 1e-6, BLOCK=4096, num_warps=8
        )
