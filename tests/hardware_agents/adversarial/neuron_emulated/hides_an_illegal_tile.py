# expect: compile_error
# problem: silu
# needle: err_num_partition_exceed_arch_limit
# why: switches off the emulator's checks in its own process and traces a 256-partition tile
#      (one instruction priced as half the work); the agent re-validates every instruction of
#      the program it receives, as the hardware would reject it.
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

import hardware_agents.neuron.emulator.ops as _ops
import hardware_agents.neuron.emulator.validate as _v

_v.PMAX = 1 << 20
_v.check_instr = lambda *a, **k: []
_v.check_tile = lambda *a, **k: None
_v.check_decl = lambda *a, **k: None
_ops.validate = _v
_ops.temp.__globals__["validate"] = _v


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 256):
        t = nl.load(x[i * 256 : (i + 1) * 256, :])
        nl.store(out[i * 256 : (i + 1) * 256, :], value=nl.divide(t, nl.add(nl.exp(nl.negative(t)), 1.0)))
    return out
