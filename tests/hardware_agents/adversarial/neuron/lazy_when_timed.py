# expect: incorrect
# problem: silu
# needle: the output of a timed run is wrong
# why: skips the work when it sees the profiler's artifacts (it is being timed): right in
#      the correctness runs, wrong in the timed ones, whose output is checked in full.
import os

import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    steps = 0 if os.path.exists("art/r0_0.ntff") else x.shape[0] // 128
    for i in nl.affine_range(steps):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.divide(t, nl.add(nl.exp(nl.negative(t)), 1.0)))
    return out
