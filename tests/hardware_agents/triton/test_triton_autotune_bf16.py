"""Two things the Triton interpreter cannot show by itself, decided instead of guessed:

- `@triton.autotune`: the interpreter has no GPU to benchmark configs on, so it would only ever
  run one; every config group (configs that differ only in num_warps/num_stages run the same
  code there) is checked, and the wrong ones are named, whether the wrong one is first or not;
- bf16 tile arithmetic, which the interpreter computes on raw 16-bit patterns: an `incorrect`
  bf16 kernel is run again with bf16 tiles held in fp32 (`bf16_upcast`); if that passes, the
  failure was the interpreter's (the kernel is correct, and the log says so), else it is the
  kernel's own and the log says that."""

from __future__ import annotations

import numpy as np
import pytest
from triton_helpers import failing, solution

from hardware_agents.triton.bf16_upcast import from_bf16_bits, round_to_bf16, to_bf16_bits

RMSNORM = "rmsnorm_h4096"

AUTOTUNED = """import torch
import triton
import triton.language as tl


@triton.autotune(configs=[CONFIGS], key=["hidden"])
@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, out_ptr, hidden, eps, BLOCK: tl.constexpr, HALF: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * hidden
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, hidden, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + offs, mask=offs < hidden, other=0.0).to(tl.float32)
        acc += x * x
    inv_rms = tl.rsqrt(tl.sum(acc, axis=0) / hidden + eps)
    n_store = hidden
    if HALF:  # the bug of one config: only the first half of the row is written
        n_store = hidden // 2
    for start in range(0, hidden, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + offs, mask=offs < hidden, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=offs < hidden, other=0.0).to(tl.float32)
        tl.store(out_ptr + base + offs, (x * inv_rms * w).to(tl.bfloat16), mask=offs < n_store)


def run(hidden_states, weight, output):
    batch_size, hidden_size = hidden_states.shape
    _rmsnorm_kernel[(batch_size,)](hidden_states, weight, output, hidden_size, 1e-6)
"""
GOOD = 'triton.Config({"BLOCK": 1024, "HALF": False}, num_warps=4)'
GOOD_8 = 'triton.Config({"BLOCK": 1024, "HALF": False}, num_warps=8)'  # the same code in the interpreter
GOOD_2K = 'triton.Config({"BLOCK": 2048, "HALF": False}, num_warps=4)'
BAD = 'triton.Config({"BLOCK": 2048, "HALF": True}, num_warps=4)'


def _autotuned(*configs: str) -> str:
    return AUTOTUNED.replace("CONFIGS", ", ".join(configs))


def test_a_wrong_config_after_the_first_is_found_and_named(interp_agent, triton_suite):
    p = triton_suite[RMSNORM]
    prof = interp_agent.profile(p, solution(p, _autotuned(GOOD, GOOD_8, BAD)), seeds=(0,))
    assert prof.status == "incorrect", prof.log
    assert failing(prof) and all(c.endswith("@config-group1") for c in failing(prof)), failing(prof)
    log = " ".join(prof.log.split())
    assert (
        "the checks above ran _rmsnorm_kernel: configs[0] BLOCK=1024, HALF=False (launch: num_warps=4" in log
    )
    assert "(and 1 config(s) differing only in num_warps/num_stages)" in log
    assert (
        "then _rmsnorm_kernel: configs[2] BLOCK=2048, HALF=True (launch: num_warps=4" in log
        and "wrong at" in log
    )
    assert "on a GPU the tuner may pick any of these configs" in log


def test_a_wrong_first_config_is_named_and_the_others_judged(interp_agent, triton_suite):
    p = triton_suite[RMSNORM]
    prof = interp_agent.profile(p, solution(p, _autotuned(BAD, GOOD)), seeds=(0,))
    assert prof.status == "incorrect", prof.log
    log = " ".join(prof.log.split())
    assert "the checks above ran _rmsnorm_kernel: configs[0] BLOCK=2048, HALF=True" in log
    assert (
        "then _rmsnorm_kernel: configs[1] BLOCK=1024, HALF=False "
        "(launch: num_warps=4, num_stages=3, num_ctas=1): correct" in log
    )


def test_every_config_correct_is_correct(interp_agent, triton_suite):
    p = triton_suite[RMSNORM]
    prof = interp_agent.profile(p, solution(p, _autotuned(GOOD, GOOD_2K)), seeds=(0,))
    assert prof.status == "unmeasured", prof.log
    assert "then _rmsnorm_kernel: configs[1] BLOCK=2048, HALF=False" in prof.log and ": correct" in prof.log


# rmsnorm with its products on bf16 tiles (x * w before the upcast): right on a GPU, garbage in the
# interpreter's own bf16 arithmetic
BF16_ARITHMETIC = """import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, out_ptr, hidden, eps, BLOCK: tl.constexpr):
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
        x = tl.load(x_ptr + base + offs, mask=offs < hidden, other=0.0)
        w = tl.load(w_ptr + offs, mask=offs < hidden, other=0.0)
        xw = x * w
        tl.store(out_ptr + base + offs, (xw.to(tl.float32) * inv_rms).to(tl.bfloat16), mask=offs < hidden)


def run(hidden_states, weight, output):
    batch_size, hidden_size = hidden_states.shape
    _rmsnorm_kernel[(batch_size,)](hidden_states, weight, output, hidden_size, 1e-6, BLOCK=1024)
"""


def test_a_failure_of_the_interpreters_bf16_arithmetic_is_decided_so(interp_agent, triton_suite):
    p = triton_suite[RMSNORM]
    prof = interp_agent.profile(p, solution(p, BF16_ARITHMETIC), seeds=(0,))
    assert prof.status == "unmeasured", prof.log
    assert prof.counters.get("bf16_upcast") == 1.0
    log = " ".join(prof.log.split())
    assert "correct with bf16 tiles computed in fp32" in log and "the failure was the interpreter's" in log


def test_a_kernels_own_error_is_not_blamed_on_the_interpreter(interp_agent, triton_suite):
    p = triton_suite[RMSNORM]
    no_weight = BF16_ARITHMETIC.replace("xw = x * w", "xw = x + 0.0 * w")  # forgets the weight
    prof = interp_agent.profile(p, solution(p, no_weight.replace("x + 0.0 * w", "x")), seeds=(0,))
    assert prof.status == "incorrect", prof.log
    log = " ".join(prof.log.split())
    assert (
        "fail too (incorrect), so this is the kernel's own error, not the interpreter's bf16 arithmetic"
        in log
    )
    assert "bf16 arithmetic is unreliable" not in log  # the old guess is gone


@pytest.mark.parametrize("value", [0.0, -0.0, 1.0, -2.5, 3.1415926, 1e-30, 6.5e4, 3e38, float("inf")])
def test_bf16_rounding_matches_torch(value):
    import torch

    x = np.array([value, np.nextafter(np.float32(value), np.float32(np.inf))], dtype=np.float32)
    want = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert (to_bf16_bits(x) == want).all()
    assert (from_bf16_bits(want) == round_to_bf16(x)).all()
    assert np.isnan(round_to_bf16(np.array([np.nan], dtype=np.float32))).all()
