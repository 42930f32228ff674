# lhs @ rhs with nki.isa: lhs arrives as 128-row blocks (M // 128, 128, K); each block's
# 128x128 pieces are transposed on the Tensor Engine (nc_transpose) and multiplied into PSUM.
# The kernel the one/zero hack and the Tensor Engine label hack start from (`reference:`).
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
