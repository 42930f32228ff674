# expect: compile_error
# problem: silu
# needle: err_constant_too_large
# why: embeds 8 MiB of host-computed data in the program (a table of exponentials the kernel
#      would otherwise compute): work done on the host at trace time is invisible to the
#      estimate, so a program carries at most 4 MiB of constants (an identity or a small table).
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np


@nki.jit
def kernel(x):
    M, N = x.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.shared_constant(np.exp(-np.linspace(-8, 8, 128 * 16384)).reshape(128, 16384).astype(np.float32))
    for i in nl.affine_range(M // 128):
        t = nl.load(x[i * 128 : (i + 1) * 128, :])
        nl.store(out[i * 128 : (i + 1) * 128, :], value=nisa.activation(op=nl.silu, data=t))
    return out
