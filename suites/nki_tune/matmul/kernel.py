"""lhs @ rhs with lhs (M, K), rhs (K, N): 128-row tiles of the output, TILE_N columns at a
time, accumulated in PSUM over 128-deep slices of K.

Tunables: TILE_N (the matmul's moving free size and the width of each rhs load) and
TRANSPOSED_LOAD (1: load each lhs tile already transposed with nl.load_transpose2d, so the
Tensor Engine does no transpose; 0: nl.matmul transposes it on the Tensor Engine)."""
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

TILE_N = 128  # tune: TILE_N in {128, 256, 512}
TRANSPOSED_LOAD = 0  # tune: TRANSPOSED_LOAD in {0, 1}


@nki.jit
def kernel(lhs, rhs):
    M, K = lhs.shape
    N = rhs.shape[1]
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        for n in nl.affine_range(N // TILE_N):
            acc = nl.zeros((128, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                w = nl.load(rhs[k * 128:(k + 1) * 128, n * TILE_N:(n + 1) * TILE_N])
                if TRANSPOSED_LOAD:
                    xt = nl.load_transpose2d(lhs[m * 128:(m + 1) * 128, k * 128:(k + 1) * 128])
                    acc += nl.matmul(xt, w, transpose_x=True)
                else:
                    x = nl.load(lhs[m * 128:(m + 1) * 128, k * 128:(k + 1) * 128])
                    acc += nl.matmul(x, w)
            nl.store(out[m * 128:(m + 1) * 128, n * TILE_N:(n + 1) * TILE_N], value=nl.copy(acc))
    return out
