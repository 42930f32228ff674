# expect: runtime_error
# problem: silu
# needle: traced from another source
# why: hands over the traced program of another, faster kernel as its own, the way a kernel
#      with a thread outside the sandbox handed over a concurrent profile's program (read from
#      its staging dir) or another run's best kernel traced anew: a genuine program for the same
#      signature, so every check of the program itself accepts it, and a slow kernel was
#      estimated at the other's speed (2.44x). The file is copied as it would be, with the
#      other kernel's source digest in it. The agent prices and executes only a program bound
#      to the source it asked about: runtime_error. (Its own kernel, traced honestly, is the
#      plain SiLU of the corpus; the confinement tests show the copy cannot be read any more.)
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

import hardware_agents.neuron.emulator.children as _children
import hardware_agents.neuron.emulator.kernel as _k
from hardware_agents.neuron.emulator.program import sources_digest

_OTHER = "# another profile's kernel.py: SiLU in one Scalar Engine instruction per tile\n"


@nki.jit
def _fast(x):
    M, N = x.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(M // 128):
        t = nl.load(x[i * 128 : (i + 1) * 128, :])
        nl.store(out[i * 128 : (i + 1) * 128, :], value=nisa.activation(op=nl.silu, data=t))
    return out


_real_compile, _real_encode = _k.compile_kernel, _children.encode


def _as_copied(prog):
    prog.source_sha256 = sources_digest([("kernel.py", _OTHER.encode())])
    return _real_encode(prog)


_k.compile_kernel = lambda kernel, specs: _real_compile(_fast, specs)
_children.encode = _as_copied


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.sequential_range(x.shape[0] // 128):
        t = nl.load(x[i * 128 : (i + 1) * 128, :])
        e = nl.exp(nl.negative(t))
        nl.store(out[i * 128 : (i + 1) * 128, :], value=nl.divide(t, nl.add(e, 1.0)))
    return out
