/* transpose_matmul: out[M][N] = lhs_t[K][M]^T @ rhs[K][N]. Straightforward k-outer loops. */
/* Calling convention (AccelOpt CPU): void kernel(<inputs in definition order as const float*>,
 * <outputs as float*>). Tensors are dense, row-major (C order), 64-byte aligned, fp32. Axis
 * values arrive as #defines from the harness (-D flags); outputs are NaN on entry, inputs
 * must not be modified. Tunable constants are the #defines below. */
#include <stddef.h>

#define TILE_M 4   /* rows of out per parallel work item */

void kernel(const float* lhs_t, const float* rhs, float* out) {
    #pragma omp parallel for schedule(static)
    for (int i0 = 0; i0 < M; i0 += TILE_M) {
        int i1 = i0 + TILE_M < M ? i0 + TILE_M : M;
        for (int i = i0; i < i1; i++)
            for (int j = 0; j < N; j++) out[(size_t)i * N + j] = 0.0f;
        for (int k = 0; k < K; k++)
            for (int i = i0; i < i1; i++) {
                float a = lhs_t[(size_t)k * M + i];
                for (int j = 0; j < N; j++) out[(size_t)i * N + j] += a * rhs[(size_t)k * N + j];
            }
    }
}
