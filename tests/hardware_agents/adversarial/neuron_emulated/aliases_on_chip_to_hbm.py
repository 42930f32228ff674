# expect: compile_error
# problem: silu
# needle: err_invalid_alias
# why: declares SBUF tiles as aliases of the input and output HBM tensors (through the tracer's
#      own `new_tensor`), so the Scalar Engine reads x and writes out with no DMA at all: the
#      executor viewed the HBM arrays and the cost model priced no load or store (an estimate
#      of a third of the bytes' time at HBM bandwidth). On-chip memory never aliases HBM: the
#      validator refuses an alias that is not a reshape of a whole HBM tensor.
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
    F = M * N // 128  # elementwise: any layout of the same bytes will do
    xs = View.full(t.new_tensor((128, F), "float32", "sbuf", name="x_sb", par_axis=0, alias=x.tid))
    os_ = View.full(t.new_tensor((128, F), "float32", "sbuf", name="out_sb", par_axis=0, alias=out.tid))
    os_[...] = nisa.activation(op=nl.silu, data=xs)
    t.written.add(out.tid)
    return out
