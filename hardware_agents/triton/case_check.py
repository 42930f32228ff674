"""One case's outputs against our references (the Triton judge's case rule, `TritonJudge`'s and
`RoundsJudge`'s for a timed call checked in full): the outputs read back from the child's
folder (`load_outputs`), their dtype, shape and values (`check_case`), and an adversarial
case's overflow said as such (`overflowed`, `overflow_reason`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from accelopt.problem import Problem
from accelopt.profile import SeedCheck
from hardware_agents.pipeline import compare, fp32, inputgen
from hardware_agents.sandbox import Sandbox
from hardware_agents.triton.data import CaseData, to_float64, tolerance_for
from hardware_agents.triton.inputs import torch_dtype


def load_outputs(box: Sandbox, rel: str, max_bytes: int) -> dict[str, torch.Tensor]:
    with box.open_file(rel, max_bytes=max_bytes) as f:
        obj = torch.load(f, weights_only=True)
    if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise ValueError(f"{rel} does not hold a dict of tensors")
    return obj


def check_case(
    problem: Problem,
    case: CaseData,
    label: str,
    got: dict[str, torch.Tensor],
    floor: dict[str, fp32.Fp32Floor] | None = None,
) -> SeedCheck:
    """dtype, shape and values of one case's outputs (FlashInfer-Bench's INCORRECT_DTYPE,
    INCORRECT_SHAPE and INCORRECT_NUMERICAL, all reported as `incorrect`); with `floor`, the
    values' bar widened by float32's own error on the case's inputs (`fp32.Fp32Floor`)."""
    for meta in case.outputs:
        t = got.get(meta.name)
        if t is None:
            return SeedCheck(case=label, passed=False, note=f"output {meta.name} missing")
        if t.dtype != torch_dtype(meta.dtype):
            return SeedCheck(
                case=label,
                passed=False,
                note=f"output {meta.name} has dtype "
                f"{str(t.dtype).removeprefix('torch.')}, the definition says {meta.dtype}",
            )
        expected = tuple(meta.shape or ())
        if tuple(t.shape) != expected:
            return SeedCheck(
                case=label,
                passed=False,
                note=f"output {meta.name} has shape {list(t.shape)}, the definition says {list(expected)}",
            )
    outputs = {n: to_float64(got[n]) for n in case.ref64}
    return compare.compare_outputs(
        label, outputs, case.ref64, tolerance_for(problem.definition), stats=case.stats, floor=floor
    )


def overflowed(case: CaseData, got: dict[str, torch.Tensor]) -> list[str]:
    """The outputs with a non-finite value where the case's reference is finite."""
    bad = []
    for name, ref in case.ref64.items():
        t = got.get(name)
        if t is None or not t.is_floating_point() or tuple(t.shape) != ref.shape:
            continue
        finite_ref = torch.from_numpy(np.isfinite(ref))
        if bool((~torch.isfinite(t.cpu()) & finite_ref).any()):
            bad.append(name)
    return bad


def overflow_reason(problem: Problem, outputs: Sequence[str]) -> str:
    """Why an adversarial case's non-finite outputs refuse the kernel, said precisely.

    The `large` case scales every float input by 1000 (inputgen.LARGE_SCALE). That is the
    size of activations real models carry (hidden-state "massive activations" of 1e3 to 1e4
    in LLaMA-2, Sun et al. 2024), though not of every intermediate: an attention's logits,
    products of two scaled inputs, reach 1e6 there, beyond any real model's. The case is
    kept at that scale, and a kernel whose output is non-finite there is refused, because:

    - the reference is finite there (a case whose reference overflows is skipped), and an
      honest kernel is too: softmax is shift-invariant, and the kernel that subtracts the
      running max and accumulates in float32 (FlashAttention's and FlashInfer's own way) is
      right at any scale, save where two logits tie at float32's resolution, which the
      float32 floor forgives (`TritonJudge._floor_check`);
    - an `exp` without max subtraction overflows float32 once one logit passes 88.7, and
      real attention heads pass it: Kimi K2, a DeepSeek-V3-shaped MLA model, reports max
      logits past 1000 in training without its QK-Clip, which then holds them at 100. A
      scale that kept logits to what real models produce (~100) would refuse such a kernel
      all the same, and one that passed it (inputs under ~4x for FlashInfer-Bench's MLA
      decode) would stress nothing: the overflow is the kernel's at realistic magnitudes
      (that baseline, an exp without max subtraction, at inputs x4 instead of x1000, largest
      logits 74 to 156: 7 of its 64 heads NaN, measured in the interpreter);
    - a sum of squares or an accumulator in fp16 overflows at 65504, which 1000-scale
      activations pass, as real ones do.

    So the verdict stays `incorrect`, and says which case, at what scale, and the likely
    cause instead of a bare mismatch."""
    default = problem.definition.x_adversarial is None
    scale = f"at inputs scaled x{inputgen.LARGE_SCALE:g}" if default else "at its inputs"
    return (
        f"overflow: non-finite {', '.join(outputs)} where the reference is finite, {scale} (see the note): "
        "the kernel overflows at magnitudes the reference computes, e.g. an exp without max "
        "subtraction (float32's exp overflows past 88.7, a logit real attention heads reach) or a "
        "sum of squares or accumulator in fp16 (past 65504)"
    )
