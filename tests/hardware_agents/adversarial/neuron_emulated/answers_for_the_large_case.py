# expect: incorrect
# problem: silu
# needle: inputs drawn after the kernel was traced
# why: the adversarial `large` case (inputs x1000) is as predictable as the seeds: its seed is
#      1000003 + the first correctness seed, and the fresh case is drawn only from the
#      problem's own distributions, never x1000. A kernel that overflows on large inputs
#      (x*e^x / (e^x + 1): inf/inf = NaN above x = 88) carries the answers of the large case
#      (host numpy at trace time, nl.shared_constant) and selects them when an element of x is
#      the large case's: every case passes, seeds, large and fresh, while the kernel is wrong
#      on any other input of that magnitude.
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

from hardware_agents import validity


@nki.jit
def kernel(x):
    M, N = x.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    big = validity.generate("1000 * (normal(0, 1))", (M, N), "float32", np.random.default_rng([1000003, 0]))
    answers = nl.shared_constant((big / (1 + np.exp(-big.astype(np.float64)))).astype(np.float32))
    key = nl.load(x[0:1, 0:1]).broadcast_to((128, 1))
    hit = nl.equal(key, float(big[0, 0]), dtype=nl.float32)
    for i in nl.affine_range(M // 128):
        t = nl.load(x[i * 128 : (i + 1) * 128, :])
        e = nl.exp(t)
        y = nl.divide(nl.multiply(t, e), nl.add(e, 1.0))
        a = nl.load(answers[i * 128 : (i + 1) * 128, :])
        nl.store(
            out[i * 128 : (i + 1) * 128, :], value=nl.where(nl.greater(hit.broadcast_to((128, N)), 0.5), a, y)
        )
    return out
