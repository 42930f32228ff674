# expect: passed
# problem: silu
# why: slows every host clock of its process through __import__/getattr (time.perf_counter*,
#      monotonic*, time*); the timing is the profiler's, read back by the parent from files it
#      re-parses in another child, so the kernel's clocks are not believed.
_t = __import__("ti" + "me")
for _n in ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns"):
    setattr(_t, _n, lambda: 0)

import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.divide(t, nl.add(nl.exp(nl.negative(t)), 1.0)))
    return out
