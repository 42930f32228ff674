"""`device_compare` (the correctness rule as torch operations, for a judge that compares where
the outputs are) held to `compare.compare_outputs` on CPU tensors: the same verdict, relative
L2 error, largest errors, count of elements outside the bar and notes, over output dtypes,
tolerances, errors of every size, non-finite values, the float32 floor and chunk edges."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from accelopt.problem import Tolerance
from accelopt.profile import SeedCheck
from hardware_agents.pipeline import compare, fp32
from hardware_agents.triton import device_compare
from hardware_agents.triton.device_compare import Floor, RefNorm, check_on_device, compare_on_device

TOLS = (Tolerance(), Tolerance(rel_l2=1e-2, atol=1e-2, rtol=1e-2))


def _case(dtype: torch.dtype, noise: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    ref = (torch.randn(4097, generator=gen, dtype=torch.float64) * 3).to(dtype).to(torch.float64)
    got = (ref * (1 + noise * torch.randn(4097, generator=gen, dtype=torch.float64))).to(dtype)
    return got, ref


def _numpy(got: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> tuple[SeedCheck, int]:
    chk = compare.compare_outputs("c", {"o": got.to(torch.float64).numpy()}, {"o": ref.numpy()}, tol)
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


def _both(
    got: torch.Tensor, ref: torch.Tensor, tol: Tolerance, floor: fp32.Fp32Floor | None
) -> tuple[SeedCheck, SeedCheck]:
    """The numpy rule (with the problem's `RefStats`, as the judge keeps them) and the device
    rule (with the same statistics as `RefNorm`, the reference in the output dtype)."""
    r64 = ref.numpy()
    st = compare.RefStats(r64, tol)
    host = compare.compare_outputs(
        "c",
        {"o": got.to(torch.float64).numpy()},
        {"o": r64},
        tol,
        stats={"o": st},
        floor={"o": floor} if floor else None,
    )
    dev = check_on_device(
        "c",
        {"o": got},
        {"o": ref.to(got.dtype) if got.is_floating_point() else ref},
        tol,
        stats={"o": RefNorm(norm=st.norm, rms=st.rms, atol=st.atol, finite=st.finite)},
        floor={"o": Floor(rows=torch.from_numpy(np.asarray(floor.rows)), rel_l2=floor.rel_l2)}
        if floor
        else None,
    )
    return host, dev


def _same(host: SeedCheck, dev: SeedCheck) -> None:
    assert dev.passed == host.passed and dev.note == host.note
    assert dev.max_abs_err == host.max_abs_err and dev.max_rel_err == host.max_rel_err
    if host.rel_l2 is None:
        assert dev.rel_l2 is None
    else:
        assert dev.rel_l2 == pytest.approx(host.rel_l2, rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("nonfinite", [False, True])
def test_the_float32_floor_widens_the_bar_as_on_the_host(
    dtype: torch.dtype, nonfinite: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the floor, each element's bar grows by 4x float32's error in its row and the
    relative L2 bar by 4x float32's: the same count, verdict and note (chunk edges inside rows)."""
    monkeypatch.setattr(device_compare, "CHUNK", 100)  # chunks that cut rows
    gen = torch.Generator().manual_seed(3)
    ref = (torch.randn(24, 37, generator=gen, dtype=torch.float64) * 5).to(dtype).to(torch.float64)
    got = (ref * (1 + 3e-2 * torch.randn(24, 37, generator=gen, dtype=torch.float64))).to(dtype)
    if nonfinite:  # an infinity where the reference has the same: compared on the finite rest
        ref[4, 5] = float("inf")
        got[4, 5] = float("inf")
    rows = (torch.rand(24, generator=gen) * 0.2).numpy().astype(np.float32)
    rows[::3] = 0.0  # rows float32 resolves exactly: the plain bar there
    floor = fp32.Fp32Floor(rows=rows, rel_l2=0.02)
    tol = Tolerance(rel_l2=1e-2, atol=1e-2, rtol=1e-2)
    plain_host, plain_dev = _both(got, ref, tol, None)
    host, dev = _both(got, ref, tol, floor)
    _same(plain_host, plain_dev)
    _same(host, dev)
    assert not plain_host.passed and "4x float32's own error" in host.note
    fewer = int(host.note.split(" of ")[0].split()[-1])
    assert fewer < int(plain_host.note.split(" of ")[0].split()[-1])  # the floor forgave some


@pytest.mark.parametrize("chunk", [7, 1 << 15])
def test_notes_and_figures_match_across_chunks(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first index outside, the largest relative error and the notes do not depend on
    where the chunks fall."""
    monkeypatch.setattr(device_compare, "CHUNK", chunk)
    got, ref = _case(torch.float16, 3e-2, seed=11)
    got[2000] = got[2000] * 3 + 2
    for tol in TOLS:
        _same(*_both(got, ref, tol, None))


def test_non_finite_outputs_give_the_hosts_words() -> None:
    got, ref = _case(torch.bfloat16, 0.0, seed=5)
    got[9] = float("nan")
    got[10] = float("inf")
    host, dev = _both(got, ref, Tolerance(), None)
    _same(host, dev)
    assert "2 non-finite values where the reference is finite (1 NaN" in dev.note


def test_integer_outputs() -> None:
    ref = torch.arange(-50, 50, dtype=torch.float64)
    got = torch.arange(-50, 50, dtype=torch.int32)
    got[17] += 3
    _same(*_both(got, ref, Tolerance(), None))
