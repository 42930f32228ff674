"""The validity layer: deterministic fresh inputs, adversarial cases, comparison, statistics."""

from __future__ import annotations

import math

import numpy as np
import pytest

import suites
from accelopt.problem import Tolerance
from hardware_agents.pipeline import buffers, compare, fp32, inputgen, numpy_ref


def test_inputs_are_deterministic_per_seed_and_fresh_across_seeds() -> None:
    p = suites.get_problem("cpu/lora")
    a, b, c = (inputgen.make_inputs(p, inputgen.InputCase(name="s", seed=s)) for s in (0, 0, 1))
    for name in a:
        assert np.array_equal(a[name], b[name])
        assert not np.array_equal(a[name], c[name])
    assert len({a[n].tobytes()[:64] for n in a}) == len(a)  # inputs differ from each other too


def test_default_adversarial_case_is_large_magnitude() -> None:
    p = suites.get_problem("cpu/bmm_softmax")
    cases = inputgen.input_cases(p.definition, (0, 21, 42))
    assert [c.name for c in cases] == ["seed0", "seed21", "seed42", "large"]
    large = inputgen.make_inputs(p, cases[-1])
    assert 500 < float(np.std(large["lhs"])) < 2000
    # a softmax without max subtraction overflows on it; the reference does not
    logits = np.matmul(large["lhs"].astype(np.float64), large["rhs"])
    with np.errstate(over="ignore", invalid="ignore"):
        naive = np.exp(logits) / np.exp(logits).sum(axis=2, keepdims=True)
    assert not np.all(np.isfinite(naive))
    assert np.all(np.isfinite(numpy_ref.reference_outputs(p, large)["out"]))


def test_fresh_seeds_also_change_the_adversarial_inputs() -> None:
    p = suites.get_problem("cpu/silu")
    a = inputgen.input_cases(p.definition, (0, 1, 2))[-1]
    b = inputgen.input_cases(p.definition, (100, 101, 102))[-1]
    assert a.seed != b.seed


def test_per_problem_overrides_apply() -> None:
    p = suites.get_problem("cpu/mamba")
    cases = {c.name: c for c in inputgen.input_cases(p.definition, (0,))}
    assert set(cases) == {"seed0", "large", "long_memory"}
    x = inputgen.make_inputs(p, cases["seed0"])
    assert 0.03 < float(np.std(x["delta"])) < 0.07  # x_input_init: normal(0, 0.05)
    lm = inputgen.make_inputs(p, cases["long_memory"])
    assert float(lm["a"].max()) <= 0 and float(lm["delta"].min()) >= 0
    adam = suites.get_problem("cpu/adamw")
    assert float(inputgen.make_inputs(adam, inputgen.InputCase(name="s", seed=3))["v"].min()) >= 0


@pytest.mark.parametrize(
    "expr", ["__import__('os')", "normal(0, 1).real", "open('x')", "normal(x=1)", "[1, 2]", "lambda: 1"]
)
def test_init_expressions_are_whitelisted(expr: str) -> None:
    with pytest.raises(ValueError):
        inputgen.generate(expr, (4,), "float32", np.random.default_rng(0))


def test_init_expression_language() -> None:
    rng = np.random.default_rng(0)
    x = inputgen.generate("-abs(normal(0, 2)) * 3 + 1", (1000,), "float32", rng)
    assert x.dtype == np.float32 and x.shape == (1000,) and float(x.max()) <= 1
    u = inputgen.generate("uniform(-1, 1)", (2, 3), "float32", rng)
    assert u.shape == (2, 3) and float(np.abs(u).max()) <= 1
    assert inputgen.generate("7", (3,), "float32", rng).tolist() == [7, 7, 7]


def test_poisoned_outputs_are_nan_and_aligned() -> None:
    p = suites.get_problem("cpu/matmul")
    outs = buffers.alloc_outputs(p)
    assert np.isnan(outs["out"]).all()
    assert outs["out"].ctypes.data % 64 == 0
    assert outs["out"].shape == (512, 512)


