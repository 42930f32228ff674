# expect: unmeasured
# problem: silu
# needle: ESTIMATED
# reference: honest_sequential_range
# margin: 0.01
# why: the loop of honest_sequential_range.py as nl.static_range (public API, "fully unrolled" by
#      the compiler): its straight-line tiles were priced as overlapped, 6.99 us against 8.77 us
#      for the sequential_range twin. The compiler runs the same instructions in the same order
#      whichever range it unrolls or keeps, and the schedule prices a loop as its unrolled
#      iterations: the estimate is the twin's.
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.static_range(x.shape[0] // 128):
        t = nl.load(x[i * 128 : (i + 1) * 128, :])
        nl.store(out[i * 128 : (i + 1) * 128, :], value=nl.divide(t, nl.add(nl.exp(nl.negative(t)), 1.0)))
    return out
