# expect: unmeasured
# problem: silu
# needle: ESTIMATED
# reference: _silu_isa
# margin: 0.02
# why: the honest twin of the engine-label hack: the same SiLU choosing its engines through the
#      public API where the API lets it (the add and the reciprocal on the Scalar Engine: what
#      the compiler's choice comes to, the engine on which each completes soonest). The
#      validator keeps the labels the API gives, and the estimate is the compiler's choice's.
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
        d = nisa.tensor_scalar(data=e, op0=nl.add, operand0=1.0, engine=nisa.scalar_engine)
        r = nisa.reciprocal(data=d, engine=nisa.scalar_engine)
        nl.store(out[i * 128 : (i + 1) * 128, :], value=nisa.tensor_tensor(t, r, op=nl.multiply))
    return out
