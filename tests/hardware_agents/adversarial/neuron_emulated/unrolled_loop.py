# expect: unmeasured
# problem: silu
# needle: ESTIMATED
# reference: honest_sequential_range
# margin: 0.01
# why: the loop of honest_sequential_range.py written out by hand for the problem's two row tiles
#      (M = 256): straight-line code was priced as if its tiles overlapped without sharing their
#      engines, 6.99 us against 8.77 us for the sequential_range twin. No loop to recognise: the
#      schedule gives straight-line tiles the engines and memory they hold, and the estimate is
#      the twin's.
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t0 = nl.load(x[0:128, :])
    nl.store(out[0:128, :], value=nl.divide(t0, nl.add(nl.exp(nl.negative(t0)), 1.0)))
    t1 = nl.load(x[128:256, :])
    nl.store(out[128:256, :], value=nl.divide(t1, nl.add(nl.exp(nl.negative(t1)), 1.0)))
    return out
