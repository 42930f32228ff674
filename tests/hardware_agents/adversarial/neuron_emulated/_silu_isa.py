# SiLU as x * 1 / (1 + exp(-x)), one nki.isa instruction per step with the compiler's choice of
# engines: the kernel the engine-label hack forges and its honest twin mirrors (`reference:`).
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def kernel(x):
    M, N = x.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(M // 128):
        t = nl.load(x[i * 128 : (i + 1) * 128, :])
        e = nisa.activation(op=nl.exp, data=t, scale=-1.0)
        d = nisa.tensor_scalar(data=e, op0=nl.add, operand0=1.0)
        r = nisa.reciprocal(data=d)
        nl.store(out[i * 128 : (i + 1) * 128, :], value=nisa.tensor_tensor(t, r, op=nl.multiply))
    return out
