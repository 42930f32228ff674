# expect: runtime_error
# problem: silu
# needle: no readable report
# why: stops its own process (SIGSTOP, as the harness does at each handshake) in the middle
#      of its third profiled run, so the agent takes that stop for the end of the round: to
#      shorten the wall time the agent bounds the device times with, or to run its calls
#      where the agent's clock is not running. The round then has no report: a failure.
import os
import signal
import sys

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

_PROFILED = [0]


@nki.jit
def kernel(x):
    f = sys._getframe(1)
    tracing = profiled = False
    while f is not None:
        tracing |= f.f_code.co_name == "_trace"
        profiled |= bool(f.f_locals.get("save_trace_name"))
        f = f.f_back
    if profiled and not tracing:
        _PROFILED[0] += 1
        if _PROFILED[0] == 3:
            os.kill(os.getpid(), signal.SIGSTOP)
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], value=nl.divide(t, nl.add(nl.exp(nl.negative(t)), 1.0)))
    return out
