"""NKI kernels for the device-path tests. They run on the STAND-IN `neuronxcc` (standin/),
written against the real NKI API (nl.load/nl.store/nl.matmul, @nki.jit, shared_hbm outputs)."""

from __future__ import annotations

HEADER = """\
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

"""

SILU = HEADER + """\
TILE = {tile}


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // TILE):
        t = nl.load(x[i * TILE:(i + 1) * TILE, :])
        y = {expr}
        nl.store(out[i * TILE:(i + 1) * TILE, :], value=y)
    {extra}
    return out
"""
SILU_OK = "nl.divide(t, nl.add(nl.exp(nl.negative(t)), 1.0))"
SILU_WRONG = "nl.multiply(t, nl.exp(nl.negative(t)))"


def silu(tile: int = 128, expr: str = SILU_OK, extra: str = "") -> str:
    return SILU.format(tile=tile, expr=expr, extra=extra)


SILU_GOOD = silu()
SILU_BAD_VALUES = silu(expr=SILU_WRONG)
SILU_TOO_MANY_PARTITIONS = silu(tile=256)  # a 256-partition tile: rejected by the compiler
SILU_HBM_HOG = silu(extra="scratch = nl.ndarray((8192, 8192), dtype=nl.float32, buffer=nl.shared_hbm)")
SILU_BF16 = silu(extra="tmp = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)")
SILU_HALF_WRITTEN = SILU_GOOD.replace("x.shape[0] // TILE", "x.shape[0] // TILE - 1")
SILU_MUTATES_INPUT = silu(extra="nl.store(x[0:128, :], value=nl.zeros((128, x.shape[1]), dtype=nl.float32))")
SILU_HANGS = silu(extra="while True:\n        pass")
SILU_SYNTAX_ERROR = SILU_GOOD.replace("def kernel(x):", "def kernel(x)")
SILU_NO_ENTRY = SILU_GOOD.replace("def kernel(x):", "def silu_kernel(x):")
# Forges the harness's own profiler readings; the agent re-derives them in a separate child.
SILU_FORGES_TIMING = SILU_GOOD + """

import hardware_agents.neuron.harness as _h
_h.profile_total_time = lambda *a, **k: ('{"forged": {"total_time": 1e-12}}', "")
"""

# lhs arrives as (M // 128, 128, K) tiles (transform_to_nki_inputs); the output goes back
# through transform_nki_outputs, which reshapes the (M // 128, 128, N) result to (M, N).
MATMUL_TILED = HEADER + """\
@nki.jit
def kernel(lhs, rhs):
    MT, TM, K = lhs.shape
    N = rhs.shape[1]
    out = nl.ndarray((MT, TM, N), dtype=nl.float32, buffer=nl.shared_hbm)
    w = nl.load(rhs)
    for m in nl.affine_range(MT):
        nl.store(out[m], value=nl.matmul(nl.load(lhs[m]), w))
    return out
"""

BMM_SOFTMAX = HEADER + """\
@nki.jit
def kernel(lhs, rhs):
    B, M, K = lhs.shape
    N = rhs.shape[2]
    out = nl.ndarray((B, M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for b in nl.affine_range(B):
        s = nl.matmul(nl.load(lhs[b]), nl.load(rhs[b]))
        e = {exp}
        nl.store(out[b], value=nl.divide(e, nl.sum(e, axis=1, keepdims=True)))
    return out
"""
BMM_SOFTMAX_STABLE = BMM_SOFTMAX.format(exp="nl.exp(nl.subtract(s, nl.max(s, axis=1, keepdims=True)))")
BMM_SOFTMAX_NO_MAX = BMM_SOFTMAX.format(exp="nl.exp(s)")  # passes benign seeds, overflows on large inputs

ADD_RMSNORM_MATMUL = HEADER + """\
@nki.jit
def kernel(x, w, eps, z, g):
    M, K = x.shape
    N = w.shape[1]
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    y = nl.add(nl.load(x), nl.load(z))
    ms = nl.mean(nl.square(y), axis=1, keepdims=True)
    y = nl.multiply(nl.multiply(y, nl.rsqrt(nl.add(ms, eps))), nl.load(g.reshape((1, K))))
    nl.store(out, value=nl.matmul(y, nl.load(w)))
    return out
"""
# Does the work only until its own profiler files appear (i.e. while it is not being timed).
SILU_LAZY_WHEN_TIMED = SILU_GOOD.replace(
    "    for i in nl.affine_range(x.shape[0] // TILE):",
    "    import os\n    steps = 0 if os.path.exists('art/r0_0.ntff') else x.shape[0] // TILE\n"
    "    for i in nl.affine_range(steps):")
