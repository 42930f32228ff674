# expect: incorrect
# problem: matmul
# needle: err_false_onezero_flag
# why: tells the Tensor Engine the weights are made of 0s and 1s (is_moving_onezero, public
#      API), which halves the price of every fp32 matmul, while they are not: the emulator's
#      exact product hid it. The executor checks every flagged operand on the data; on the
#      hardware the product would be garbage, so the kernel is wrong.
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
            acc += nisa.nc_matmul(a_t, w[k], is_moving_onezero=True)
        nl.store(out[m], value=nl.copy(acc))
    return out
