# expect: passed
# problem: triton/rmsnorm_h4096
# why: at import, reaches the timers through __import__/getattr (no "import time" a static
#      check could see) and slows every clock the harness could use: time.perf_counter(_ns)
#      by 50x, torch.cuda.Event.elapsed_time (a GPU's) and triton.testing.do_bench; then
#      computes honestly, so only the clock lies. The harness's timers were bound before the
#      import (torch's C functions on a GPU; the simulated device's clock, taken at its
#      import, in the interpreter), so the replaced functions never time a call: it must
#      pass with an honest latency. The kernel says on its stderr that the patches are in
#      place (each replaced attribute is its own): in the interpreter as on a GPU, that is
#      all it can say; that no timer of the harness read them is the latency's check.
# ran: patch_all_timers: time.perf_counter(_ns), torch.cuda.Event and triton.testing.do_bench replaced
import sys

_t = __import__("ti" + "me")
_real = getattr(_t, "perf_counter_ns")
_start = _real()
setattr(_t, "perf_counter_ns", lambda: _start + (_real() - _start) // 50)
_realf = getattr(_t, "perf_counter")
_startf = _realf()
setattr(_t, "perf_counter", lambda: _startf + (_realf() - _startf) / 50)
_cuda = getattr(__import__("torch"), "cuda")
_Event = getattr(_cuda, "Event")


class _SlowEvent(_Event):
    def elapsed_time(self, end):
        return super().elapsed_time(end) / 50


setattr(_cuda, "Event", _SlowEvent)
_testing = __import__("triton.testing", fromlist=["do_bench"])
_do_bench = getattr(_testing, "do_bench")
setattr(_testing, "do_bench", lambda *a, **k: [x / 50 for x in _do_bench(*a, **k)] if k.get("return_mode") == "all"
        else _do_bench(*a, **k) / 50)
if (getattr(_t, "perf_counter_ns") is not _real and getattr(_t, "perf_counter") is not _realf
        and getattr(_cuda, "Event") is _SlowEvent and getattr(_testing, "do_bench") is not _do_bench):
    print("patch_all_timers: time.perf_counter(_ns), torch.cuda.Event and triton.testing.do_bench replaced",
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
