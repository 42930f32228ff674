/* rope_single_freq_apply: x (D, T) with T = B*H*N; freqs_cos, freqs_sin (D2, T), D2 = D/2.
 * out[d]      = x[d] * cos[d] - x[d + D2] * sin[d]
 * out[d + D2] = x[d] * sin[d] + x[d + D2] * cos[d]      for d < D2, along T. */
/* Calling convention (AccelOpt CPU): void kernel(<inputs in definition order as const float*>,
 * <outputs as float*>). Tensors are dense, row-major (C order), 64-byte aligned, fp32. Axis
 * values arrive as #defines from the harness (-D flags); outputs are NaN on entry, inputs
 * must not be modified. Tunable constants are the #defines below. */
#include <stddef.h>

#define COLS_PER_ITEM 1024  /* columns of T per parallel work item */

void kernel(const float* x, const float* freqs_cos, const float* freqs_sin, float* out) {
    #pragma omp parallel for collapse(2) schedule(static)
    for (int d = 0; d < D2; d++)
        for (long t0 = 0; t0 < T; t0 += COLS_PER_ITEM) {
            long t1 = t0 + COLS_PER_ITEM < T ? t0 + COLS_PER_ITEM : T;
            const float* x0 = x + (size_t)d * T;
            const float* x1 = x + (size_t)(d + D2) * T;
            const float* c = freqs_cos + (size_t)d * T;
            const float* s = freqs_sin + (size_t)d * T;
            for (long t = t0; t < t1; t++) {
                out[(size_t)d * T + t] = x0[t] * c[t] - x1[t] * s[t];
                out[(size_t)(d + D2) * T + t] = x0[t] * s[t] + x1[t] * c[t];
            }
        }
}
