"""The tolerance's float32 floor (hardware_agents/pipeline/fp32.py, `Fp32Floor`): where float32 itself
cannot meet the tolerance (an attention whose scores nearly tie at float32 resolution), an
honest float32 computation in another summation order passes with the floor and fails
without it; a wrong one fails with it; on well-conditioned inputs the floor changes nothing."""

from __future__ import annotations

import numpy as np

from accelopt.problem import (
    AxisVar,
    Definition,
    Problem,
    Roofline,
    TensorSpec,
    Tolerance,
    Workload,
    one_file_solution,
)
from accelopt.profile import SeedCheck
from hardware_agents.pipeline import compare, fp32, inputgen, numpy_ref

ATTENTION = """
import numpy as np

def run(q, k, v):
    s = q @ k.T
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)) @ v
"""


def attention(k_init: str, q_init: str = "1000 * normal(0, 1)") -> Problem:
    d = Definition(
        name="attention",
        op_type="attention",
        axes={"Q": AxisVar(), "N": AxisVar(), "D": AxisVar()},
        inputs={
            "q": TensorSpec(shape=["Q", "D"], dtype="float32"),
            "k": TensorSpec(shape=["N", "D"], dtype="float32"),
            "v": TensorSpec(shape=["N", "D"], dtype="float32"),
        },
        outputs={"out": TensorSpec(shape=["Q", "D"], dtype="float32")},
        reference=ATTENTION,
        x_numpy_reference=ATTENTION,
        x_input_init={"q": q_init, "k": k_init},
        x_roofline=Roofline(bytes_min="4*(Q*D + 2*N*D + Q*D)"),
    )
    base = one_file_solution(
        "attention", "def run(q, k, v):\n    pass\n", entry_point="kernel.py::run", language="python"
    )
    return Problem(
        definition=d, workload=Workload(uuid="t", axes={"Q": 64, "N": 256, "D": 64}), baseline=base
    )


def float32_other_order(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The same attention in float32, the scores' sums taken one feature at a time (an honest
    kernel with a sequential accumulation, not numpy's)."""
    s = np.zeros((q.shape[0], k.shape[0]), np.float32)
    for d in range(q.shape[1]):
        s += np.outer(q[:, d], k[:, d]).astype(np.float32)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    w = (e / e.sum(axis=1, keepdims=True, dtype=np.float32)).astype(np.float32)
    return (w @ v).astype(np.float32)


def _judge(problem: Problem, got: np.ndarray, seed: int = 0) -> tuple[SeedCheck, SeedCheck]:
    case = inputgen.InputCase(name="c", seed=seed)
    inputs = inputgen.make_inputs(problem, case)
    ref = numpy_ref.reference_outputs(problem, inputs)
    tol = compare.tolerance_of(problem.definition)
    floor = fp32.fp32_floor(problem, inputs, ref, seed)
    plain = compare.compare_outputs("c", {"out": got}, ref, tol)
    widened = compare.compare_outputs("c", {"out": got}, ref, tol, floor=floor)
    return plain, widened


def _inputs(problem: Problem, seed: int = 0) -> dict[str, np.ndarray]:
    return inputgen.make_inputs(problem, inputgen.InputCase(name="c", seed=seed))


def test_an_honest_float32_result_that_float32_cannot_improve_passes_with_the_floor() -> None:
    # keys that differ by 1e-4 of their size: scores of ~8e3 whose differences (~0.8) are a
    # few hundred float32 ulps, so the softmax weights carry float32's rounding of the scores
    p = attention("1 + 0.0001 * normal(0, 1)")
    for seed in (0, 1, 2):
        x = _inputs(p, seed)
        got = float32_other_order(x["q"], x["k"], x["v"])
        plain, widened = _judge(p, got, seed)
        assert not plain.passed, plain  # the tolerance alone rejects honest float32 work here
        assert widened.passed, widened.note


def test_a_wrong_result_fails_with_the_floor_too() -> None:
    p = attention("1 + 0.0001 * normal(0, 1)")
    x = _inputs(p)
    got = float32_other_order(x["q"], x["k"], x["v"])
    wrong = got.copy()
    wrong[5, :] *= 1.2  # one row off by 20 %
    _, widened = _judge(p, wrong)
    assert not widened.passed and "float32's own error" in widened.note
    half = got.copy()
    half[:, ::2] = half[:, 1::2]  # half the features copied from their neighbours
    _, widened = _judge(p, half)
    assert not widened.passed


def test_on_well_conditioned_inputs_the_floor_is_float32_rounding() -> None:
    p = attention("normal(0, 1)", "normal(0, 1)")  # scores of a few units: a smooth softmax
    x = _inputs(p)
    ref = numpy_ref.reference_outputs(p, x)["out"]
    floor = fp32.fp32_floor(p, x, {"out": ref}, 0)["out"]
    scale = float(np.abs(ref).max())
    assert float(np.max(floor.rows)) <= 1e-5 * scale
    # an error of 1e-3 of the largest value in one element is caught as it was without the floor
    got = ref.astype(np.float32)
    got[3, 3] += np.float32(1e-3 * scale + 0.01 * (1 + abs(ref[3, 3])))
    plain, widened = _judge(p, got)
    assert not plain.passed and not widened.passed


def test_the_floor_widens_only_the_rows_it_covers() -> None:
    tol = Tolerance()
    ref = np.random.default_rng(3).standard_normal((16, 32))
    got = ref.astype(np.float32)
    got[3, 5] += np.float32(0.5)
    rows = np.zeros(16, np.float32)
    rows[3] = 0.2  # 4 x 0.2 covers 0.5
    assert compare.compare_outputs(
        "c", {"o": got}, {"o": ref}, tol, floor={"o": fp32.Fp32Floor(rows=rows, rel_l2=0.1)}
    ).passed
    rows[3] = 0.1  # 4 x 0.1 does not
    chk = compare.compare_outputs(
        "c", {"o": got}, {"o": ref}, tol, floor={"o": fp32.Fp32Floor(rows=rows, rel_l2=0.1)}
    )
    assert not chk.passed and "allclose" in chk.note
    moved = ref.astype(np.float32)
    moved[10, 0] += np.float32(0.5)  # a row whose floor is 0
    rows[3] = 1.0
    chk = compare.compare_outputs(
        "c", {"o": moved}, {"o": ref}, tol, floor={"o": fp32.Fp32Floor(rows=rows, rel_l2=0.1)}
    )
    assert not chk.passed
