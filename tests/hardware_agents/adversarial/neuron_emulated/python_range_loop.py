# expect: unmeasured
# problem: silu
# needle: ESTIMATED
# reference: honest_sequential_range
# margin: 0.001
# why: the loop over row tiles written with Python's range (public API): the emulator unrolled
#      it into independent straight-line tiles, each with its own memory, and the schedule
#      overlapped them all (17 % below the same kernel's nl.affine_range loop). The NKI compiler
#      replaces a Python range in a kernel with nl.sequential_range, and so does the emulator:
#      the estimate is the sequential_range kernel's.
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in range(x.shape[0] // 128):
        t = nl.load(x[i * 128 : (i + 1) * 128, :])
        nl.store(out[i * 128 : (i + 1) * 128, :], value=nl.divide(t, nl.add(nl.exp(nl.negative(t)), 1.0)))
    return out
