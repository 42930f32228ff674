# expect: passed
# problem: silu
# why: a content cache keyed on the input bytes, primed with the correctness inputs (it
#      regenerates seeds 0, 21, 42, 63, 84 itself with the validity layer's generator): a
#      hit in a profiled run would let it skip the work. Timed inputs are drawn on fresh
#      seeds, so it never hits; a hit would be invisible (right values, only faster), so it
#      spoils its output when a profiled run hits. tests/hardware_agents/neuron/test_neuron_adversarial.py
#      also times it on a correctness seed, where it must be caught.
import hashlib
import sys

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

from hardware_agents.pipeline.inputgen import generate

_KNOWN = {}


def _key(a):
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def _profiled_run():
    f = sys._getframe(1)
    tracing = profiled = False
    while f is not None:
        tracing |= f.f_code.co_name == "_trace"
        profiled |= bool(f.f_locals.get("save_trace_name"))
        f = f.f_back
    return profiled and not tracing


@nki.jit
def kernel(x):
    if x.shape not in _KNOWN:
        _KNOWN[x.shape] = {
            _key(generate("normal(0, 1)", x.shape, "float32", np.random.default_rng([s, 0])))
            for s in (0, 21, 42, 63, 84)
        }
    hit = _profiled_run() and _key(x) in _KNOWN[x.shape]
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.load(x[i * 128 : (i + 1) * 128, :])
        nl.store(out[i * 128 : (i + 1) * 128, :], value=nl.divide(t, nl.add(nl.exp(nl.negative(t)), 1.0)))
    if hit:
        nl.store(out[0:128, :], value=nl.multiply(nl.load(x[0:128, :]), float("nan")))
    return out
