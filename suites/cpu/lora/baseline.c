/* lora: out = x @ w + (x @ a) @ b; x (M, K), w (K, N), a (K, R), b (R, N), out (M, N). */
/* Calling convention (AccelOpt CPU): void kernel(<inputs in definition order as const float*>,
 * <outputs as float*>). Tensors are dense, row-major (C order), 64-byte aligned, fp32. Axis
 * values arrive as #defines from the harness (-D flags); outputs are NaN on entry, inputs
 * must not be modified. Tunable constants are the #defines below. */
#include <stddef.h>

#define ROWS_PER_ITEM 1  /* rows per parallel work item */

void kernel(const float* x, const float* w, const float* a, const float* b, float* out) {
    #pragma omp parallel for schedule(static)
    for (int i0 = 0; i0 < M; i0 += ROWS_PER_ITEM)
        for (int i = i0; i < i0 + ROWS_PER_ITEM && i < M; i++) {
            const float* xr = x + (size_t)i * K;
            float xa[R];
            for (int r = 0; r < R; r++) xa[r] = 0.0f;
            for (int k = 0; k < K; k++)
                for (int r = 0; r < R; r++) xa[r] += xr[k] * a[(size_t)k * R + r];
            float* o = out + (size_t)i * N;
            for (int j = 0; j < N; j++) o[j] = 0.0f;
            for (int k = 0; k < K; k++)
                for (int j = 0; j < N; j++) o[j] += xr[k] * w[(size_t)k * N + j];
            for (int r = 0; r < R; r++)
                for (int j = 0; j < N; j++) o[j] += xa[r] * b[(size_t)r * N + j];
        }
}
