"""`device_compare.compare_on_device` (the correctness rule as torch operations, for a judge
that compares where the outputs are) held to `validity.compare_outputs` on CPU tensors: the
same verdict, relative L2 error, largest error and count of elements outside the bar, over
output dtypes, tolerances, errors of every size and non-finite values."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from accelopt.problem import Tolerance
from hardware_agents import validity
from hardware_agents.triton.device_compare import compare_on_device

TOLS = (Tolerance(), Tolerance(rel_l2=1e-2, atol=1e-2, rtol=1e-2))


def _case(dtype: torch.dtype, noise: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    ref = (torch.randn(4097, generator=gen, dtype=torch.float64) * 3).to(dtype).to(torch.float64)
    got = (ref * (1 + noise * torch.randn(4097, generator=gen, dtype=torch.float64))).to(dtype)
    return got, ref


def _numpy(got: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> tuple[validity.SeedCheck, int]:
    chk = validity.compare_outputs("c", {"o": got.to(torch.float64).numpy()}, {"o": ref.numpy()}, tol)
    m = re.search(r"(\d+) of \d+ elements outside", chk.note)
    return chk, int(m.group(1)) if m else 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("noise", [0.0, 1e-6, 1e-3, 3e-2])
@pytest.mark.parametrize("tol", TOLS)
def test_the_rule_on_the_device_is_the_numpy_rule(dtype: torch.dtype, noise: float, tol: Tolerance) -> None:
    got, ref = _case(dtype, noise, seed=int(noise * 1e6) + 7)
    if noise >= 1e-3:
        got[100] = got[100] * 1.5 + 1  # one element well off
    chk, outside = _numpy(got, ref, tol)
    dev = compare_on_device(got, ref, tol)
    assert dev.passed == chk.passed
    assert dev.outside == outside
    assert dev.rel_l2 == pytest.approx(chk.rel_l2, rel=1e-9, abs=1e-300)
    assert dev.max_abs == chk.max_abs_err


def test_non_finite_values() -> None:
    got, ref = _case(torch.float32, 0.0, seed=1)
    tol = Tolerance()
    nan = got.clone()
    nan[5] = float("nan")  # a NaN where the reference is finite: refused, counted
    dev, (chk, _) = compare_on_device(nan, ref, tol), _numpy(nan, ref, tol)
    assert not dev.passed and not chk.passed and dev.nonfinite == 1
    ref_inf, got_inf = ref.clone(), got.clone()
    ref_inf[7] = got_inf[7] = float("inf")  # the same infinity as the reference: compared on the rest
    dev, (chk, _) = compare_on_device(got_inf, ref_inf, tol), _numpy(got_inf, ref_inf, tol)
    assert dev.passed and chk.passed
    assert dev.rel_l2 == pytest.approx(chk.rel_l2, abs=1e-300)
    got_inf[7] = float("-inf")  # another one: refused
    assert not compare_on_device(got_inf, ref_inf, tol).passed
    assert not _numpy(got_inf, ref_inf, tol)[0].passed
    assert np.isinf(ref_inf.numpy()).sum() == 1
