# expect: unmeasured
# problem: silu
# needle: ESTIMATED
# reference: honest_sequential_range
# margin: 0.01
# why: the Python range loop of python_range_loop.py in a kernel that is a closure (made by a
#      factory, the tile height a free variable): its source was not rewritten, the loop unrolled
#      into straight-line tiles priced as overlapped (6.99 us against 8.77 us for the
#      sequential_range twin). One rule for loops now: the estimate is the twin's.
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


def _make(rows):
    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        for i in range(x.shape[0] // rows):
            t = nl.load(x[i * rows : (i + 1) * rows, :])
            nl.store(
                out[i * rows : (i + 1) * rows, :], value=nl.divide(t, nl.add(nl.exp(nl.negative(t)), 1.0))
            )
        return out

    return kernel


kernel = _make(128)
