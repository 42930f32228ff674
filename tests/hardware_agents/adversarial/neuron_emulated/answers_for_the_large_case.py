# expect: incorrect
# problem: silu
# needle: inputs drawn after the kernel was traced
# fails_only: fresh-large
# why: an adversarial case on a fixed seed is as predictable as the seeds (the `large` case's
#      is 1000003 + the first correctness seed). A kernel that overflows on large inputs
#      (x*e^x / (e^x + 1): inf/inf = NaN above x = 88) carries the answers of that case (host
#      numpy at trace time, nl.shared_constant) and selects them when an element of x is the
#      large case's. The emulate mode draws its adversarial cases after tracing on fresh seeds
#      (`fresh-large`), so the carried answers never match and the overflow shows.
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

from hardware_agents.pipeline import inputgen


@nki.jit
def kernel(x):
    M, N = x.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    big = inputgen.generate("1000 * (normal(0, 1))", (M, N), "float32", np.random.default_rng([1000003, 0]))
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
