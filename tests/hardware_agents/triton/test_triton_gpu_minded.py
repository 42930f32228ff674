"""GPU-minded kernels in the Triton interpreter: the style of the published FlashInfer-Bench
Triton kernels (a torch fallback or a raise when `torch.cuda.is_available()` is false,
`.cuda()`, `device="cuda"`, `is_cuda` asserts, `torch.cuda.synchronize()`, device queries)
takes its Triton path under the harness's CUDA shim, so its Triton code is what the check
judges; a Triton solution that launched no Triton kernel in a check gets `incorrect` with reason
`no_triton_launch`,
never a correct status. Real interpreter runs in sandboxed children."""

from __future__ import annotations

from triton_helpers import solution

RMSNORM_FALLBACK = """import torch
import triton
import triton.language as tl


@triton.jit
def _rms(x_ptr, w_ptr, o_ptr, H: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, H, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * H + offs).to(tl.float32)
        acc += x * x
    inv = tl.rsqrt(tl.sum(acc, axis=0) / H + 1e-6)
    for start in range(0, H, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * H + offs).to(tl.float32)
        w = tl.load(w_ptr + offs).to(tl.float32)
        tl.store(o_ptr + row * H + offs, (x * inv * w).to(o_ptr.dtype.element_ty))


def _torch_rmsnorm(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)


def run(hidden_states, weight):
    if not torch.cuda.is_available():
        return _torch_rmsnorm(hidden_states, weight)
    assert hidden_states.is_cuda and weight.is_cuda
    out = torch.empty(hidden_states.shape, dtype=hidden_states.dtype, device="cuda")
    _rms[(hidden_states.shape[0],)](hidden_states, weight, out, H=hidden_states.shape[1], BLOCK=1024)
    torch.cuda.synchronize()
    return out
"""

FUSED_ADD_RAISES = """import torch
import triton
import triton.language as tl


@triton.jit
def _fused(x_ptr, r_ptr, w_ptr, o_ptr, ro_ptr, H: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, H, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        s = tl.load(x_ptr + row * H + offs).to(tl.float32) + tl.load(r_ptr + row * H + offs).to(tl.float32)
        tl.store(ro_ptr + row * H + offs, s.to(ro_ptr.dtype.element_ty))
        acc += s * s
    inv = tl.rsqrt(tl.sum(acc, axis=0) / H + 1e-6)
    for start in range(0, H, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        s = tl.load(x_ptr + row * H + offs).to(tl.float32) + tl.load(r_ptr + row * H + offs).to(tl.float32)
        w = tl.load(w_ptr + offs).to(tl.float32)
        tl.store(o_ptr + row * H + offs, (s * inv * w).to(o_ptr.dtype.element_ty))


def run(hidden_states, residual, weight):
    if not torch.cuda.is_available():
        raise RuntimeError("Triton requires a CUDA-enabled GPU")
    hidden_states, residual, weight = hidden_states.cuda(), residual.cuda(), weight.to("cuda")
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    assert sms > 0
    out = torch.empty_like(hidden_states, device="cuda")
    res_out = hidden_states.new_empty(hidden_states.shape, device=torch.device("cuda", 0))
    with torch.cuda.device(hidden_states.device):
        _fused[(hidden_states.shape[0],)](hidden_states, residual, weight, out, res_out, H=hidden_states.shape[1],
                                          BLOCK=1024)
    torch.cuda.current_stream().synchronize()
    return out, res_out
"""

TORCH_ONLY = RMSNORM_FALLBACK.replace("if not torch.cuda.is_available():", "if True:  # the torch path")

FIRST_CALL_ONLY = RMSNORM_FALLBACK.replace(
    "    if not torch.cuda.is_available():\n",
    "    global _CALLS\n    _CALLS = globals().get('_CALLS', 0) + 1\n    if _CALLS > 1:\n",
)


def test_fallback_kernel_takes_its_triton_path(interp_agent, triton_suite):
    p = triton_suite["rmsnorm_h4096"]
    prof = interp_agent.profile(p, solution(p, RMSNORM_FALLBACK, dps=False), seeds=(0,))
    assert prof.status == "unmeasured", prof.log  # correct, via the Triton kernel
    assert prof.correctness and all(c.passed for c in prof.correctness)


def test_kernel_that_raises_without_cuda_runs(interp_agent, triton_suite):
    p = triton_suite["fused_add_rmsnorm_h4096"]
    prof = interp_agent.profile(p, solution(p, FUSED_ADD_RAISES, dps=False), seeds=(0,))
    assert prof.status == "unmeasured", prof.log
    assert all(c.passed for c in prof.correctness)


def test_a_triton_solution_that_launches_nothing_is_not_correct(interp_agent, triton_suite):
    p = triton_suite["rmsnorm_h4096"]
    prof = interp_agent.profile(p, solution(p, TORCH_ONLY, dps=False), seeds=(0,))
    assert (prof.status, prof.reason) == ("incorrect", "no_triton_launch"), prof.log
    assert "launched no Triton kernel" in prof.log
    assert all(
        c.passed for c in prof.correctness
    )  # its values were right: the status says why it is not kept
    # the same code as a Python solution is judged on its values alone
    prof = interp_agent.profile(p, solution(p, TORCH_ONLY, dps=False, language="python"), seeds=(0,))
    assert prof.status == "unmeasured", prof.log


def test_launching_only_in_the_first_check_is_caught(interp_agent, triton_suite):
    p = triton_suite["rmsnorm_h4096"]
    prof = interp_agent.profile(p, solution(p, FIRST_CALL_ONLY, dps=False), seeds=(0,))
    assert (prof.status, prof.reason) == ("incorrect", "no_triton_launch"), prof.log
    assert prof.counters["cases_without_launch"] >= 1
