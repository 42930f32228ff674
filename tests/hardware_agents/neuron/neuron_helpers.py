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
    matmul = FixtureProblem(
        **{
            **matmul.__dict__,
            "to_nki": "    return [np.reshape(inputs[0], (M // 128, 128, K)), inputs[1]]",
            "kernel": MATMUL_TILED,
        }
    )
    bmm_softmax = shaped("bmm_softmax", B=2, M=128, K=64, N=256)
    add_rms = shaped("add_rmsnorm_matmul", M=128, N=256, K=128)
    return [
        FixtureProblem(**{**silu.__dict__, "kernel": SILU_GOOD}),
        matmul,
        FixtureProblem(**{**bmm_softmax.__dict__, "kernel": BMM_SOFTMAX_STABLE}),
        FixtureProblem(**{**add_rms.__dict__, "kernel": ADD_RMSNORM_MATMUL}),
    ]


def nkibench14_problems() -> list[FixtureProblem]:
    """The 14 NKIBench operators at shapes small enough to emulate in seconds, with the
    NKIBench-style baseline kernels of nkibench_kernels.py (ragged tiles where a mask is due)."""
    from nkibench_kernels import KERNELS, TO_NKI

    small = {
        "silu": {"M": 256, "N": 2048},
        "adamw": {"M": 200, "N": 1024},
        "rope_single_freq_apply": {"B": 1, "H": 2, "N": 512, "D": 128},
        "mamba": {"M": 256, "C": 128, "S": 4},
        "matmul": {"M": 256, "N": 1024, "K": 256},
        "transpose_matmul": {"M": 256, "K": 256, "N": 700},
        "bmm": {"B": 2, "M": 256, "K": 64, "N": 512},
        "bmm_softmax": {"B": 2, "M": 128, "K": 64, "N": 1024},
        "rmsnorm_matmul": {"M": 256, "N": 512, "K": 256},
        "add_rmsnorm_matmul": {"M": 256, "N": 512, "K": 256},
        "matmul_add_rmsnorm": {"M": 256, "N": 512, "K": 256},
        "swiglu": {"M": 256, "N": 512, "K": 512},
        "lora": {"M": 256, "N": 512, "K": 256, "R": 128},
        "gqa_full": {"B": 1, "N": 512, "QH": 4, "KH": 2, "D": 128},
    }
    out = []
    for name, values in small.items():
        p = shaped(name, **values)
        extra = {"to_nki": TO_NKI[name]} if name in TO_NKI else {}
        out.append(FixtureProblem(**{**p.__dict__, "kernel": KERNELS[name], **extra}))
    return out
