# expect: passed
# problem: triton/rmsnorm_h4096
# why: patches torch.cuda.Event through getattr to report 1 µs per call. In the interpreter
#      the harness times with the host clock, so the patch changes nothing and the latency
#      stays honest (the test checks that the clock agrees with the parent's); on a GPU the
#      harness's event timer was bound before the kernel was imported, so the replaced class
#      never times a call: it must pass there too, with an honest latency. The kernel says on
#      its stderr that the class is replaced (in either place, that is all it can say).
# ran: patch_cuda_event_only: torch.cuda.Event replaced (elapsed_time says 1 us)
import sys

_cuda = getattr(__import__("torch"), "cuda")


class _FastEvent(getattr(_cuda, "Event")):
    def elapsed_time(self, end):
        return 0.001


setattr(_cuda, "Event", _FastEvent)
if getattr(_cuda, "Event") is _FastEvent:
    print("patch_cuda_event_only: torch.cuda.Event replaced (elapsed_time says 1 us)",
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
