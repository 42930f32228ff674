# expect: incorrect
# problem: silu
# needle: modified its inputs
# why: in its last profiled run of a round (after it computed its own output, which stays
#      right) it zeroes the harness's host copy of its input through the caller's frames;
#      correctness runs are untouched. Inputs are read-only in timed runs too.
import sys

import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

_PROFILED = [0]


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.divide(t, nl.add(nl.exp(nl.negative(t)), 1.0)))
    f = sys._getframe(1)
    tracing = profiled = False
    harness_args = None
    while f is not None:
        tracing |= f.f_code.co_name == "_trace"
        profiled |= bool(f.f_locals.get("save_trace_name"))
        if f.f_code.co_name == "_time" and isinstance(f.f_locals.get("args"), list):
            harness_args = f.f_locals["args"]
        f = f.f_back
    if profiled and not tracing:
        _PROFILED[0] += 1
        if _PROFILED[0] % 10 == 0 and harness_args:
            for a in harness_args:
                if isinstance(a, np.ndarray):
                    a[...] = 0
    return out
