# expect: compile_error
# problem: silu
# needle: err_unsupported_engine
# why: rewrites the engine labels of the traced program (the exponential to "any of the Scalar,
#      Vector and GpSimd engines", the multiply to "Vector or GpSimd"): the cost model spread
#      the work over engines that cannot run it while the executor, which ignores the label,
#      computed it right. An instruction's engine is fixed by its kind.
import msgspec
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

import hardware_agents.neuron.emulator.kernel as _k
from hardware_agents.neuron.emulator.program import Instr, Loop

_real = _k.compile_kernel
_LABEL = {"act": "any:act,dve,pool", "tensor_tensor": "any:dve,pool"}


def _forge(nodes):
    out = []
    for n in nodes:
        if isinstance(n, Loop):
            n = msgspec.structs.replace(n, body=_forge(n.body))
        elif isinstance(n, Instr) and n.op in _LABEL and n.args.get("fn") != "reciprocal":
            n = msgspec.structs.replace(n, engine=_LABEL[n.op])
        out.append(n)
    return out


def _compile(kernel, specs):
    prog = _real(kernel, specs)
    prog.body = _forge(prog.body)
    return prog


_k.compile_kernel = _compile


@nki.jit
def kernel(x):
    M, N = x.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(M // 128):
        t = nl.load(x[i * 128 : (i + 1) * 128, :])
        e = nisa.activation(op=nl.exp, data=t, scale=-1.0)
        d = nisa.tensor_scalar(data=e, op0=nl.add, operand0=1.0)
        r = nisa.reciprocal(data=d)
        nl.store(out[i * 128 : (i + 1) * 128, :], value=nisa.tensor_tensor(t, r, op=nl.multiply))
    return out
