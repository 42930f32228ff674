/* bmm: out[b] = lhs[b] @ rhs[b] for b < B; lhs (B, M, K), rhs (B, K, N), out (B, M, N). */
/* Calling convention (AccelOpt CPU): void kernel(<inputs in definition order as const float*>,
 * <outputs as float*>). Tensors are dense, row-major (C order), 64-byte aligned, fp32. Axis
 * values arrive as #defines from the harness (-D flags); outputs are NaN on entry, inputs
 * must not be modified. Tunable constants are the #defines below. */
#include <stddef.h>

#define TILE_M 4   /* rows of out per parallel work item */

void kernel(const float* lhs, const float* rhs, float* out) {
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int i0 = 0; i0 < M; i0 += TILE_M) {
            const float* A = lhs + (size_t)b * M * K;
            const float* W = rhs + (size_t)b * K * N;
            float* O = out + (size_t)b * M * N;
            int i1 = i0 + TILE_M < M ? i0 + TILE_M : M;
            for (int i = i0; i < i1; i++) {
                for (int j = 0; j < N; j++) O[(size_t)i * N + j] = 0.0f;
                for (int k = 0; k < K; k++) {
                    float a = A[(size_t)i * K + k];
                    for (int j = 0; j < N; j++) O[(size_t)i * N + j] += a * W[(size_t)k * N + j];
                }
            }
        }
}
