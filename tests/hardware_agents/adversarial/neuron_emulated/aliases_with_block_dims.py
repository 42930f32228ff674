# expect: compile_error
# problem: silu
# needle: err_invalid_alias
# why: an SBUF tensor with a block dimension declared as an alias of the input: the executor
#      viewed the HBM array with the strides of the whole tensor for the tile's dimensions and
#      read far outside it (the trusted executor died of SIGSEGV). The validator refuses the
#      alias before any strided view exists.
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

from hardware_agents.neuron.emulator import tracer as _tr
from hardware_agents.neuron.emulator.tracer import View


@nki.jit
def kernel(x):
    M, N = x.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    t = _tr.current()
    xs = View.full(t.new_tensor((M // 128, 128, N), "float32", "sbuf", name="x_sb", par_axis=1, alias=x.tid))
    for i in nl.affine_range(M // 128):
        nl.store(out[i * 128 : (i + 1) * 128, :], value=nisa.activation(op=nl.silu, data=xs[i]))
    return out
