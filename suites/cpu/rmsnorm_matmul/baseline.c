/* rmsnorm_matmul: y = x / sqrt(sum(x^2) / K) per row (no weight, no eps); out = y @ w;
 * x (M, K), w (K, N), out (M, N). */
/* Calling convention (AccelOpt CPU): void kernel(<inputs in definition order as const float*>,
 * <outputs as float*>). Tensors are dense, row-major (C order), 64-byte aligned, fp32. Axis
 * values arrive as #defines from the harness (-D flags); outputs are NaN on entry, inputs
 * must not be modified. Tunable constants are the #defines below. */
#include <math.h>
#include <stddef.h>

#define ROWS_PER_ITEM 1  /* rows per parallel work item */

void kernel(const float* x, const float* w, float* out) {
    #pragma omp parallel for schedule(static)
    for (int i0 = 0; i0 < M; i0 += ROWS_PER_ITEM)
        for (int i = i0; i < i0 + ROWS_PER_ITEM && i < M; i++) {
            const float* xr = x + (size_t)i * K;
            float ss = 0.0f;
            for (int k = 0; k < K; k++) ss += xr[k] * xr[k] / K;
            float inv = 1.0f / sqrtf(ss);
            float* o = out + (size_t)i * N;
            for (int j = 0; j < N; j++) o[j] = 0.0f;
            for (int k = 0; k < K; k++) {
                float a = xr[k] * inv;
                for (int j = 0; j < N; j++) o[j] += a * w[(size_t)k * N + j];
            }
        }
}
