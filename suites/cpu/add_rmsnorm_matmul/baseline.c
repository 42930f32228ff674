/* add_rmsnorm_matmul: y = x + z; y = y / sqrt(mean(y^2) + 1e-5) * g; out = y @ w;
 * x (M, K), w (K, N), z (M, K), g (K), out (M, N). */
/* Calling convention (AccelOpt CPU): void kernel(<inputs in definition order as const float*>,
 * <outputs as float*>). Tensors are dense, row-major (C order), 64-byte aligned, fp32. Axis
 * values arrive as #defines from the harness (-D flags); outputs are NaN on entry, inputs
 * must not be modified. Tunable constants are the #defines below. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#define EPS 1e-5f
#define ROWS_PER_ITEM 1  /* rows per parallel work item */

void kernel(const float* x, const float* w, const float* z, const float* g, float* out) {
    #pragma omp parallel
    {
        float* y = malloc(sizeof(float) * K);
        #pragma omp for schedule(static)
        for (int i0 = 0; i0 < M; i0 += ROWS_PER_ITEM)
            for (int i = i0; i < i0 + ROWS_PER_ITEM && i < M; i++) {
                float ss = 0.0f;
                for (int k = 0; k < K; k++) {
                    y[k] = x[(size_t)i * K + k] + z[(size_t)i * K + k];
                    ss += y[k] * y[k] / K;
                }
                float inv = 1.0f / sqrtf(ss + EPS);
                for (int k = 0; k < K; k++) y[k] = y[k] * inv * g[k];
                float* o = out + (size_t)i * N;
                for (int j = 0; j < N; j++) o[j] = 0.0f;
                for (int k = 0; k < K; k++)
                    for (int j = 0; j < N; j++) o[j] += y[k] * w[(size_t)k * N + j];
            }
        free(y);
    }
}
