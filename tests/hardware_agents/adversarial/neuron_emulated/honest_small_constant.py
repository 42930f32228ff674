# expect: unmeasured
# problem: silu
# needle: ESTIMATED
# reference: _silu_fused
# margin: 0.05
# why: the honest twin of the constant hacks: a small host-computed constant (the activation's
#      zero bias, 512 bytes, from nl.shared_constant), loaded as the HBM tensor it is. The
#      validator keeps it and its load is priced; the estimate stays with the plain kernel's.
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np


@nki.jit
def kernel(x):
    M, N = x.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    bias = nl.load(nl.shared_constant(np.zeros((128, 1), dtype=np.float32)))
    for i in nl.affine_range(M // 128):
        t = nl.load(x[i * 128 : (i + 1) * 128, :])
        nl.store(out[i * 128 : (i + 1) * 128, :], value=nisa.activation(op=nl.silu, data=t, bias=bias))
    return out
