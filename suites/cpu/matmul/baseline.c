/* matmul: out[M][N] = lhs[M][K] @ rhs[K][N]. Straightforward blocked i-k-j loops. */
/* Calling convention (AccelOpt CPU): void kernel(<inputs in definition order as const float*>,
 * <outputs as float*>). Tensors are dense, row-major (C order), 64-byte aligned, fp32. Axis
 * values arrive as #defines from the harness (-D flags); outputs are NaN on entry, inputs
 * must not be modified. Tunable constants are the #defines below. */
#include <stddef.h>

#define TILE_M 4   /* rows of out per parallel work item */
#define TILE_K 64  /* depth of one pass over a block of rhs */

void kernel(const float* lhs, const float* rhs, float* out) {
    #pragma omp parallel for schedule(static)
    for (int i0 = 0; i0 < M; i0 += TILE_M) {
        int i1 = i0 + TILE_M < M ? i0 + TILE_M : M;
        for (int i = i0; i < i1; i++)
            for (int j = 0; j < N; j++) out[(size_t)i * N + j] = 0.0f;
        for (int k0 = 0; k0 < K; k0 += TILE_K) {
            int k1 = k0 + TILE_K < K ? k0 + TILE_K : K;
            for (int i = i0; i < i1; i++)
                for (int k = k0; k < k1; k++) {
                    float a = lhs[(size_t)i * K + k];
                    for (int j = 0; j < N; j++) out[(size_t)i * N + j] += a * rhs[(size_t)k * N + j];
                }
        }
    }
}
