# expect: incorrect
# problem: silu
# why: replaces the emulator's compiler in its own process so that what it hands over is the
#      program of a trivial kernel (copy the input to the output); the agent executes exactly
#      that program in another sandbox and judges its outputs, so the forgery computes nothing.
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

import hardware_agents.neuron.emulator.kernel as _k

_real = _k.compile_kernel


@nki.jit
def _copy(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        nl.store(out[i * 128 : (i + 1) * 128, :], value=nl.load(x[i * 128 : (i + 1) * 128, :]))
    return out


_k.compile_kernel = lambda kernel, specs: _real(_copy, specs)


@nki.jit
def kernel(x):
    return _copy(x)