def test_compare_catches_each_failure_kind() -> None:
    tol = Tolerance()
    ref = np.random.default_rng(0).standard_normal((64, 64))
    good = ref.astype(np.float32)
    assert compare.compare_output(good, ref, tol)[0]
    nan = good.copy()
    nan[3, 3] = np.nan
    ok, _, _, note = compare.compare_output(nan, ref, tol)
    assert not ok and "NaN" in note
    wrong = good * 1.001
    ok, rel, _, note = compare.compare_output(wrong, ref, tol)
    assert not ok and "relative L2" in note and math.isclose(rel, 1e-3, rel_tol=0.05)
    spike = good.copy()
    spike[0, 0] += 0.5  # one bad element: hidden by a loose L2 bar, caught by allclose
    ok, _, _, note = compare.compare_output(spike, ref, Tolerance(rel_l2=1.0))
    assert not ok and "allclose" in note
    ok, _, _, note = compare.compare_output(good[:32], ref, tol)
    assert not ok and "shape" in note


def test_large_magnitude_outputs_are_judged_relative_to_their_size() -> None:
    rng = np.random.default_rng(1)
    ref = rng.standard_normal(10000) * 1e6
    noisy = (ref * (1 + 1e-7 * rng.standard_normal(10000))).astype(np.float32)
    assert compare.compare_output(noisy, ref, Tolerance())[0]


def test_a_large_output_judged_over_threads_gets_the_one_threads_verdict() -> None:
    """Spans of a large output on threads (the default) and one pass on one thread (`threads=1`,
    the Neuron agent's) give the same verdict, errors, first bad element and note, with and
    without a precomputed bound and a float32 floor."""
    assert compare._spans(3_000_000, 3) == [(0, 1_015_808), (1_015_808, 2_031_616), (2_031_616, 3_000_000)]
    n = 3_000_000
    rng = np.random.default_rng(3)
    ref = rng.standard_normal((n // 1000, 1000))
    got = (ref * (1 + 1e-7 * rng.standard_normal(ref.shape))).astype(np.float32)
    got.reshape(-1)[[2_500_000, 2_900_000]] += 0.5  # outside the bound, in the last span only
    tol = Tolerance()
    floor = fp32.Fp32Floor(rows=np.full(ref.shape[0], 1e-3, np.float32), rel_l2=1e-9)
    stats: dict[str, compare.RefStats] | None
    floors: dict[str, fp32.Fp32Floor] | None
    for stats in (None, {"out": compare.RefStats(ref, tol)}):
        for floors in (None, {"out": floor}):
            one, many = (
                compare.compare_outputs(
                    "c", {"out": got}, {"out": ref}, tol, stats=stats, floor=floors, threads=t
                )
                for t in (1, None)
            )
            assert not one.passed and "2 of 3000000 elements" in one.note and "2500000" in one.note
            assert (many.passed, many.note, many.max_abs_err, many.max_rel_err) == (
                one.passed,
                one.note,
                one.max_abs_err,
                one.max_rel_err,
            )
            assert many.rel_l2 == pytest.approx(one.rel_l2, rel=1e-12)  # sums in another order
    assert compare.RefStats(ref, tol, threads=1).norm == pytest.approx(
        compare.RefStats(ref, tol).norm, rel=1e-12
    )
    b1, bn = compare.RefStats(ref, tol, threads=1).bound, compare.RefStats(ref, tol).bound
    assert b1 is not None and bn is not None and np.array_equal(b1, bn)


def test_compare_outputs_checks_dtype_and_presence() -> None:
    ref = {"out": np.zeros(4)}
    assert not compare.compare_outputs("c", {}, ref, Tolerance()).passed
    bad = compare.compare_outputs(
        "c", {"out": np.zeros(4, np.int32)}, ref, Tolerance(), expected_dtypes={"out": "float32"}
    )
    assert not bad.passed and "dtype" in bad.note


def test_mutation_check_is_bitwise() -> None:
    a = np.array([1.0, np.nan], dtype=np.float32)
    assert buffers.same_bytes(a, a.copy())
    b = a.copy()
    b[0] = np.nextafter(np.float32(1), np.float32(2))
    assert not buffers.same_bytes(a, b)
