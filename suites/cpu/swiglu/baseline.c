/* swiglu: out (M, K) = (silu(x @ w_gate) * (x @ w_up)) @ w_down;
 * x (M, K), w_up (K, N), w_down (N, K), w_gate (K, N). One row of x at a time. */
/* Calling convention (AccelOpt CPU): void kernel(<inputs in definition order as const float*>,
 * <outputs as float*>). Tensors are dense, row-major (C order), 64-byte aligned, fp32. Axis
 * values arrive as #defines from the harness (-D flags); outputs are NaN on entry, inputs
 * must not be modified. Tunable constants are the #defines below. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#define ROWS_PER_ITEM 1  /* rows of x per parallel work item */

void kernel(const float* x, const float* w_up, const float* w_down, const float* w_gate, float* out) {
    #pragma omp parallel
    {
        float* up = malloc(sizeof(float) * N);
        float* gate = malloc(sizeof(float) * N);
        #pragma omp for schedule(static)
        for (int i0 = 0; i0 < M; i0 += ROWS_PER_ITEM)
            for (int i = i0; i < i0 + ROWS_PER_ITEM && i < M; i++) {
                const float* xr = x + (size_t)i * K;
                for (int n = 0; n < N; n++) { up[n] = 0.0f; gate[n] = 0.0f; }
                for (int k = 0; k < K; k++)
                    for (int n = 0; n < N; n++) {
                        up[n] += xr[k] * w_up[(size_t)k * N + n];
                        gate[n] += xr[k] * w_gate[(size_t)k * N + n];
                    }
                for (int n = 0; n < N; n++) up[n] *= gate[n] / (1.0f + expf(-gate[n]));
                float* o = out + (size_t)i * K;
                for (int k = 0; k < K; k++) o[k] = 0.0f;
                for (int n = 0; n < N; n++)
                    for (int k = 0; k < K; k++) o[k] += up[n] * w_down[(size_t)n * K + k];
            }
        free(up);
        free(gate);
    }
}
