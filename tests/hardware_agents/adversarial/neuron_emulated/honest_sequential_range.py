# expect: unmeasured
# problem: silu
# needle: ESTIMATED
# why: the honest twin of python_range_loop.py: the same SiLU over row tiles in an
#      nl.sequential_range, the loop the NKI compiler makes of a Python range.
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.sequential_range(x.shape[0] // 128):
        t = nl.load(x[i * 128 : (i + 1) * 128, :])
        nl.store(out[i * 128 : (i + 1) * 128, :], value=nl.divide(t, nl.add(nl.exp(nl.negative(t)), 1.0)))
    return out
