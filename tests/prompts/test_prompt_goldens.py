"""Every role's rendered prompt for one problem per language, compared with the files in
tests/prompts/golden/, so every prompt change shows up as a reviewed diff. Regenerate after
an intended change with `ACCELOPT_UPDATE_GOLDENS=1 pytest tests/prompts` and review the diff."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from prompt_samples import SAMPLES, as_text, problem_for, render_all

from prompts import ROLES

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("ACCELOPT_UPDATE_GOLDENS") == "1"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    out = {}
    for key, *_ in SAMPLES:
        problem = problem_for(key, tmp_path_factory.mktemp(key))
        out[key] = {role: as_text(msgs) for role, msgs in render_all(key, problem).items()}
    return out


@pytest.mark.parametrize("key", [s[0] for s in SAMPLES])
@pytest.mark.parametrize("role", ROLES)
def test_prompt_matches_its_golden(rendered, key, role):
    path = GOLDEN / f"{key}.{role}.txt"
    text = rendered[key][role]
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"{path} is missing: run with ACCELOPT_UPDATE_GOLDENS=1 to write it"
    assert text == path.read_text(), (
        f"the {role} prompt for {key} changed; if intended, regenerate with "
        "ACCELOPT_UPDATE_GOLDENS=1 and review the diff of tests/prompts/golden/"
    )


def test_no_golden_is_stale():
    expected = {f"{key}.{role}.txt" for key, *_ in SAMPLES for role in ROLES}
    assert {p.name for p in GOLDEN.glob("*.txt")} == expected


def test_the_prompts_carry_what_a_strong_model_needs(rendered):
    nki_exec = rendered["nkibench"]["executor"]
    for fact in (
        "nisa.nc_matmul(stationary, moving, is_stationary_onezero=False, is_moving_onezero=False, "
        "mask=None, is_transpose=False)",
        "Basic and advanced indexing",
        "shadowing",
        "import neuronxcc.nki.isa as nisa",
        "nothing is injected",
        "nl.store(dst[...], value=tile)",
    ):
        assert fact in nki_exec, fact
    assert "filled with NaN" not in rendered["nkibench"]["planner"]  # NKI outputs cannot be poisoned
    assert "filled with NaN" in rendered["cpu"]["planner"]
    triton = rendered["triton"]["executor"]
    for fact in (
        "tl.make_tensor_descriptor",
        "triton.set_allocator",
        "no `mask`",
        "loop_unroll_factor",
        "flatten=True",
        "warp_specialize=True",
        "@triton.autotune(",
    ):
        assert fact in triton, fact
    assert "suggest `@triton.autotune`" in rendered["triton"]["planner"]
