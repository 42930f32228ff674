# expect: incorrect
# problem: silu
# needle: timed:timing-r0/run5
# why: does the work in its process's first 7 runs, then skips it. The correctness child
#      makes 6 runs (5 seeds and the large case), so it passes them; in the timing child
#      the 2 warm-ups and profiled runs 0-4 are honest and run 5 is the first lazy one:
#      every profiled run's output is checked, not only the last.
import sys

import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

_RUNS = [0]


def _tracing():
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "_trace":
            return True
        f = f.f_back
    return False


@nki.jit
def kernel(x):
    if not _tracing():
        _RUNS[0] += 1
    steps = x.shape[0] // 128 if _RUNS[0] <= 7 else 0
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(steps):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.divide(t, nl.add(nl.exp(nl.negative(t)), 1.0)))
    return out
