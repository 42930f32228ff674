# expect: timing_mismatch
# problem: silu
# needle: by our clock
# why: rewrites the trace its runs leave (here: the stand-in's trace writer) to claim 5 s per
#      run; the profiler reads what the files say, but ten runs of 5 s cannot fit in the
#      round our clock measured. (A forged shorter time fits: the roofline gate is the floor.)
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from neuronxcc.nki import _emulator

_real = _emulator._ntff


def _slow(neff):
    rec = _real(neff)
    rec["total_time"] = 5.0
    return rec


_emulator._ntff = _slow


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.divide(t, nl.add(nl.exp(nl.negative(t)), 1.0)))
    return out
