# expect: timing_mismatch
# problem: triton/rmsnorm_h4096
# needle: was asked for
# why: slows the host clock 50x (as patch_all_timers) and, from inside its calls, walks up
#      the stack to the harness's result and rewrites the timer it reports to "do_bench",
#      whose own loop has no per-call record to check: a parent that believed the child's
#      report would skip the clock check (and the checks of the timed outputs).
_t = __import__("ti" + "me")
_real = getattr(_t, "perf_counter_ns")
_start = _real()
setattr(_t, "perf_counter_ns", lambda: _start + (_real() - _start) // 50)
_realf = getattr(_t, "perf_counter")
_startf = _realf()
setattr(_t, "perf_counter", lambda: _startf + (_realf() - _startf) / 50)

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


def _claim_do_bench():
    """Walks up to the harness's timing loop and rewrites the timer its result reports."""
    import sys as _sys

    frame = _sys._getframe(1)
    while frame is not None:
        result = frame.f_locals.get("result")
        if result is not None and hasattr(result, "timer"):
            try:
                result.timer = "do_bench"
            except Exception:
                pass
        frame = frame.f_back


def run(hidden_states, weight, output):
    _claim_do_bench()
    _launch(hidden_states, weight, output)
