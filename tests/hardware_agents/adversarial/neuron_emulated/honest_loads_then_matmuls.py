# expect: unmeasured
# problem: matmul
# needle: ESTIMATED
# reference: _matmul_pe
# margin: 0
# why: the honest twin of useless_copies_hide_loads.py: the same kernel without the 64 useless
#      copies (the loads of the right-hand side, then the matmuls that wait for them). Its
#      estimate is the plain kernel's, and the hack's may not be below it.
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def kernel(lhs, rhs):
    MT, TM, K = lhs.shape
    N = rhs.shape[1]
    out = nl.ndarray((MT, TM, N), dtype=nl.float32, buffer=nl.shared_hbm)
    w = nl.ndarray((K // 128, nl.par_dim(128), N), dtype=nl.float32, buffer=nl.sbuf)
    for k in nl.affine_range(K // 128):
        w[k] = nl.load(rhs[k * 128 : (k + 1) * 128, :])
    for m in nl.affine_range(MT):
        a = nl.load(lhs[m])
        acc = nl.zeros((TM, N), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(K // 128):
            a_t = nl.copy(nisa.nc_transpose(a[:, k * 128 : (k + 1) * 128]))
            acc += nisa.nc_matmul(a_t, w[k])
        nl.store(out[m], value=nl.copy(acc))
    return out
