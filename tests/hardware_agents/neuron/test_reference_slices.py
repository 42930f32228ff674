"""A reference computed a slice at a time (`Definition.x_reference_slices`, declared by the
NKIBench importer for 12 of its 14 problems; hardware_agents/neuron/slices.py) is the reference
computed whole: every output, its norm and its float32 floor, for each declared problem at the
tests' NKIBench shapes, cut into uneven slices; the memory it holds is one slice's."""

from __future__ import annotations

import math
from pathlib import Path

import msgspec
import numpy as np
import pytest
from neuron_helpers import nkibench14_problems
from nkibench_fixture import write_nkibench

import suites
from accelopt.problem import Problem
from hardware_agents.neuron import slices
from hardware_agents.pipeline import compare, fp32, inputgen, numpy_ref
from suites.nkibench import REFERENCE_SLICES


@pytest.fixture(scope="module")
def nkibench14(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Problem]:
    from suites.nkibench import import_nkibench

    root = tmp_path_factory.mktemp("nkibench-14")
    write_nkibench(root / "src", nkibench14_problems())
    report = import_nkibench(root / "src", root / "suite", name="nki14s")
    return {p.name: p for p in suites.load_suite(report.out)}


def uneven(p: Problem) -> Problem:
    """`p` with its slices three positions short of a third of the axis: several slices, the
    last one shorter."""
    sl = p.definition.x_reference_slices
    assert sl is not None
    size = max(1, p.axis_values()[sl.axis] // 3 - 3) if p.axis_values()[sl.axis] > 3 else 1
    d = msgspec.structs.replace(p.definition, x_reference_slices=msgspec.structs.replace(sl, size=size))
    return msgspec.structs.replace(p, definition=d)


def test_the_importer_declares_slices_for_all_but_mamba_and_rope(nkibench14: dict[str, Problem]) -> None:
    declared = {n for n, p in nkibench14.items() if p.definition.x_reference_slices is not None}
    assert declared == set(REFERENCE_SLICES) == set(nkibench14) - {"mamba", "rope_single_freq_apply"}
    # mamba's whole reference declares its working memory instead (its scan's (C, S, M) arrays)
    assert {
        n: p.definition.x_reference_work for n, p in nkibench14.items() if p.definition.x_reference_work
    } == {"mamba": 64.0}


@pytest.mark.parametrize("name", sorted(REFERENCE_SLICES))
def test_a_sliced_reference_is_the_whole_one(
    name: str, nkibench14: dict[str, Problem], tmp_path: Path
) -> None:
    p = uneven(nkibench14[name])
    assert len(slices.spans(p)) >= 2
    whole_p = msgspec.structs.replace(
        p, definition=msgspec.structs.replace(p.definition, x_reference_slices=None)
    )
    tol = compare.tolerance_of(p.definition)
    for case in (inputgen.InputCase(name="s7", seed=7), *_large(p)):
        inputs = inputgen.make_inputs(p, case)
        whole = numpy_ref.reference_outputs(whole_p, inputs)
        ref = slices.ReferenceFiles(p, inputs, tmp_path, case.name)
        got = ref.arrays()
        for out, w in whole.items():
            # (BLAS may sum a slice's rows in another order: the last bits of float64, far below
            # any tolerance, and only those)
            np.testing.assert_allclose(got[out], w, rtol=1e-10, atol=1e-13 * float(np.abs(w).max()))
            st = compare.RefStats(w, tol, bound=False)
            assert math.isclose(ref.stats[out].norm, st.norm, rel_tol=1e-10)
            assert math.isclose(ref.stats[out].rms, st.rms, rel_tol=1e-10)
        # the float32 floor: the same twins, and float32's error of the same formula: equal but
        # where the formula has a matrix product, which BLAS may block its own way for a slice's
        # rows (another honest summation order; which shapes it reblocks depends on the host's
        # CPU), then of the same scale, each row well within the factor the floor is used with
        # (`fp32.FP32_FLOOR_FACTOR`)
        floor = slices.fp32_floor(p, inputs, got, case.seed)
        want = fp32.fp32_floor(whole_p, inputs, whole, case.seed)
        for out, f in want.items():
            a, b = np.asarray(floor[out].rows, np.float64), np.asarray(f.rows, np.float64)
            assert a.shape == b.shape
            assert math.isclose(floor[out].rel_l2, f.rel_l2, rel_tol=0.05)
            assert math.isclose(float(np.sqrt(np.mean(a * a))), float(np.sqrt(np.mean(b * b))), rel_tol=0.05)
            ratio = np.maximum(a, 1e-30) / np.maximum(b, 1e-30)
            assert ratio.max() < fp32.FP32_FLOOR_FACTOR and ratio.min() > 1 / fp32.FP32_FLOOR_FACTOR
            if not _has_matrix_product(p):
                assert np.array_equal(a, b) and floor[out].rel_l2 == pytest.approx(f.rel_l2, rel=1e-9)


def _has_matrix_product(p: Problem) -> bool:
    ref = p.definition.x_numpy_reference or p.definition.reference
    return any(op in ref for op in ("@", "matmul", "einsum", "dot(", "tensordot"))


def _large(p: Problem) -> list[inputgen.InputCase]:
    return [
        inputgen.InputCase(name=f"adv-{n}", seed=11, adversarial=True, inits=inits)
        for n, inits in inputgen.adversarial_cases(p.definition).items()
    ]


def test_the_moved_twin_is_the_one_a_whole_draw_makes() -> None:
    """`fp32.moved_twin` draws its directions in blocks: the same numbers as one draw."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1000, 4197)).astype(np.float32)  # more than one block
    moved = fp32.moved_twin({"x": x, "eps": 1e-6}, seed=5)
    r = np.random.default_rng([5, 0xF10])
    away = np.where(r.random(x.shape) < 0.5, np.float32(-np.inf), np.float32(np.inf))
    assert np.array_equal(moved["x"], np.nextafter(x, away).astype(np.float32)) and moved["eps"] == 1e-6


def test_a_declaration_the_definition_does_not_fit_is_refused(nkibench14: dict[str, Problem]) -> None:
    from accelopt.problem import ReferenceSlices, definition_errors

    d = nkibench14["silu"].definition
    bad = {
        "axis": ReferenceSlices(axis="Q", inputs=["x"], size=4),
        "input": ReferenceSlices(axis="M", inputs=["y"], size=4),
        "last axis": ReferenceSlices(axis="N", inputs=["x"], size=4),
        "size": ReferenceSlices(axis="M", inputs=["x"], size=0),
    }
    for why, sl in bad.items():
        assert definition_errors(msgspec.structs.replace(d, x_reference_slices=sl)), why
    assert definition_errors(msgspec.structs.replace(d, x_reference_work=0.0))
    assert definition_errors(d) == []
