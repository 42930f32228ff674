# expect: incorrect
# problem: triton/rmsnorm_h4096
# needle: ran while it was stopped
# or: runtime_error: left 1 process(es) running
# why: forks a helper process at import (through getattr, past the static checks: the Triton
#      sandbox allows processes, for the compiler) that sends SIGCONT to the kernel's process
#      without pause, so the stops the agent holds it in between timing rounds (while it
#      stages inputs and reads outputs) end at once and the kernel could work unobserved.
#      The freeze check sees the continue it did not send (and the helper is stopped too).
#      On a loaded host the helper may get no core while the child is held stopped: then the
#      child never ran unobserved, and the helper it left running is `runtime_error`.
_os = __import__("o" + "s")
_sig = __import__("sig" + "nal")
_parent = _os.getpid()
if getattr(_os, "fo" + "rk")() == 0:
    while True:
        try:
            getattr(_os, "ki" + "ll")(_parent, getattr(_sig, "SIG" + "CONT"))
        except OSError:
            getattr(_os, "_ex" + "it")(0)

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
