"""Shared pieces of the Neuron tests: where the STAND-IN SDK lives and the small problems."""

from __future__ import annotations

from pathlib import Path

from neuron_kernels import ADD_RMSNORM_MATMUL, BMM_SOFTMAX_STABLE, MATMUL_TILED, SILU_GOOD
from nkibench_fixture import FixtureProblem, shaped

HERE = Path(__file__).resolve().parent
STANDIN = HERE / "standin"  # the stand-in `neuronxcc` package and `neuron_profile.py`


def small_problems() -> list[FixtureProblem]:
    silu = shaped("silu", M=256, N=512)
    matmul = shaped("matmul", M=256, N=512, K=128)
    matmul = FixtureProblem(**{**matmul.__dict__, "to_nki": "    return [np.reshape(inputs[0], (M // 128, 128, K)), "
                                                           "inputs[1]]", "kernel": MATMUL_TILED})
    bmm_softmax = shaped("bmm_softmax", B=2, M=128, K=64, N=256)
    add_rms = shaped("add_rmsnorm_matmul", M=128, N=256, K=128)
    return [FixtureProblem(**{**silu.__dict__, "kernel": SILU_GOOD}), matmul,
            FixtureProblem(**{**bmm_softmax.__dict__, "kernel": BMM_SOFTMAX_STABLE}),
            FixtureProblem(**{**add_rms.__dict__, "kernel": ADD_RMSNORM_MATMUL})]
