# expect: unmeasured
# problem: matmul
# needle: ESTIMATED
# reference: _matmul_pe
# margin: 0.05
# why: the honest twin of the one/zero hack: the transposes as NKIBench's kernels write them, an
#      nc_matmul against an identity with is_moving_onezero and is_transpose. The identity is
#      made of 0s and 1s, so the executor's check passes and the estimate is the nc_transpose
#      kernel's, plus the identity's load.
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np


@nki.jit
def kernel(lhs, rhs):
    MT, TM, K = lhs.shape
    N = rhs.shape[1]
    out = nl.ndarray((MT, TM, N), dtype=nl.float32, buffer=nl.shared_hbm)
    eye = nl.load(nl.shared_constant(np.identity(128, dtype=np.float32)))
    w = nl.ndarray((K // 128, nl.par_dim(128), N), dtype=nl.float32, buffer=nl.sbuf)
    for k in nl.affine_range(K // 128):
        w[k] = nl.load(rhs[k * 128 : (k + 1) * 128, :])
    for m in nl.affine_range(MT):
        a = nl.load(lhs[m])
        acc = nl.zeros((TM, N), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(K // 128):
            a_t = nl.copy(
                nisa.nc_matmul(a[:, k * 128 : (k + 1) * 128], eye, is_moving_onezero=True, is_transpose=True)
            )
            acc += nisa.nc_matmul(a_t, w[k])
        nl.store(out[m], value=nl.copy(acc))
    return out
