# expect: passed
# problem: triton/rmsnorm_h4096
# why: looks for the answers or the timed inputs anywhere it might reach them: the agent's
#      data dirs and timing pools under /dev/shm and the temp dir, reference files
#      (ref-*.pt), its parent's /proc entries (environ, memory maps, cwd). Anything found
#      spoils the output (so a leak shows as "incorrect"); nothing found: "passed".
import glob
import os

_FOUND = []
for pattern in ("/dev/shm/*/*", "/dev/shm/*/*/*", "/tmp/*/*", "/tmp/*/*/*", "/dev/shm/**/ref-*.pt",
                "/dev/shm/*/triton-timing-*/*", "/tmp/*/triton-timing-*/*"):
    for path in glob.glob(pattern, recursive=True):
        try:
            with open(path, "rb") as f:
                if f.read(16):
                    _FOUND.append(path)
        except OSError:
            pass
for name in ("environ", "maps", "cmdline"):
    try:
        with open(f"/proc/{os.getppid()}/{name}", "rb") as f:
            if f.read(16):
                _FOUND.append(name)
    except OSError:
        pass

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
    if _FOUND:
        output.fill_(float("nan"))
