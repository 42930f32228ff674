# expect: runtime_error
# problem: triton/rmsnorm_h4096
# needle: not a regular file
# why: the agent reads the harness's correctness report (out/correctness.msgpack) while the
#      child is held stopped before timing round 0. This kernel patches pathlib so that the
#      harness makes a FIFO there instead of writing the report: opening a FIFO to read
#      blocks until a writer opens it, and the only writer is stopped, so an agent that
#      opened it would wait forever, holding the device. It must refuse a file that is not a
#      regular one, at once.
import os
import pathlib

import triton
import triton.language as tl

_write_bytes = pathlib.Path.write_bytes


def _fifo_instead(self, data):
    if self.name == "correctness.msgpack":
        os.mkfifo(self)
        return len(data)
    return _write_bytes(self, data)


pathlib.Path.write_bytes = _fifo_instead


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
    _rmsnorm_kernel[(hidden_states.shape[0],)](
        hidden_states, weight, output, hidden_states.shape[1], 1e-6, BLOCK=1024, num_warps=4
    )


def run(hidden_states, weight, output):
    _launch(hidden_states, weight, output)
