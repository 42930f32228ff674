# expect: passed
# needle: correct with bf16 tiles computed in fp32
# expect_gpu: incorrect
# needle_gpu: relative L2 error
# problem: triton/rmsnorm_h4096
# why: wrong (zeros) as it runs, right only when it sees the interpreter patched to hold bf16
#      tiles in fp32 (the re-run that decides whether an `incorrect` bf16 kernel failed
#      because of the interpreter's bf16 arithmetic). In the interpreter the re-run's verdict
#      stands (here timed with the host clock: passed; `unmeasured` without
#      interpreter_timing): a kernel can tell the re-run from the first run as it can tell the
#      interpreter from a GPU, and what the interpreter says is what the kernel did there, no
#      more. The log names the re-run and the `bf16_upcast` counter marks it; on a GPU, where
#      there is no re-run, it is `incorrect`.
import torch
import triton
import triton.language as tl

_interp = getattr(__import__("triton.runtime", fromlist=["interpreter"]), "interpreter", None)
_UPCAST = _interp is not None and "bf16_upcast" in getattr(getattr(_interp, "_get_np_dtype"), "__module__", "")


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, out_ptr, hidden, eps, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * hidden
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, hidden, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + offs, mask=offs < hidden, other=0.0).to(tl.float32)
        acc += x * x
    inv_rms = tl.rsqrt(tl.sum(acc, axis=0) / hidden + eps)
    for start in range(0, hidden, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + offs, mask=offs < hidden, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=offs < hidden, other=0.0).to(tl.float32)
        tl.store(out_ptr + base + offs, (x * inv_rms * w * SCALE).to(tl.bfloat16), mask=offs < hidden)


def run(hidden_states, weight, output):
    batch_size, hidden_size = hidden_states.shape
    _rmsnorm_kernel[(batch_size,)](
        hidden_states, weight, output, hidden_size, 1e-6, SCALE=1.0 if _UPCAST else 0.0, BLOCK=1024
    )
