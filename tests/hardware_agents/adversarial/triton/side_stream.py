# expect: passed
# expect_gpu: timing_mismatch
# needle_gpu: its clock was slowed or replaced
# problem: triton/rmsnorm_h4096
# why: launches its (honest) kernel on a CUDA stream of its own and returns without waiting:
#      the harness's events, recorded on its own stream around the call, time an empty
#      stretch, and the work finishes later, before the round's outputs are read. Its
#      outputs are right; only the time is a lie. On a GPU every call is followed by a
#      device-wide synchronisation, so the parent's clock of the round holds the work the
#      events missed: caught even on this shortest suite kernel. In the interpreter the
#      shim's Triton work is synchronous, so the kernel must pass with an honest latency. It
#      reaches the stream API through getattr, past the static check that rejects
#      `cuda.Stream` (side_stream_plain). The kernel says on its stderr that its launch ran
#      with its own stream current (on a GPU, the trick in place; in the interpreter, a
#      timeline of the simulated device, whose Triton work is synchronous all the same).
# ran: side_stream: launched its kernel with a stream of its own current
import sys

import torch
import triton
import triton.language as tl

_SIDE = []
_SAID = []
_CUDA = getattr(torch, "cu" + "da")


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


def run(hidden_states, weight, output):
    if not _SIDE:
        _SIDE.append(getattr(_CUDA, "Str" + "eam")())
    side = _SIDE[0]
    side.wait_stream(_CUDA.current_stream())  # its inputs are ready; nothing waits for it after
    with getattr(_CUDA, "str" + "eam")(side):
        _rmsnorm_kernel[(hidden_states.shape[0],)](
            hidden_states, weight, output, hidden_states.shape[1], 1e-6, BLOCK=1024, num_warps=4
        )
        ours = _CUDA.current_stream().cuda_stream == side.cuda_stream  # the launch's stream
    if ours and not _SAID and _CUDA.current_stream().cuda_stream != side.cuda_stream:  # not the harness's
        _SAID.append(True)
        print("side_stream: launched its kernel with a stream of its own current", file=sys.stderr, flush=True)
