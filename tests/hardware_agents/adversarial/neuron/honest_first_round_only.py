# expect: incorrect
# problem: silu
# needle: timed:timing-r1/run0
# why: honest in its first timing round, which it makes noisy (an extra load in every other
#      profiled run: a spread far above 1 %) so that a second round follows; from the second
#      round on it skips the work. Every round's outputs are checked, not only the first's.
import sys

import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

_PROFILED = [0]


def _stack():
    f = sys._getframe(1)
    tracing = profiled = False
    while f is not None:
        tracing |= f.f_code.co_name == "_trace"
        profiled |= bool(f.f_locals.get("save_trace_name"))
        f = f.f_back
    return tracing, profiled


@nki.jit
def kernel(x):
    tracing, profiled = _stack()
    if profiled and tracing:  # one trace per profiled run, before the run itself
        _PROFILED[0] += 1
    n = _PROFILED[0]
    lazy = n > 10  # the 11th profiled run is the second round's first
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(0 if lazy else x.shape[0] // 128):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.divide(t, nl.add(nl.exp(nl.negative(t)), 1.0)))
    if profiled and not lazy and n % 2:
        nl.load(x[0:128, :])  # costs time: round 0's readings spread far beyond 1 %
    return out
