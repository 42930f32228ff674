# expect: passed
# problem: triton/rmsnorm_h4096
# why: halves what torch.cuda.Event.elapsed_time reports (through getattr, past the static
#      checks): a 2x fake speedup on a GPU, where the parent's wall-clock bound cannot see it
#      for a kernel shorter than a call's untimed work (the GPU work overlaps it). The
#      harness's event timer holds the method as it was before the kernel was imported, so
#      the patch never reaches it: the kernel must pass with an honest latency, there and in
#      the interpreter (whose harness times with the host clock). The kernel says on its
#      stderr that the class is replaced (in either place, that is all it can say).
# ran: slow_cuda_events_2x: torch.cuda.Event replaced (elapsed_time halved)
import sys

_cuda = getattr(__import__("torch"), "cuda")
_Real = getattr(_cuda, "Event")


class _HalfEvent(_Real):
    def elapsed_time(self, end):
        return _Real.elapsed_time(self, end) / 2


setattr(_cuda, "Event", _HalfEvent)
if getattr(_cuda, "Event") is _HalfEvent:
    print("slow_cuda_events_2x: torch.cuda.Event replaced (elapsed_time halved)",
          file=sys.stderr, flush=True)

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
    _launch(hidden_states, weight, output)
