# expect: unmeasured
# problem: silu
# needle: ESTIMATED
# reference: honest_sequential_range
# margin: 0.01
# why: the Python range loop of python_range_loop.py moved into a helper function: only the
#      kernel function's own loops were compiled as nl.sequential_range, so this one unrolled into
#      straight-line tiles that the schedule overlapped as if each had its engines to itself
#      (6.99 us against 8.77 us for the sequential_range twin, 1.25x; critical paths 4.40 against
#      6.17 us, 1.40x). The schedule now prices a loop as its unrolled iterations, dependences,
#      engines and memory alike: however the loop is spelled, the estimate is the twin's.
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


def _rows(x, out):
    for i in range(x.shape[0] // 128):
        t = nl.load(x[i * 128 : (i + 1) * 128, :])
        nl.store(out[i * 128 : (i + 1) * 128, :], value=nl.divide(t, nl.add(nl.exp(nl.negative(t)), 1.0)))


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    _rows(x, out)
    return out
