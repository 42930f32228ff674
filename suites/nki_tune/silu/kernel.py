"""SiLU, x / (1 + exp(-x)), on NeuronCore tiles of 128 rows x TILE_F columns.

Tunables: TILE_F (columns per tile: DMA transfer size and instructions per tile) and FUSED
(1: one Scalar Engine activation, nl.silu; 0: exp, add and divide as three instructions)."""
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

TILE_F = 128  # tune: TILE_F in {128, 256, 512, 1024, 2048}
FUSED = 0  # tune: FUSED in {0, 1}


@nki.jit
def kernel(x):
    M, N = x.shape
    out = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(M // 128):
        for j in nl.affine_range(N // TILE_F):
            t = nl.load(x[i * 128:(i + 1) * 128, j * TILE_F:(j + 1) * TILE_F])
            if FUSED:
                y = nisa.activation(op=nl.silu, data=t)
            else:
                e = nl.exp(nl.negative(t))
                y = nl.divide(t, nl.add(e, 1.0))
            nl.store(out[i * 128:(i + 1) * 128, j * TILE_F:(j + 1) * TILE_F], value=y)
    return out
