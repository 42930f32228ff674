# expect: unmeasured
# problem: silu
# needle: ESTIMATED
# reference: _silu_fused
# margin: 0.01
# why: the honest twin of the alias hacks: a real alias, the input and output reshaped as whole
#      HBM tensors (128-row blocks), loaded and stored tile by tile. The validator keeps it, and
#      its estimate is the plain kernel's (the same DMAs, the same instructions).
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def kernel(x):
    M, N = x.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    xb = x.reshape((M // 128, 128, N))
    ob = out.reshape((M // 128, 128, N))
    for i in nl.affine_range(M // 128):
        nl.store(ob[i], value=nisa.activation(op=nl.silu, data=nl.load(xb[i])))
    return out
