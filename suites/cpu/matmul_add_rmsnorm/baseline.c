/* matmul_add_rmsnorm: y = x @ w + z; out = y * g / sqrt(mean(y^2) + 1e-5) per row;
 * x (M, K), w (K, N), z (M, N), g (N), out (M, N). */
/* Calling convention (AccelOpt CPU): void kernel(<inputs in definition order as const float*>,
 * <outputs as float*>). Tensors are dense, row-major (C order), 64-byte aligned, fp32. Axis
 * values arrive as #defines from the harness (-D flags); outputs are NaN on entry, inputs
 * must not be modified. Tunable constants are the #defines below. */
#include <math.h>
#include <stddef.h>

#define EPS 1e-5f
#define ROWS_PER_ITEM 1  /* rows per parallel work item */

void kernel(const float* x, const float* w, const float* z, const float* g, float* out) {
    #pragma omp parallel for schedule(static)
    for (int i0 = 0; i0 < M; i0 += ROWS_PER_ITEM)
        for (int i = i0; i < i0 + ROWS_PER_ITEM && i < M; i++) {
            float* o = out + (size_t)i * N;
            for (int j = 0; j < N; j++) o[j] = z[(size_t)i * N + j];
            for (int k = 0; k < K; k++) {
                float a = x[(size_t)i * K + k];
                for (int j = 0; j < N; j++) o[j] += a * w[(size_t)k * N + j];
            }
            float ss = 0.0f;
            for (int j = 0; j < N; j++) ss += o[j] * o[j];
            float inv = 1.0f / sqrtf(ss / N + EPS);
            for (int j = 0; j < N; j++) o[j] = o[j] * g[j] * inv;
        }
}
