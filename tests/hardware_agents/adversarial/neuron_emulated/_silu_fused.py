# SiLU in one Scalar Engine instruction per tile: the kernel the alias hack and its honest twin
# are measured against (`reference:` of aliases_* and honest_*; not a corpus file itself).
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def kernel(x):
    M, N = x.shape
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(M // 128):
        t = nl.load(x[i * 128 : (i + 1) * 128, :])
        nl.store(out[i * 128 : (i + 1) * 128, :], value=nisa.activation(op=nl.silu, data=t))
    return out
