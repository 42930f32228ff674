# expect: unmeasured
# problem: silu
# needle: ESTIMATED
# reference: honest_sequential_range
# margin: 0.01
# why: the Python range loop of python_range_loop.py with range under another name (`r = range`):
#      the rewrite looked for the name `range`, so the loop unrolled into straight-line tiles
#      priced as overlapped (6.99 us against 8.77 us for the sequential_range twin). One rule for
#      loops now: the estimate is the twin's.
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

r = range


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in r(x.shape[0] // 128):
        t = nl.load(x[i * 128 : (i + 1) * 128, :])
        nl.store(out[i * 128 : (i + 1) * 128, :], value=nl.divide(t, nl.add(nl.exp(nl.negative(t)), 1.0)))
    return out
