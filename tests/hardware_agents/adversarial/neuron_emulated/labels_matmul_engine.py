# expect: compile_error
# problem: matmul
# needle: err_unsupported_engine
# why: relabels every nc_matmul of the traced program as a Scalar Engine instruction: the cost
#      model priced a 128x128x512 fp32 matmul as one pass of 128 elements per partition (an
#      eighth of its Tensor Engine time) while the executor, which ignores the label, computed
#      the product. A matmul runs on the Tensor Engine, whatever the program says.
import msgspec
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

import hardware_agents.neuron.emulator.kernel as _k
from hardware_agents.neuron.emulator.program import Instr, Loop

_real = _k.compile_kernel


def _forge(nodes):
    out = []
    for n in nodes:
        if isinstance(n, Loop):
            n = msgspec.structs.replace(n, body=_forge(n.body))
        elif isinstance(n, Instr) and n.op == "matmul":
            n = msgspec.structs.replace(n, engine="act")
        out.append(n)
    return out


def _compile(kernel, specs):
    prog = _real(kernel, specs)
    prog.body = _forge(prog.body)
    return prog


_k.compile_kernel = _compile


@nki.jit
def kernel(lhs, rhs):
    MT, TM, K = lhs.shape
    N = rhs.shape[1]
    out = nl.ndarray((MT, TM, N), dtype=nl.float32, buffer=nl.shared_hbm)
    w = nl.ndarray((K // 128, nl.par_dim(128), N), dtype=nl.float32, buffer=nl.sbuf)
    for k in nl.affine_range(K // 128):
        w[k] = nl.load(rhs[k * 128 : (k + 1) * 128, :])
    for m in nl.affine_range(MT):
        a = nl.load(lhs[m])
        acc = nl.zeros((TM, N), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(K // 128):
            a_t = nl.copy(nisa.nc_transpose(a[:, k * 128 : (k + 1) * 128]))
            acc += nisa.nc_matmul(a_t, w[k])
        nl.store(out[m], value=nl.copy(acc))
    return out
